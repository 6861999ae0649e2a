"""Whole runs at virtual time (#52.5): the real ScenarioRun drives the real shaping, faults, load
generator, recording, knee search, summary and report over the synthetic lab (synthetic_lab.py), its
time a VirtualClock's. What these check is the run's bookkeeping (the order of its points and steps, what
each point records and decides, what the run comes to and what its cleanup puts back); the physics
(delays, rates, lag as the real servers make it) is the kernel suite's and the lab's.

A 2 Mbit/s link carries 500 transactions a second of LINK_BYTES: that is where the synthetic replica
falls behind, and so where the sweep's checks fail and the search's knee is."""

from __future__ import annotations

import csv
import json
import time

import pytest

from laglab.scenarios.analysis.outcome import run_outcome
from laglab.scenarios.analysis.record import RunRecord
from laglab.scenarios.plan import load_text
from laglab.scenarios.run.runner import ScenarioRun
from laglab.state.events import Events

from ..polling import wait_until
from .fakes import VirtualClock
from .synthetic_lab import LINK_BYTES, SyntheticLab

SWEEP = """
name: sweep-at-virtual-time
link: {rate: 2mbit}
load: {duration: 60s}
warmup: 5s
sweep:
  link.rtt: [20ms, 100ms]
  load.rate: [100, 300, 400, 600, 800]
timeline:
  - {at: 20s, duration: 5s, partition: {a: [mysql-source], b: [mysql-target]}}
assertions:
  - max_lag_seconds < 12
"""

SEARCH = """
name: knee-at-virtual-time
link: {rate: 2mbit, rtt: 50ms}
load: {duration: 30s}
warmup: 5s
search: {param: load.rate, from: 100, to: 1000, resolution: 10%, until: "lag_slope < 0.02"}
"""


@pytest.fixture
def lab(tmp_path):
    made = []

    def make(**kw) -> SyntheticLab:
        made.append(SyntheticLab(tmp_path, VirtualClock(), **kw))
        return made[-1]

    yield make
    for synthetic in made:
        synthetic.close()


def run_of(synthetic: SyntheticLab, text: str, tmp_path) -> ScenarioRun:
    run = ScenarioRun(synthetic.parts(), load_text(text), tmp_path / "results", text)
    run.start()
    return run


def files(run: ScenarioRun) -> tuple[dict, str]:
    """summary.json, checked to be exactly the declared run record (analysis/record.py), and report.md."""
    summary = json.loads((run.run.path / "summary.json").read_text())
    assert RunRecord.model_validate(summary).as_json() == summary
    return summary, (run.run.path / "report.md").read_text()


def test_a_ten_point_sweep_with_a_timeline_records_each_point_and_decides_once(lab, tmp_path):
    synthetic = lab()
    run = run_of(synthetic, SWEEP, tmp_path)
    run.wait(600)  # seconds on an idle host; a busy one only slows it
    assert run.status == "completed", run.reason
    summary, report = files(run)
    points = summary["points"]
    # The points in the sweep's order (the cartesian product in file order), each numbered.
    asked = [(rtt, rate) for rtt in ("20ms", "100ms") for rate in (100, 300, 400, 600, 800)]
    assert [(p["params"]["link.rtt"], p["params"]["load.rate"]) for p in points] == asked
    assert [p["point"] for p in points] == list(range(1, 11))
    for point in points:
        rate = point["params"]["load.rate"]
        # sysbench's rows, through the real LoadGenerator: the rate asked.
        assert point["tps"] == pytest.approx(rate, rel=0.01), point
        # The link's bytes, through the link counters' rows: what the replica could apply.
        carried = min(rate, 500) * LINK_BYTES * 8 / 1e6
        assert point["link_mbit"] == pytest.approx(carried, rel=0.2), point
        # The timeline: the partition at 20 s of the window, healed 5 s later, each event once.
        events = point["timeline"]
        assert [(e["step"], e["action"], e["ends_disruption"], e["at_end"]) for e in events] == [
            (1, "partition", False, False),
            (1, "partition", True, False),
        ], events
        start = point["window_start_epoch"]
        assert [round(e["asked_epoch"] - start) for e in events] == [20, 25], events
        # Past 500 TPS the replica falls behind for good; below, it catches up after the heal.
        behind = rate > 500
        assert point["outcome"]["verdict"] == ("FAIL" if behind else "PASS"), point["outcome"]
        if not behind:
            assert events[1]["catch_up_seconds"] is not None, events[1]
    assert summary["outcome"]["verdict"] == "FAIL"  # four points did not hold
    assert summary["consistency"]["identical"] is True  # the replica caught up once the load ended
    # Every reader takes the one outcome: the report's title says what summary.json says.
    assert report.splitlines()[0] == f"# sweep-at-virtual-time: {run_outcome(summary).verdict}"
    with (run.run.path / "events.csv").open() as rows:
        assert len(list(csv.DictReader(rows))) == 20
    # The cleanup: nothing shaped or partitioned, the load ended, the replica put back, the feeds left.
    assert synthetic.shaping.desired.entries == {} and synthetic.shaping.desired.partitions == {}
    assert not synthetic.load.running
    assert run.kinds.used["native"].restored == 1
    assert synthetic.lag._subscribers == [] and synthetic.links._subscribers == []


def test_a_knee_search_probes_until_it_brackets_the_links_capacity(lab, tmp_path):
    synthetic = lab()
    run = run_of(synthetic, SEARCH, tmp_path)
    run.wait(600)  # seconds on an idle host; a busy one only slows it
    assert run.status == "completed", run.reason
    summary, report = files(run)
    [knee] = summary["knees"]
    assert knee["final"] and knee["state"] == "found", knee
    good, bad = knee["bracket"]
    assert good <= 500 < bad * 1.05 and bad <= 500 * 1.25, knee  # the link carries 500 TPS
    assert knee["points"] == [p["point"] for p in summary["points"]]
    assert summary["points"][0]["probe"]["value"] == 100  # the search's first probe: its low end
    assert summary["knee"] == {"load.rate": knee["knee"]}
    assert f"the highest load rate that holds: **{good} TPS**; {bad} TPS did not" in report


def test_a_point_that_fails_fails_the_run_with_its_reason_and_the_cleanup_still_runs(lab, tmp_path):
    synthetic = lab(fail_catch_up_at=2)  # point 1 catches up, point 2 does not
    run = run_of(synthetic, SWEEP, tmp_path)
    run.wait(600)  # seconds on an idle host; a busy one only slows it
    assert run.status == "failed"
    assert "the replica to catch up: not within 300s" in run.reason
    summary, report = files(run)
    assert [p["point"] for p in summary["points"]] == [1]
    assert summary["consistency"]["identical"] is True  # checked once the cleanup handed replication back
    assert summary["status"] == "failed" and summary["outcome"]["verdict"] == run_outcome(summary).verdict
    assert report.splitlines()[0] == f"# sweep-at-virtual-time: {run_outcome(summary).verdict}"
    assert synthetic.shaping.desired.entries == {} and not synthetic.load.running
    assert run.kinds.used["native"].restored == 1


class CancelAt(Events):
    """The lab's events; the run is cancelled as the one named comes (the dashboard's marker of it)."""

    def __init__(self, text: str):
        super().__init__()
        self.text, self.run, self.at = text, None, None

    def add(self, kind: str, text: str) -> None:
        super().add(kind, text)
        if text.startswith(self.text) and self.at is None:
            self.at = time.monotonic()
            self.run.cancel()


def test_a_cancel_mid_point_interrupts_the_run_and_undoes_the_timeline(lab, tmp_path):
    synthetic = lab()
    # Inside point 2's partition (20 s to 25 s of its window): the cancel comes while it is in force.
    events = CancelAt("point 2 step 1: partition mysql-source <-> mysql-target")
    run = ScenarioRun(synthetic.parts(events=events), load_text(SWEEP), tmp_path / "results", SWEEP)
    events.run = run
    run.start()
    wait_until(lambda: events.at is not None and not run.busy, timeout=600)
    assert (run.status, run.reason) == ("interrupted", "cancelled by request")
    assert synthetic.shaping.desired.partitions == {} and synthetic.shaping.desired.entries == {}
    assert ("loadgen", ["pkill", "-TERM", "-x", "sysbench"], None) in synthetic.platform.ran
    assert not synthetic.load.running
    summary, report = files(run)
    assert [p["point"] for p in summary["points"]] == [1]  # point 2 was cut short: no result
    assert summary["outcome"]["verdict"] == "INTERRUPTED"
    assert report.splitlines()[0] == "# sweep-at-virtual-time: INTERRUPTED"
    with (run.run.path / "events.csv").open() as rows:  # point 2's partition, and its undo as the point ended
        point2 = [(r["text"], r["at_end"]) for r in csv.DictReader(rows) if r["point"] == "2"]
    assert point2 == [("partition mysql-source <-> mysql-target", "False"),
                      ("undo at the end of the point: partition mysql-source <-> mysql-target", "True")]  # fmt: skip
