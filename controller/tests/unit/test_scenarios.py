"""Scenario files: named invalid fixtures with exact messages, sweep expansion, quick overrides,
the summary math and the report made from a stored run."""

import json
import shutil
from pathlib import Path

import pytest

from laglab.load.generator import parse_sysbench_line
from laglab.measurement.stats import percentile
from laglab.scenarios.plan import load_file, load_text
from laglab.scenarios.report import markdown as report
from laglab.scenarios.run.recording import slope
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping.impairment import Impairment

FIXTURES = Path(__file__).parent / "fixtures"
SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


@pytest.mark.parametrize("path", sorted((FIXTURES / "invalid").glob("*.yaml")), ids=lambda p: p.stem)
def test_invalid_fixture_names_the_key_path(path):
    expected = path.read_text().splitlines()[0].removeprefix("# error: ")
    with pytest.raises(ScenarioError) as caught:
        load_file(path)
    assert str(caught.value).replace(f"{path}: ", "scenario: ", 1) == expected.replace("Value error, ", "")


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_scenarios_are_valid_in_full_and_quick(path):
    full, quick = load_file(path), load_file(path, quick=True)
    assert len(quick.points) <= len(full.points)
    assert quick.eta_seconds() <= full.eta_seconds()


def test_sweep_expands_in_file_order():
    plan = load_text("name: x\nsweep:\n  link.rate: [1mbit, 2mbit]\n  link.rtt: [0ms, 50ms, 100ms]\n")
    assert [p.params for p in plan.points][:4] == [
        {"link.rate": "1mbit", "link.rtt": "0ms"},
        {"link.rate": "1mbit", "link.rtt": "50ms"},
        {"link.rate": "1mbit", "link.rtt": "100ms"},
        {"link.rate": "2mbit", "link.rtt": "0ms"},
    ]
    assert len(plan.points) == 6
    (service, request), _ = plan.points[4].scenario.link.requests()
    assert (service, request.peer, request.shaping.to_json()) == (
        "mysql-source", "mysql-target", {"delay": "25ms", "rate": "2mbit"},
    )  # fmt: skip


def test_quick_overrides_values_and_sweep():
    text = "name: x\nload: {duration: 120s}\nsweep: {link.rtt: [0ms, 50ms, 100ms]}\nquick:\n  load.duration: 10s\n  sweep: {link.rtt: [0ms, 100ms]}\n"
    full, quick = load_text(text), load_text(text, quick=True)
    assert full.points[0].scenario.load.seconds == 120 and len(full.points) == 3
    assert quick.points[0].scenario.load.seconds == 10 and [p.params["link.rtt"] for p in quick.points] == [
        "0ms",
        "100ms",
    ]


def test_rtt_is_split_half_at_each_end():
    plan = load_text("name: x\nlink: {rtt: 180ms, jitter: 10ms, loss: 0.5%, rate: 2mbit}\n")
    there, back = plan.points[0].scenario.link.requests()
    assert there[1].shaping == back[1].shaping == Impairment(delay=0.09, jitter=0.005, loss=0.005, rate=2e6)
    assert there[1].shaping.to_json() == {"delay": "90ms", "jitter": "5ms", "loss": "0.5%", "rate": "2mbit"}


def test_a_link_without_a_round_trip_refuses_a_jitter_before_anything_runs():
    with pytest.raises(ScenarioError, match="jitter: needs a delay"):
        load_text("name: x\nlink: {jitter: 10ms}\n")


def test_rate_reverse_alone_shapes_only_the_second_end():
    ((service, request),) = load_text("name: x\nlink: {rate_reverse: 1mbit}\n").points[0].scenario.link.requests()
    assert (service, request.peer, request.shaping) == ("mysql-target", "mysql-source", Impairment(rate=1e6))


def test_assertions_parse_and_hold():
    plan = load_text("name: x\nassertions: ['max_lag_seconds < 2', 'lag_slope <= 0.05']\n")
    first, second = plan.scenario.assertions
    assert (first.metric, first.op, first.value) == ("max_lag_seconds", "<", 2.0)
    assert first.holds(1.9) and not first.holds(2.0) and not first.holds(None)
    assert second.holds(0.05)


def test_sysbench_report_line():
    line = (
        "[ 3s ] thds: 4 tps: 75.02 qps: 300.07 (r/w/o: 0.00/300.07/0.00) lat (ms,95%): 2.35 err/s: 0.00 reconn/s: 0.00"
    )
    assert parse_sysbench_line(line) == {
        "elapsed_s": 3,
        "threads": 4,
        "tps": 75.02,
        "qps": 300.07,
        "latency_p95_ms": 2.35,
        "errors_per_s": 0.0,
    }
    assert parse_sysbench_line("Threads started!") is None


def test_slope_and_percentile():
    assert slope([(0, 1.0), (10, 2.0), (20, 3.0)]) == pytest.approx(0.1)
    assert slope([(0, 1.0)]) is None
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0


def test_report_from_a_stored_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run", run)
    out = report.render(run)
    text = out.read_text()
    assert text.startswith("# replication-latency-sweep: PASS\n\n**Verdict: PASS.** All 2 checks held in every point.")
    assert "| 2 | 250 ms | 250 / 251 | 2 / 1.97 | yes | 0.25 | 0.2 |" in text  # the swept RTT in its own column
    assert "Identical" in text
    assert (run / "lag.png").stat().st_size > 1000 and (run / "sweep.png").stat().st_size > 1000
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"


def test_highest_sustained_rate_per_group():
    def point(setup, rate, slope, tps):
        return {"params": {"replicator.compression": setup, "load.rate": rate}, "lag_slope": slope, "tps": tps}

    summary = {
        "sweep": {"replicator.compression": ["uncompressed", "zstd"], "load.rate": [50, 100, 200]},
        "points": [
            point("uncompressed", 50, 0.0, 50), point("uncompressed", 100, 0.002, 99.5), point("uncompressed", 200, 0.4, 199),
            point("zstd", 50, 0.0, 50), point("zstd", 100, 0.0, 80), point("zstd", 200, 0.0, 200),
        ],
    }  # fmt: skip
    best = {row["group"]: row["point"]["params"]["load.rate"] for row in report.sustained(summary)}
    assert best == {"compression uncompressed": 100, "compression zstd": 200}


def test_mysqlslap_load():
    from laglab.load.generator import mysqlslap_argv, parse_mysqlslap

    plan = load_text("name: x\nload: {tool: mysqlslap, threads: 8, queries: 500}\nwarmup: 0s\n")
    load = plan.scenario.load
    assert (load.tool, load.threads, load.queries) == ("mysqlslap", 8, 500)
    assert mysqlslap_argv("mysql-source", "lab", 8, 500, "SELECT 1") == [
        "mysqlslap", "--defaults-extra-file=/run/laglab/client.cnf", "--host=mysql-source", "--create-schema=lab",
        "--concurrency=8", "--number-of-queries=500", "--query=SELECT 1", "--iterations=1",
    ]  # fmt: skip
    summary = "Benchmark\n\tAverage number of seconds to run all queries: 0.421 seconds\n\tMinimum number of seconds to run all queries: 0.421 seconds\n"
    assert parse_mysqlslap(summary) == 0.421
    assert parse_mysqlslap("mysqlslap: Error when connecting") is None


def test_times_are_seconds_parsed_once_and_dumped_as_times():
    """Defect: `duration: 60` validated, then eta_seconds() re-parsed '5.99e-05s' and crashed."""
    plan = load_text("name: x\nload: {duration: 90s}\nwarmup: 1500ms\nlink: {rtt: 250ms, jitter: 2ms}\n")
    s = plan.points[0].scenario
    assert (s.load.duration, s.load.seconds, s.warmup, s.link.rtt, s.link.jitter) == (90.0, 90, 1.5, 0.25, 0.002)
    assert plan.eta_seconds() == pytest.approx(10 + 3 + 1.5 + 90 + 30)
    dumped = plan.scenario.model_dump(mode="json")
    assert (dumped["load"]["duration"], dumped["warmup"], dumped["link"]["rtt"]) == ("90s", "1500ms", "250ms")
    again = load_text(json.dumps(dumped)).points[0].scenario  # the resolved copy loads back the same
    assert again == s


def test_a_new_replicator_kind_brings_its_options_and_touches_no_shared_schema(monkeypatch):
    """Issue #22: a new kind edited KINDS, the scenario schema's Replicator and SWEEPABLE."""
    from pydantic import BaseModel, Field, ValidationError

    from laglab.replicators import KINDS
    from laglab.replicators.base import SourceToTarget
    from laglab.scenarios.schema import scenario as spec

    class EchoOptions(BaseModel):
        echo_depth: int = Field(3, ge=1, le=9)

    class Echo(SourceToTarget):
        kind = "echo"
        Options = EchoOptions
        sweepable = ("echo_depth",)

    assert Echo.options == ("echo_depth",)
    monkeypatch.setitem(KINDS, "echo", Echo)
    model = spec._replicator_model()
    assert model.model_validate({"kind": "echo", "echo_depth": 5}).echo_depth == 5
    with pytest.raises(ValidationError, match="less than or equal to 9"):
        model.model_validate({"kind": "echo", "echo_depth": 10})
    with pytest.raises(ValidationError, match=r"replicator\.echo_depth: an option of kind echo, not native"):
        model.model_validate({"kind": "native", "echo_depth": 5})


def test_a_report_opens_with_the_verdict_the_ticket_and_the_settings(tmp_path):
    """#36.5: the title said `completed` when assertions failed, pass/FAIL sat in the 13th column, and a
    run without a sweep showed neither the load nor the link nor the servers."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run", run)
    summary = json.loads((run / "summary.json").read_text())
    summary["points"][1]["assertions"][0]["passed"] = False
    (run / "summary.json").write_text(json.dumps(summary))
    plan = load_text(
        "name: ticket-4711\ndescription: 'Ticket 4711: RTT 180 ms, 2 Mbit/s, lag grows after 10 minutes'\n"
        "link: {rtt: 180ms, rate: 2mbit}\nload: {rate: 150, threads: 8, duration: 60s}\n"
    )
    (run / "scenario.json").write_text(json.dumps({"plan": plan.model_dump(mode="json")}))
    (run / "environment.json").write_text(
        json.dumps({"server_versions": {"mysql-source": "9.7.4", "mysql-target": "9.7.4"}})
    )
    head = report.render(run).read_text().splitlines()[:25]  # the first screen (#53)
    assert head[0] == "# replication-latency-sweep: FAIL"
    assert head[2].startswith("**Verdict: FAIL.** 1 of 2 checks failed (point 2: `")
    text = "\n".join(head)
    assert "**Reproduces:** Ticket 4711: RTT 180 ms, 2 Mbit/s, lag grows after 10 minutes" in text
    assert (
        "**Settings:** link mysql-source ↔ mysql-target: RTT 180 ms, rate 2 Mbit/s; load sysbench oltp_write_only at "
        "150 TPS, 8 threads, 1 min; replication native; servers mysql-source 9.7.4, mysql-target 9.7.4." in text
    )
    summary["status"], summary["reason"] = "interrupted", "the controller stopped during the run"
    (run / "summary.json").write_text(json.dumps(summary))
    head = report.render(run).read_text().splitlines()[:3]
    assert head[0] == "# replication-latency-sweep: INTERRUPTED"
    assert head[2] == "**No verdict: the run interrupted.** the controller stopped during the run"


def test_the_reports_settings_say_which_servers_the_scenario_asked_for(tmp_path):
    """#39.4: a cross-version pair's report names the images the scenario pinned beside the versions
    the servers reported."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run", run)
    plan = load_text("name: upgrade\nservers: {source: 'mariadb:10.5', target: 'mariadb:11.8'}\n")
    (run / "scenario.json").write_text(json.dumps({"plan": plan.model_dump(mode="json")}))
    versions = {"mysql-source": "10.5.23-MariaDB-0+deb11u1-log", "mysql-target": "11.8.3-MariaDB-1"}
    (run / "environment.json").write_text(json.dumps({"server_versions": versions}))
    text = report.render(run).read_text()
    assert (
        "servers mysql-source 10.5.23-MariaDB-0+deb11u1-log, mysql-target 11.8.3-MariaDB-1; "
        "asked for source mariadb:10.5, target mariadb:11.8." in text
    )


@pytest.mark.parametrize(
    "value, error",
    [
        ("-1", "seed"), ("4294967296", "seed"), ("true", "seed"), ("'1234'", "seed"), ("1.5", "seed"), ("sometimes", "seed"),
    ],
)  # fmt: skip
def test_a_seed_is_a_whole_number_a_netem_takes_or_random(value, error):
    with pytest.raises(ScenarioError) as refused:
        load_text(f"name: s\nseed: {value}\n")
    assert refused.value.path.startswith(error)
    assert load_text("name: s\nseed: 4294967295\n").scenario.seed == 4294967295
    assert load_text("name: s\n").scenario.seed == "random"


def test_the_reports_environment_names_the_seed_and_what_could_not_be_seeded(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run", run)
    meta = {"seed": 77, "seed_asked": "random", "seed_note": "not seeded: this host's netem takes no seed (...)"}
    (run / "run.json").write_text(json.dumps(meta))
    text = report.render(run).read_text()
    assert (
        "| seed | 77 (drawn: the scenario said `random`); not seeded: this host's netem takes no seed (...) |" in text
    )
