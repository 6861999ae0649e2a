"""#52.1: a point's and a run's outcome, decided once (scenarios/analysis/outcome.py), and every reader of it
saying the same: summary.json, report.md, report.html, `laglab run`'s lines and its exit code. Before,
report.md decided from the assertions and the consistency check alone while the CLI also counted link
verification, load errors and failed timeline steps: a run could be PASS in its report and exit 1.

Each point here is made by the runner's own `summarise.point_result` from a real plan; the run's record
by the runner's own `run_files.summary_doc`; the report by `report.render`; the CLI against the stand-in
controller (tests/unit/conftest.py) answering with the run as `ScenarioRun.as_json` gives it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from laglab.cli import cli
from laglab.scenarios.analysis.outcome import Outcome, of_point, of_run, run_outcome
from laglab.scenarios.analysis.summarise import point_result
from laglab.scenarios.plan import load_text
from laglab.scenarios.report import markdown as report
from laglab.scenarios.run import files as run_files
from laglab.scenarios.run.measure import Window

SCENARIO = "name: ticket\nlink: {rtt: 100ms}\nload: {rate: 50, duration: 60s}\nassertions: ['max_lag_seconds < 2']\n"
PLAN = load_text(SCENARIO)
VERIFIED = {"rtt_asked_ms": 100.0, "rtt": {"median_ms": 100.4}, "rtt_ok": True, "ok": True}
NOT_AS_ASKED = {"rtt_asked_ms": 100.0, "rtt": {"median_ms": 0.2}, "rtt_ok": False, "ok": False}
# An event as TimelineRun._run records a step that raised.
STEP_FAILED = {"point": 1, "step": 1, "text": "kill mysql-target", "asked_epoch": 30.0, "asked": "2026-11-28T22:00:30Z",
               "at_end": False, "effect_epoch": None, "effect_ms": None, "ends_disruption": False,
               "error": "no container", "action": "kill", "catch_up_seconds": None}  # fmt: skip


def measured(verification=VERIFIED, load_error=None, events=(), lag=1.0):
    """One point's result as the runner makes it (summarise.point_result) from what it measured."""
    window = Window(load_start=0.0, start=10.0, end=70.0, load_rows=[{"epoch": 11.0, "tps": 50.0, "qps": 200.0}],
                    load_error=load_error)  # fmt: skip
    figures = {"links_mbit": {}, "lag_samples": 120, "gaps": 0, "max_lag_seconds": lag, "p95_lag_seconds": lag / 2,
               "lag_slope": 0.0, "lag_slope_ci": None}  # as PointRecording.figures gives them  # fmt: skip
    return point_result(PLAN.points[0].plan(), verification, window, figures, {}, list(events))


def run_of(points: list[dict], status="completed", reason=None, consistency=None, plan=PLAN):
    """A ScenarioRun as summary_doc and as_json read it."""
    consistency = {"identical": True, "differences": [], "gtid": None} if consistency is None else consistency
    return SimpleNamespace(
        id="r1", plan=plan, status=status, reason=reason, started=1.0e9, finished=1.0e9 + 90, summary=points,
        points=SimpleNamespace(doc=lambda: {}), cleanup_errors=[], environment={}, knees=[],
        consistency=consistency,
    )  # fmt: skip


def written(tmp_path, run) -> tuple[dict, str, str]:
    """summary.json as the runner writes it, then report.md and report.html from the folder."""
    folder = tmp_path / "run"
    folder.mkdir()
    doc = run_files.summary_doc(run, run.consistency)
    (folder / "summary.json").write_text(json.dumps(doc))
    md = report.render(folder)
    return doc, md.read_text(), (folder / "report.html").read_text()


def cli_run(controller, tmp_path, run, doc: dict):
    """`laglab run` against a controller whose run ended as `run` (ScenarioRun.as_json's fields)."""
    points = [p.as_json() for p in run.summary]
    answer = {"id": run.id, "scenario": "ticket", "status": run.status, "reason": run.reason, "points": 1,
              "point": None, "point_params": None, "step": "done", "elapsed_seconds": 90.0, "eta_seconds": 0.0,
              "results": "results/r1", "summary": points, "identical": run.consistency.get("identical"),
              "cleanup_errors": [], "knees": [], "seed": None,
              "outcome": of_run(run.status, run.reason, points, doc["consistency"], [],
                                run.plan.scenario.verdict.words()).as_json()}  # fmt: skip
    controller.answer("POST /api/runs", answer, 201)
    scenario = tmp_path / "ticket.yaml"
    scenario.write_text(SCENARIO)
    return CliRunner().invoke(cli, ["--url", controller.url, "--token", "", "run", str(scenario)])


@pytest.mark.parametrize(
    ("point", "verdict", "why"),
    [
        (dict(), "PASS", None),
        (dict(lag=3.0), "FAIL", "`max_lag_seconds < 2` did not hold"),
        (dict(verification=NOT_AS_ASKED), "NOT VALID", "the link was not as asked: RTT 0.2 ms for 100.0 ms asked"),
        (dict(load_error="FATAL: mysql_stmt_execute() failed"), "NOT VALID", "the load failed: FATAL"),
        (dict(events=[STEP_FAILED]), "NOT VALID", "timeline step 1 (kill mysql-target) failed: no container"),
        (dict(verification=NOT_AS_ASKED, lag=3.0), "NOT VALID", "the link was not as asked"),
    ],
    ids=["held", "assertion failed", "link not as asked", "load error", "timeline step failed", "not valid over fail"],
)
def test_every_reader_says_the_one_outcome(controller, tmp_path, point, verdict, why):
    result = measured(**point)
    assert result.outcome.verdict == verdict and result.passed == (verdict == "PASS")
    assert why is None or any(r.startswith(why) for r in result.outcome.reasons), result.outcome
    run = run_of([result])
    doc, md, html = written(tmp_path, run)
    assert doc["outcome"]["verdict"] == verdict and run_outcome(doc).verdict == verdict
    assert md.startswith(f"# ticket: {verdict}\n\n")
    assert f"Verdict: {verdict}." in md.replace("Verdict: no checks.", "Verdict: NO CHECKS.")
    if verdict == "NOT VALID":
        assert "**not valid**: " in md  # the point's row says why its checks mean nothing
    assert f"ticket: {verdict}" in html
    ran = cli_run(controller, tmp_path, run, doc)
    # 1: a check did not hold; 5: the run measured something other than what was asked (#53)
    assert ran.exit_code == {"PASS": 0, "FAIL": 1, "NOT VALID": 5}[verdict], ran.output
    assert f"verdict: {verdict}" in ran.output, ran.output


def test_lost_data_fails_a_run_whose_checks_held(controller, tmp_path):
    """report.md said "Verdict: PASS. All checks held" above "Data differs", and the CLI exited 1."""
    lost = {"identical": False, "differences": ["lab.t1: 120 rows on the source, 119 on the target"], "gtid": None}
    run = run_of([measured()], consistency=lost)
    doc, md, _ = written(tmp_path, run)
    assert doc["outcome"]["verdict"] == "FAIL" and "the target differs from the source" in doc["outcome"]["reasons"][0]
    assert md.startswith("# ticket: FAIL\n\n**Verdict: FAIL.** the target differs from the source")
    ran = cli_run(controller, tmp_path, run, doc)
    assert ran.exit_code == 1 and "verdict: FAIL" in ran.output, ran.output


def test_an_interrupted_run_has_no_verdict_but_its_status(controller, tmp_path):
    run = run_of([measured()], status="interrupted", reason="cancelled by request")
    doc, md, _ = written(tmp_path, run)
    assert doc["outcome"] == Outcome("INTERRUPTED", ["cancelled by request"], 0, 0).as_json()
    assert md.startswith("# ticket: INTERRUPTED\n\n**No verdict: the run interrupted.** cancelled by request")
    ran = cli_run(controller, tmp_path, run, doc)
    assert ran.exit_code == 1 and "interrupted" in ran.output, ran.output


def test_a_search_whose_expectation_failed_is_a_failed_run():
    knees = [{"expect": [{"expectation": "knee >= 150", "knee": 120, "passed": False}]}]
    decided = of_run("completed", None, [measured().as_json()], None, knees)
    assert decided.verdict == "FAIL" and decided.reasons == ["search: `knee >= 150` did not hold (knee 120)"]
    assert (decided.checks, decided.failed) == (2, 1)


def test_an_older_summary_without_an_outcome_gets_it_by_the_same_rule():
    point = measured(verification=NOT_AS_ASKED).as_json()
    stored = point.pop("outcome")
    assert of_point(point).as_json() == stored


TICKET = SCENARIO.replace("name: ticket\n", "name: ticket\nverdict: {pass: reproduced, fail: not reproduced}\n")


@pytest.mark.parametrize(
    ("point", "said", "code"),
    [
        (dict(lag=3.0), "REPRODUCED", 0),
        (dict(), "NOT REPRODUCED", 1),
        (dict(verification=NOT_AS_ASKED), "NOT VALID", 5),
    ],
    ids=["reproduced", "not reproduced", "not valid is never worded"],
)
def test_a_tickets_verdict_is_said_in_its_words_everywhere(controller, tmp_path, point, said, code):
    """#53: report.md opened `# ticket-4711: PASS` where PASS meant "the problem reproduced": a customer
    reads "replication is fine". A scenario says what its outcome means (`verdict:`); report.md's title
    and first line, report.html, the CLI's closing line and its exit code say it; NOT VALID stays."""
    plan = load_text(TICKET.replace("max_lag_seconds < 2", "max_lag_seconds > 2"))
    result = point_result(plan.points[0].plan(), measured(**point).verification, *_window_of(point), {}, [])
    run = run_of([result], plan=plan)
    doc, md, html = written(tmp_path, run)
    assert doc["outcome"]["said"] == said and run_outcome(doc).words == said
    assert md.startswith(f"# ticket: {said}\n\n**Verdict: {said}.**"), md[:200]
    assert f"ticket: {said}" in html and "PASS" not in md.split("\n\n")[1]
    ran = cli_run(controller, tmp_path, run, doc)
    assert ran.exit_code == code and f"verdict: {said}" in ran.output, ran.output


def _window_of(point):
    """The window and figures `measured` gives a point (its lag as asked)."""
    lag = point.get("lag", 1.0)
    window = Window(load_start=0.0, start=10.0, end=70.0, load_rows=[{"epoch": 11.0, "tps": 50.0, "qps": 200.0}])
    figures = {"links_mbit": {}, "lag_samples": 120, "gaps": 0, "max_lag_seconds": lag, "p95_lag_seconds": lag / 2,
               "lag_slope": 0.0, "lag_slope_ci": None}  # fmt: skip
    return window, figures
