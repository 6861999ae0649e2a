"""laglab profile: a write profile from binlog files (laglab/load/binlog_profile.py). It reads files on this
machine and needs no lab: the decoder is the host's mysqlbinlog or mariadb-binlog, else the one in the
lab's MySQL image or loadgen's (`docker run --network none`, the file's folder mounted read-only)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from laglab.cli import client
from laglab.cli.base import Failure, human_bytes
from laglab.load.binlog_profile import BinlogError, profile, read_file


def images() -> dict[str, str]:
    """The images `make up` resolved (.env's RESOLVED_MYSQL_IMAGE), loadgen's for MariaDB's decoder."""
    from laglab import config

    path = client.env_file()
    found = config.read_env_file(path) if path.exists() else {}
    return {"mysql": found.get("RESOLVED_MYSQL_IMAGE") or "laglab/mysql:9.7-debian", "mariadb": "laglab/loadgen:dev"}


def summary_lines(made: dict, out: Path) -> list[str]:
    size = made["transaction_bytes"]
    lines = [
        f"profile of {', '.join(made['files'])} ({', '.join(made['servers']) or 'server unknown'}, {made['format']} format) -> {out}",
        f"  {made['transactions']} transactions in {made['span_seconds']} s: {human_bytes(made['bytes_per_second'])}/s of binlog, "
        f"{made['rows']} rows",
        f"  transaction size: p50 {human_bytes(size['p50'])}, p99 {human_bytes(size['p99'])}, max {human_bytes(size['max'])}; "
        f"{made['large']['count']} of {human_bytes(made['large']['threshold_bytes'])} or more",
    ]
    if made["parallelism"]:
        p = made["parallelism"]
        lines.append(f"  parallelism recorded ({p['source']}): mean {p['mean']:g}, max {p['max']}")
    lines.append(
        f"  tables: {', '.join(t['name'] + ' (' + str(t['columns']) + ' columns)' for t in made['tables'][:5]) or '-'}"
    )
    return lines


@click.command(name="profile")
@click.argument("binlogs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where the profile goes (default: results/profile-<first file>.json).",
)
@click.option("--anonymize", is_flag=True, help="Replace schema and table names by stable tokens.")
@click.option(
    "--exclude-table",
    "exclude",
    multiple=True,
    metavar="SCHEMA.TABLE",
    help="Leave out the transactions that wrote only this table (a glob: 'percona.heartbeat', 'laglab_meta.*'); "
    "repeatable. A monitor's heartbeat is not the application's load.",
)
@click.option(
    "--start-position",
    type=click.IntRange(4),
    help="Read the first file from this event's position (`laglab load status` shows where a replay began).",
)
@click.option("--json", "json_output", is_flag=True, help="Print the profile itself.")
def profile_command(
    binlogs: tuple[Path, ...],
    output: Path | None,
    anonymize: bool,
    exclude: tuple[str, ...],
    start_position: int | None,
    json_output: bool,
) -> None:
    """A write profile from binlog files, in their order: per second, transactions, bytes and events;
    transaction sizes (bytes, rows, statements) with their tail; tables and their row widths; the
    share of large transactions; the format; the parallelism the server recorded. No row value is
    kept. Needs no lab.

    \b
    Examples:
      laglab profile scenarios/binlogs/shop.000003
      laglab profile scenarios/binlogs/shop.000003 --anonymize -o results/shop-anonymized.json
      laglab profile scenarios/binlogs/shop.000003 --exclude-table 'laglab_meta.*' -o results/shop.json
    """
    try:
        found = images()
        readers = [read_file(path, found, start=start_position if i == 0 else None) for i, path in enumerate(binlogs)]
        made = profile(readers, anonymize=anonymize, exclude=exclude)
    except BinlogError as error:
        raise Failure(error.message, "usage") from None
    except OSError as error:
        raise Failure(f"file: {error}", "usage") from None
    out = output or Path("results") / f"profile-{binlogs[0].name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(made, indent=2) + "\n")
    if json_output:
        click.echo(json.dumps(made, indent=2))
    else:
        for line in summary_lines(made, out):
            click.echo(line)
