"""laglab scenario new, laglab scenario list: from a ticket's numbers to a scenario file, and the shipped
scenarios with what each reproduces. Both read and write files only: no lab needed."""

from __future__ import annotations

import re
from pathlib import Path

import click

from laglab.cli.base import TIME, Session, pass_session, table
from laglab.cli.client import ROOT
from laglab.replicators.servers import IMAGE
from laglab.scenarios.plan import load_file, load_text
from laglab.scenarios.schema.fields import METRICS
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping.params import format_time, parse_time

SCENARIOS = ROOT / "scenarios"
TICKETS = SCENARIOS / "tickets"  # a user's own scenarios (git-ignored): `scenario list` shows them as "yours"


@click.group()
def scenario() -> None:
    """Scenario files: make one from a ticket's numbers, list the shipped ones.

    \b
    Examples:
      laglab scenario new ticket-4711 --rtt 180ms --rate 2Mbit/s --write-rate 150 --threads 8 --onset 10m
      laglab scenario list
    """


@scenario.command()
@click.argument("name")
@click.option("--rtt", type=TIME, required=True, help="The link's round trip, e.g. 180ms.")
@click.option(
    "--rate", metavar="RATE", help="The link's rate, e.g. 2Mbit/s (2mbit and 2Mbps are megabits too; 2MB/s megabytes)."
)
@click.option("--loss", metavar="PERCENT", help="Packet loss on the link, e.g. 0.5%.")
@click.option(
    "--write-rate", type=click.IntRange(1, 100_000), help="Transactions a second the application writes (sysbench)."
)
@click.option("--threads", type=click.IntRange(1, 1024), default=8, show_default=True, help="Its connections.")
@click.option(
    "--profile",
    "profile_file",
    metavar="FILE",
    help="The customer's write profile (`laglab profile` of their binlog, under scenarios/) as the load, "
    "instead of sysbench at --write-rate.",
)
@click.option("--onset", type=TIME, help="When the ticket says the symptom starts, e.g. 10m: the load runs past it.")
@click.option("--duration", type=TIME, help="How long the load runs. Default: past the onset, else 10m.")
@click.option(
    "--server",
    metavar="IMAGE",
    help="The customer's server, e.g. mysql:8.0.32: the scenario is pinned to it (a run on other versions is "
    "refused; `laglab run --on-lab-servers` runs it anyway and the report says so).",
)
@click.option("--symptom", metavar="TEXT", help="What the ticket reports, in its words.")
@click.option(
    "--expect",
    metavar="CHECK",
    multiple=True,
    help=f"What a reproduction shows, '<metric> <op> <number>' (repeatable; metrics: {', '.join(METRICS)}). "
    "Default: lag grows (lag_slope > 0.01).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Default: scenarios/tickets/NAME.yaml."
)
@click.option("--force", is_flag=True, help="Overwrite the file if it exists.")
def new(name, rtt, rate, loss, write_rate, threads, profile_file, onset, duration, server, symptom, expect, output, force) -> None:  # fmt: skip
    """Write a ticket's scenario from its numbers, validated, ready to edit and run. It goes to
    scenarios/tickets/ (yours, not shipped: git ignores it); its verdict says REPRODUCED or NOT
    REPRODUCED.

    \b
    Example:
      laglab scenario new ticket-4711 --rtt 180ms --rate 2Mbit/s --write-rate 150 --threads 8 --onset 10m --server mysql:8.0.32 --symptom 'lag grows after 10 minutes of the nightly batch' --expect 'lag_slope > 0.01'
    """
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
        raise click.BadParameter("lower-case letters, digits and -, up to 63", param_hint="NAME")
    if (write_rate is None) == (profile_file is None):
        raise click.BadParameter("give the load: --write-rate (sysbench) or --profile (their binlog's profile)",
                                 param_hint="--write-rate / --profile")  # fmt: skip
    if server is not None:
        server = server.strip().replace(" ", ":", 1) if ":" not in server else server.strip()
        if not re.fullmatch(IMAGE, server):
            raise click.BadParameter(f"{server!r} is not an image name like mysql:8.0.32", param_hint="--server")
    run_for = duration or (_past(onset) if onset else "10m")
    checks = list(expect) or ["lag_slope > 0.01"]
    link = f"rtt: {rtt}" + (f", rate: {rate}" if rate else "") + (f", loss: '{loss}'" if loss else "")
    said = symptom or "(the ticket's symptom)"
    if profile_file is not None:
        load = f"load: {{tool: profile, file: {_under_scenarios(profile_file)}, duration: {run_for}}}"
        load_words = f"the replay of {profile_file}"
    else:
        load = f"load: {{tool: sysbench, script: oltp_write_only, threads: {threads}, rate: {write_rate}, duration: {run_for}}}"
        load_words = f"{write_rate} TPS over {threads} threads"
    path = output or TICKETS / f"{name}.yaml"
    text = "\n".join(
        [
            f"# Made by `laglab scenario new` from a ticket: {said}",
            "# REPRODUCED = the checks below hold in every point: the symptom shows here as in the ticket.",
            f"#   ./laglab run {_shown(path)} --quick      (a first look; then without --quick: the onset needs the whole run)",
            f"name: {name}",
            f"description: {_quoted(said + (f' (server {server})' if server else ''))}",
            f"expected: {_quoted('the symptom reproduces: ' + ', '.join(checks) + ' in every point, nothing lost')}",
            "verdict: {pass: reproduced, fail: not reproduced}",
            *([f"onset: {onset}"] if onset else []),
            *([f"servers: {{source: '{server}', target: '{server}'}}"] if server else []),
            "data: {tables: 4, rows: 10000}",
            f"link: {{between: [mysql-source, mysql-target], {link}}}",
            load,
            "warmup: 10s",
            "assertions:",
            *[f"  - {_quoted(c)}" for c in checks],
            "quick:",
            "  data.rows: 1000",
            "  load.duration: 20s",
            "  warmup: 3s",
            "",
        ]
    )
    base = SCENARIOS
    try:
        load_text(text, source=name, base_dir=base)
        load_text(text, quick=True, source=name, base_dir=base)
    except ScenarioError as error:
        raise click.BadParameter(f"{error.path}: {error.message}") from None
    if path.exists() and not force:
        raise click.ClickException(f"{path} exists (--force overwrites it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    pinned = f", pinned to {server}" if server else ""
    click.echo(f"wrote {_shown(path)}: {link.replace(': ', ' ')}, {load_words} for {run_for}{pinned}")
    click.echo(f"next: ./laglab run {_shown(path)} --quick")


def _past(onset: str) -> str:
    """Long enough to pass the onset and see what follows it: half as long again, at least a minute more."""
    seconds = parse_time("onset", onset, high=86400.0)
    total = seconds + max(seconds / 2, 60.0)
    return f"{total / 60:g}m" if total % 60 == 0 else format_time(total)


def _under_scenarios(file: str) -> str:
    """A profile as the scenario names it: relative to the scenarios folder, which it must be under."""
    path = Path(file).resolve()
    if SCENARIOS.resolve() not in path.parents:
        raise click.BadParameter(f"{file}: put it under scenarios/ (e.g. scenarios/profiles/): the controller "
                                 "reads a scenario's files there", param_hint="--profile")  # fmt: skip
    if not path.is_file():
        raise click.BadParameter(
            f"{file}: no such file (`laglab profile BINLOG -o FILE` makes one)", param_hint="--profile"
        )
    return str(path.relative_to(SCENARIOS.resolve()))


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


@scenario.command(name="list")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="json: one object per file (for scripts); --json says the same.")  # fmt: skip
@pass_session
def list_scenarios(session: Session, fmt: str) -> None:
    """The shipped scenarios and yours (scenarios/tickets/, from `scenario new`): file, points, what each
    reproduces (its description) and what a run should show (its `expected`).

    \b
    Examples:
      laglab scenario list
      laglab scenario list -o json
    """
    found = []
    for whose, folder in (("shipped", SCENARIOS), ("yours", TICKETS)):
        for path in sorted(folder.glob("*.yaml")):
            entry = {"file": _shown(path), "whose": whose, "points": None, "description": None, "expected": None,
                     "error": None}  # fmt: skip
            try:
                plan = load_file(path)
                entry.update(points=len(plan.points), description=plan.scenario.description or None,
                             expected=plan.scenario.expected or None)  # fmt: skip
            except ScenarioError as error:
                entry["error"] = str(error)
            found.append(entry)
    if fmt == "json":
        session.json_output = True
    session.emit({"scenarios": found}, _scenario_rows)


def _scenario_rows(answer: dict) -> None:
    rows = []
    for entry in answer["scenarios"]:
        name = entry["file"] + (" (yours)" if entry["whose"] == "yours" else "")
        if entry["error"]:
            rows.append((name, "-", f"invalid: {entry['error']}"))
            continue
        rows.append((name, entry["points"], entry["description"] or "-"))
        rows.append(("", "", f"expected: {entry['expected'] or '-'}"))
    table(("file", "points", "reproduces"), rows)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
