"""laglab scenario new, laglab scenario list: from a ticket's numbers to a scenario file, and the shipped
scenarios with what each reproduces. Both read and write files only: no lab needed."""

from __future__ import annotations

import re
from pathlib import Path

import click

from laglab.cli.base import TIME, table
from laglab.cli.client import ROOT
from laglab.scenarios.plan import load_file, load_text
from laglab.scenarios.schema.fields import METRICS
from laglab.scenarios.schema.scenario import ScenarioError

SCENARIOS = ROOT / "scenarios"


@click.group()
def scenario() -> None:
    """Scenario files: make one from a ticket's numbers, list the shipped ones.

    \b
    Examples:
      laglab scenario new ticket-4711 --rtt 180ms --rate 2mbit --write-rate 150 --threads 8
      laglab scenario list
    """


@scenario.command()
@click.argument("name")
@click.option("--rtt", type=TIME, required=True, help="The link's round trip, e.g. 180ms (units: us, ms, s).")
@click.option("--rate", metavar="RATE", help="The link's rate, e.g. 2mbit (units: kbit, mbit, gbit).")
@click.option("--loss", metavar="PERCENT", help="Packet loss on the link, e.g. 0.5%.")
@click.option(
    "--write-rate", type=click.IntRange(1, 100_000), required=True, help="Transactions a second the application writes."
)
@click.option("--threads", type=click.IntRange(1, 1024), default=8, show_default=True, help="Its connections.")
@click.option(
    "--duration", type=TIME, default="600s", show_default=True, help="How long the load runs (units: us, ms, s)."
)
@click.option(
    "--server",
    metavar="VERSION",
    help="The customer's server, e.g. 'mysql 8.0.32' (recorded; the lab's image is set in .env).",
)
@click.option("--symptom", metavar="TEXT", help="What the ticket reports, in its words.")
@click.option(
    "--expect",
    metavar="CHECK",
    multiple=True,
    help=f"What a reproduction shows, '<metric> <op> <number>' (repeatable; metrics: {', '.join(METRICS)}). "
    "Default: lag grows (lag_slope > 0.01).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Default: scenarios/NAME.yaml.")
@click.option("--force", is_flag=True, help="Overwrite the file if it exists.")
def new(name, rtt, rate, loss, write_rate, threads, duration, server, symptom, expect, output, force) -> None:
    """Write a scenario file from a ticket's numbers, validated, ready to edit and run.

    \b
    Example:
      laglab scenario new ticket-4711 --rtt 180ms --rate 2mbit --write-rate 150 --threads 8 --symptom 'lag grows after 10 minutes' --expect 'lag_slope > 0.01'
    """
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
        raise click.BadParameter("lower-case letters, digits and -, up to 63", param_hint="NAME")
    checks = list(expect) or ["lag_slope > 0.01"]
    link = f"rtt: {rtt}" + (f", rate: {rate}" if rate else "") + (f", loss: '{loss}'" if loss else "")
    said = symptom or "(the ticket's symptom)"
    text = "\n".join(
        [
            f"# Made by `laglab scenario new` from a ticket: {said}",
            f"# The customer's server: {server or '(not given)'}; the lab's is MYSQL_IMAGE / MARIADB_IMAGE in .env.",
            "# PASS = the symptom reproduced (the assertions below hold in every point).",
            f"#   ./laglab run {output or f'scenarios/{name}.yaml'} --quick      (then without --quick)",
            f"name: {name}",
            f"description: {_quoted(said + (f' (server {server})' if server else ''))}",
            f"expected: {_quoted('the symptom reproduces: ' + ', '.join(checks) + ' in every point, nothing lost')}",
            "data: {tables: 4, rows: 10000}",
            f"link: {{between: [mysql-source, mysql-target], {link}}}",
            f"load: {{tool: sysbench, script: oltp_write_only, threads: {threads}, rate: {write_rate}, duration: {duration}}}",
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
    try:
        load_text(text, source=name)
        load_text(text, quick=True, source=name)
    except ScenarioError as error:
        raise click.BadParameter(f"{error.path}: {error.message}") from None
    path = output or SCENARIOS / f"{name}.yaml"
    if path.exists() and not force:
        raise click.ClickException(f"{path} exists (--force overwrites it)")
    path.write_text(text)
    click.echo(f"wrote {path}: {link.replace(': ', ' ')}, {write_rate} TPS over {threads} threads for {duration}")
    click.echo(f"next: ./laglab run {path} --quick")


@scenario.command(name="list")
def list_scenarios() -> None:
    """The shipped scenarios: file, points, what each reproduces (its description) and what a run
    should show (its `expected`).

    \b
    Example:  laglab scenario list
    """
    rows = []
    for path in sorted(SCENARIOS.glob("*.yaml")):
        try:
            plan = load_file(path)
            rows.append((path.name, len(plan.points), plan.scenario.description or "-"))
            rows.append(("", "", f"expected: {plan.scenario.expected or '-'}"))
        except ScenarioError as error:
            rows.append((path.name, "-", f"invalid: {error}"))
    table(("file", "points", "reproduces"), rows)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
