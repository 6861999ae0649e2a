"""laglab run, laglab runs, laglab report: scenarios through POST/GET/DELETE /api/runs."""

from __future__ import annotations

import re
import time
from pathlib import Path

import click

from laglab.cli.base import Failure, Session, check_failed, pass_session, refused, table
from laglab.scenarios.analysis.outcome import point_outcome, run_outcome
from laglab.scenarios.plan import Plan, describe_point, load_file
from laglab.scenarios.report import words
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping.params import format_time
from laglab.shaping.plan import SEED_MAX


def clock(seconds: float) -> str:
    """A duration in words that cannot be read as a time of day: '45 s', '12 min 59 s', '1 h 05 min'
    (#36.3: 'ETA 12:59' read as a clock time)."""
    seconds = max(round(seconds), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def plan_lines(plan: Plan) -> list[str]:
    """The expanded points, each in words, with its link, load and timeline: what --plan prints. With a
    search, each point is a search and says the most probes it can take."""
    lines = []
    if plan.search is not None:
        most = plan.search.knee_search().most_probes()
        lines.append(f"  search: {plan.search.describe()}; at most {most} probes per point below, "
                     f"an undecided probe repeated with a window twice as long")  # fmt: skip
    for point in plan.points:
        s = point.scenario
        if s.link.matrix is not None:
            where = "matrix " + ", ".join(f"{a}-{b} {v['rtt']}" for (a, b), v in s.link.matrix.link_settings().items())
        else:
            where = f"link rtt={format_time(s.link.rtt)} rate={s.link.rate or '-'}"
        searched = plan.search.param if plan.search is not None else None
        if searched in ("link.rtt", "link.rate"):  # the probes' own value, not the group's placeholder
            where = re.sub(rf"{searched.split('.')[1]}=\S+", f"{searched.split('.')[1]}=(searched)", where)
        if s.cluster is not None:
            delay = (
                where if s.link.matrix is not None else f"node {s.cluster.delayed_node} +{format_time(s.cluster.delay)}"
            )
            lines.append(f"  {point.index + 1:>2}. {describe_point(point):40} {s.replicator.kind}: {delay}, {s.load.tool} on node "
                         f"{s.cluster.write_node}, threads={s.load.threads}, queries={s.load.queries}")  # fmt: skip
        elif s.load.replay is not None:
            replay = s.load.replay
            lines.append(f"  {point.index + 1:>2}. {describe_point(point):40} {where}  load: replay of {s.load.file} "
                         f"x{s.load.speed:g}, threads={replay.profile.threads()} for {format_time(s.load.duration)}")  # fmt: skip
        else:
            lines.append(f"  {point.index + 1:>2}. {describe_point(point):40} {where}  load {s.load.script} "
                         f"threads={'(searched)' if searched == 'load.threads' else s.load.threads} "
                         f"rate={'(searched)' if searched == 'load.rate' else s.load.rate or 'max'} for {format_time(s.load.duration)}")  # fmt: skip
        for number, step in enumerate(s.timeline, start=1):
            times = step.occurrences(s.load.duration)
            repeat = f" x{len(times)} every {format_time(step.every)}" if step.every else ""
            lasting = f" for {format_time(step.duration)}" if step.duration else ""
            lines.append(f"        timeline {number}: at {format_time(step.at)}{repeat}{lasting}: {step.action}")
    return lines


def summary_lines(run: dict) -> list[str]:
    lines = [
        f"{run['status']}{': ' + run['reason'] if run['reason'] else ''} - report: {run['results']}/report.md "
        f"(to attach: {run['results']}/report.html)"
    ]
    for point in run.get("summary") or []:
        decided = point_outcome(point)
        verdict = {"PASS": "pass", "NO CHECKS": "no checks"}.get(decided.verdict, decided.verdict)
        if decided.verdict == "NOT VALID":
            verdict += f" ({'; '.join(decided.reasons)})"
        if "cluster" in point:
            lines.append(f"  {point['point']:>2}. {words.params(point['params'])} {point['load_seconds']} s, QPS {point['qps']}: {verdict}")  # fmt: skip
            continue
        lines.append(f"  {point['point']:>2}. {words.params(point['params'])} max lag {point['max_lag_seconds']} s, p95 {point['p95_lag_seconds']} s, "
                     f"slope {point['lag_slope']}, TPS {point['tps']}, link {point['link_mbit']} Mbit/s: {verdict}"
                     + (f" [{point['probe']['verdict']}]" if point.get("probe") else ""))  # fmt: skip
    for knee in run.get("knees") or []:
        at = f" at {words.params(knee['at'])}" if knee["at"] else ""
        lines.append(f"  knee{at}: {knee_words(knee)}")
        for check in knee.get("expect") or []:
            lines.append(f"    {check['expectation']}: {'pass' if check['passed'] else 'FAIL'} (knee {check['knee']})")
    for failed in run.get("cleanup_errors") or []:
        repair = f" - repair: {failed['repair']}" if failed.get("repair") else ""
        lines.append(f"  cleanup step {failed['step']} failed: {failed['error']}{repair}")
    if run.get("identical") is False:
        lines.append("  consistency: the target differs from the source (something was lost): see the report")
    decided = run_outcome(run)
    if run["status"] == "completed":
        lines.append(f"verdict: {decided.words}" + (f" ({decided.reasons[0]})" if decided.reasons else ""))
    return lines


def knee_words(knee: dict) -> str:
    """A search's answer in a line: `highest load rate sustained 141 TPS (not at 150 TPS), 5 probes`."""
    if knee["knee"] is None:
        return f"nothing from the start held ({knee['probes']} probes)"
    found = f"{knee['goal']} {words.axis(knee['param'])} sustained {words.value(knee['param'], knee['knee'])}"
    bad = knee["bracket"][1] if knee.get("bracket") else None
    bracket = f" (not at {words.value(knee['param'], bad)})" if bad is not None else " (the whole range held)"
    return f"{found}{bracket}, {knee['probes']} probes, {knee['state']}"


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--quick", is_flag=True, help="The scenario's `quick` overrides (CI-sized).")
@click.option(
    "--plan", "plan_only", is_flag=True, help="Print the expanded points and how long they take; run nothing."
)
@click.option(
    "--seed", type=click.IntRange(0, SEED_MAX), default=None,
    help="The links' seed (over the scenario's `seed:`): the same packets dropped in the same order on every run.",
)  # fmt: skip
@click.option(
    "--on-lab-servers", is_flag=True,
    help="A scenario pinned to server versions (`servers:`) runs on the lab's servers anyway; the report says which "
    "ran in their place (without it such a run is refused).",
)  # fmt: skip
@pass_session
def run(session: Session, file: Path, quick: bool, plan_only: bool, seed: int | None, on_lab_servers: bool) -> None:
    """Run a scenario and follow it to the end (progress and the time to go); Ctrl-C interrupts it (as
    `laglab runs stop` does from another terminal), and the controller clears shaping, stops the load
    and keeps partial results.

    Exit 1 when the run failed or was interrupted, an assertion or a search's `expect` did not hold (a
    ticket's NOT REPRODUCED), or the target differs from the source after it; 5 when it is not valid (a
    point measured something other than what was asked); 2 when the file is not a valid scenario.

    \b
    Examples:
      laglab run scenarios/customer-example-rtt180-2mbit.yaml --plan
      laglab run scenarios/customer-example-rtt180-2mbit.yaml --quick
    """
    try:
        plan = load_file(file, quick=quick)
    except (ScenarioError, OSError) as error:
        raise Failure(f"{file}: {error}", "usage") from error
    if not session.json_output:
        if plan.search is None:
            click.echo(f"{plan.scenario.name}: {len(plan.points)} point(s), about {clock(plan.eta_seconds())} in all{' (quick)' if quick else ''}")  # fmt: skip
        else:
            click.echo(f"{plan.scenario.name}: {len(plan.points)} search(es), at most {plan.most_points()} probes, "
                       f"at most {clock(plan.eta_seconds())}{' (quick)' if quick else ''}")  # fmt: skip
        for line in plan_lines(plan):
            click.echo(line)
    if plan_only:
        if session.json_output:
            session.emit({"scenario": plan.scenario.name, "points": [describe_point(p) for p in plan.points], "eta_seconds": plan.eta_seconds(),
                          "most_points": plan.most_points(), "search": None if plan.search is None else plan.search.describe()}, None)  # fmt: skip
        return
    body = {"scenario": file.read_text(), "quick": quick, **({"seed": seed} if seed is not None else {}),
            **({"on_lab_servers": True} if on_lab_servers else {})}  # fmt: skip
    answer = session.request("POST", "/api/runs", body, timeout=30)
    if answer.status_code == 400:
        raise Failure(answer.error, "usage")
    if not answer.ok:
        raise refused(f"POST /api/runs: {answer.error} ({answer.status_code})")
    current = answer.json()
    if not session.json_output:
        click.echo(f"run {current['id']} -> {current['results']}")
    last = None
    try:
        while current["step"] != "done":
            time.sleep(1)
            current = session.call("GET", f"/api/runs/{current['id']}")
            words_now = f" ({current['point_words']})" if current.get("point_words") else ""
            line = f"point {current['point'] or '-'}/{current['points']}{words_now}: {current['step']}"
            if line != last and not session.json_output:
                click.echo(
                    f"[{clock(current['elapsed_seconds'])} elapsed, about {clock(current['eta_seconds'])} to go] {line}"
                )
            last = line
    except KeyboardInterrupt:
        click.echo("\ninterrupting: the controller cleans up and keeps partial results ...", err=True)
        session.call("DELETE", f"/api/runs/{current['id']}")
        while current["step"] != "done":
            time.sleep(1)
            current = session.call("GET", f"/api/runs/{current['id']}")
    session.emit(current, lambda r: [click.echo(line) for line in summary_lines(r)])
    if current["status"] != "completed":
        raise check_failed(f"run {current['id']} {current['status']}")
    decided = run_outcome(current)  # decided once by the controller (scenarios/outcome.py)
    if decided.verdict == "NOT VALID":  # exit 5: the checks say nothing either way
        raise Failure(
            f"run {current['id']}: not valid: {decided.reasons[0] if decided.reasons else '(above)'}", "not valid"
        )
    if not decided.held:
        raise check_failed(f"run {current['id']}: {decided.words.lower()} (above)")


@click.group(invoke_without_command=True)
@pass_session
def runs(session: Session) -> None:
    """This controller's scenario runs, newest last; `runs stop` interrupts one.

    \b
    Examples:
      laglab runs
      laglab runs stop
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    body = session.call("GET", "/api/runs")["runs"]
    session.emit(body, lambda rs: table(
        ("id", "status", "points", "step", "elapsed", "results"),
        [(r["id"], r["status"], f"{r['point'] or '-'}/{r['points']}", r["step"], clock(r["elapsed_seconds"]), r["results"]) for r in rs],
    ))  # fmt: skip


@runs.command(name="stop")
@click.argument("run_id", metavar="[ID]", required=False)
@pass_session
def stop_run(session: Session, run_id: str | None) -> None:
    """Interrupt a run (default: the one in progress), as Ctrl-C in `laglab run` does: the controller
    clears shaping, stops the load and keeps the partial results with their report.

    \b
    Examples:
      laglab runs stop
      laglab runs stop 20261127T011500Z-ticket-4711
    """
    if run_id is None:
        going = [r for r in session.call("GET", "/api/runs")["runs"] if r["step"] != "done"]
        if not going:
            raise refused("runs stop: no run in progress (laglab runs lists them)")
        run_id = going[-1]["id"]
    elif session.call("GET", f"/api/runs/{run_id}")["step"] == "done":
        raise refused(f"runs stop: run {run_id} has finished; nothing to stop")
    stopped = session.call("DELETE", f"/api/runs/{run_id}")
    session.emit(stopped, lambda r: click.echo(f"stopping run {r['id']}: the controller cleans up; results in {r['results']}"))  # fmt: skip


@click.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report(run_dir: Path) -> None:
    """Rebuild a run's plots and report.md from its files (results/<run>/); needs no lab.

    \b
    Example:  laglab report results/RUN      RUN: a run's folder, as `laglab runs` lists it
    """
    from laglab.scenarios.report import markdown as reports

    if not (run_dir / "summary.json").exists():
        raise Failure(f"{run_dir}: no summary.json (a run's folder under results/)", "usage")
    try:
        path = reports.render(run_dir.resolve())
    except (OSError, ValueError, KeyError) as error:
        raise Failure(f"{run_dir}: {error}", "usage") from error
    click.echo(f"report: {path}")
