"""A write profile's replay (laglab/load/replay.py, replay.lua): the plan the Lua script reads, the profile's
checks, the figures a replay is compared by, and the load and scenario that carry it. The profiles
here are `laglab profile`'s own output on real binlogs (tests/unit/fixtures/binlog, made by MySQL
9.7.4's server and mysqlbinlog; scenarios/profiles/nightly-batch.json, made by
scripts/make-batch-profile on the lab's MySQL 9.7). sysbench running the plan, the server's binlog
costs and the round trip are tested on the lab (tests/integration/test_replay.py)."""

import json
from pathlib import Path

import pytest

from laglab.load import replay
from laglab.load.binlog_profile import Reader, period, profile, quantiles
from laglab.load.generator import Profile, Replay, sysbench_argv
from laglab.scenarios.plan import load_text
from laglab.scenarios.report import words
from laglab.scenarios.schema.scenario import ScenarioError

FIXTURES = Path(__file__).parent / "fixtures" / "binlog"
ROOT = Path(__file__).resolve().parents[3]
NIGHTLY = ROOT / "scenarios" / "profiles" / "nightly-batch.json"


def fixture_profile(**kwargs) -> dict:
    reader = Reader("mysql-9.7.4-row.txt").feed((FIXTURES / "mysql-9.7.4-row.txt").read_text().splitlines())
    return profile([reader], **kwargs)


def plan_lines(made: dict, speed: float = 1.0) -> list[str]:
    return replay.plan_text(replay.parse_profile(made), speed, replay.Costs(300, 20)).splitlines()


def test_a_profile_carries_what_a_replay_draws_from():
    made = fixture_profile()
    assert made["size_quantiles"][0] == 185 and made["size_quantiles"][-1] == 763  # the smallest, the largest
    assert made["size_quantiles"][50] == 304 and len(made["size_quantiles"]) == 101  # the median of 185..763
    assert made["large"]["transactions"] == [] and made["large"]["period_seconds"] is None
    assert quantiles([5, 1, 3]) == [1] * 26 + [3] * 49 + [5] * 26  # nearest rank, as stats.percentile ranks


def test_a_monitors_tables_are_left_out_when_asked():
    made = fixture_profile(exclude=["shop.*"])  # every row change was shop.orders': the two DDL stay
    assert made["transactions"] == 2 and made["tables"] == [] and made["excluded"] == ["shop.*"]
    assert fixture_profile(exclude=["other.*"])["transactions"] == 5


def test_the_plan_keeps_every_second_its_large_ones_and_the_quantiles():
    made = json.loads(NIGHTLY.read_text())
    lines = plan_lines(made)
    assert lines[:5] == ["laglab-replay 1", f"span {made['span_seconds']}", "speed 1", "overhead 300", "rowcost 20"]
    (table,) = [line for line in lines if line.startswith("table ")]
    assert table == f"table laglab_replay_1 {made['tables'][0]['rows']} {made['tables'][0]['row_bytes']:g}"
    seconds = {int(line.split()[1]): line.split()[2:] for line in lines if line.startswith("second ")}
    by_second = {s["t"]: s["transactions"] for s in made["per_second"]}
    (big,) = made["large"]["transactions"]
    assert seconds[int(big["t"])][1:] == [f"{big['bytes']}:{big['rows']}:0.000"]  # the batch, as it was
    for t, (small, *large) in seconds.items():
        assert int(small) + len(large) == by_second[t]  # each second's count kept
    assert sum(by_second.values()) == made["transactions"]
    (q,) = [line for line in lines if line.startswith("quantiles ")]
    assert [int(v) for v in q.split()[1:]] == made["size_quantiles"]


def test_a_large_transaction_keeps_its_moment_and_bursts_their_period():
    made = fixture_profile()
    made["large"]["transactions"] = [{"t": 12.375, "bytes": 2 << 20, "rows": 10}]
    made["per_second"] = [{"t": 12, "transactions": 3}]
    assert plan_lines(made)[-1] == f"second 12 2 {2 << 20}:10:0.375"
    assert period([2.4, 12.5, 12.9, 21.9]) == 9.75  # bursts at 2.4, 12.5 (12.9 is in it), 21.9: gaps 10.1, 9.4
    assert period([3.0]) is None


def test_the_threads_follow_the_recorded_parallelism_up_to_a_bound():
    made = fixture_profile()
    assert replay.parse_profile(made).threads() == 1  # serial commits, as the server recorded them
    assert replay.parse_profile(json.loads(NIGHTLY.read_text())).threads() == replay.THREADS  # WRITESET: 257
    assert replay.parse_profile({**made, "parallelism": None}).threads() == 1


@pytest.mark.parametrize(
    "change, words_",
    [
        ({"size_quantiles": [1, 2]}, "size_quantiles: List should have at least 101 items"),
        ({"per_second": [{"t": -1, "transactions": 1}]}, "per_second.0.t: Input should be greater than or equal to 0"),
        ({"version": 2}, "version: Input should be less than or equal to 1"),
        ({"span_seconds": None}, "span_seconds: Input should be a valid integer"),
    ],
)
def test_a_profile_that_cannot_be_replayed_is_named(change, words_):
    with pytest.raises(replay.ReplayError) as caught:
        replay.parse_profile({**fixture_profile(), **change}, "x.json")
    assert f"profile: x.json: {words_}" in caught.value.message


def test_a_file_that_is_not_a_profile_is_named(tmp_path):
    (tmp_path / "p.json").write_text("not json")
    with pytest.raises(replay.ReplayError, match=r"p.json is not JSON \(Expecting value at line 1\)"):
        replay.read_profile(tmp_path / "p.json")
    with pytest.raises(replay.ReplayError, match="No such file"):
        replay.read_profile(tmp_path / "none.json")


def test_sysbench_runs_the_script_with_its_plan_and_the_recorded_threads():
    load = Profile.replaying(Replay(replay.parse_profile(fixture_profile()), 2.0, "p.json"))
    argv = sysbench_argv(load, "run", "lab", 60)
    assert argv[:3] == ["sysbench", "/run/laglab/replay/replay.lua", "--plan=/run/laglab/replay/plan"]
    assert "--threads=1" in argv and "--time=60" in argv and argv[-1] == "run"
    assert not [a for a in argv if a.startswith(("--rate", "--tables", "--table-size"))]  # not sysbench's pacing
    assert load.shown(("binlog.000004", 157))["replay"]["binlog_start"] == {"file": "binlog.000004", "position": 157}


def test_the_replays_figures_come_from_its_binlog_without_the_labs_heartbeat():
    text = (FIXTURES / "mysql-9.7.4-row.txt").read_text().replace("`shop`.`orders`", "`laglab_meta`.`heartbeat`")
    reader = Reader("x").feed(text.splitlines())
    figures = replay.measured(reader, 10.0)
    assert figures["transactions"] == 2  # the two DDL; the heartbeat's row changes left out
    assert figures["bytes_per_second"] == round((185 + 278) / 10, 1)
    assert figures["transaction_bytes_max"] == 278 and figures["large"] == 0


def test_the_decoder_reads_the_window_the_replay_wrote():
    assert replay.decoder(False, "/var/lib/mysql", ["binlog.000004", "binlog.000005"], 157, 900) == [
        "mysqlbinlog", "--base64-output=decode-rows", "--start-position=157", "--stop-position=900",
        "/var/lib/mysql/binlog.000004", "/var/lib/mysql/binlog.000005",
    ]  # fmt: skip
    assert replay.decoder(True, "/d", ["b.1"], 4, 5)[0] == "mariadb-binlog"


def scenario(load: str, base: Path) -> str:
    return f"name: r\nlink: {{rtt: 10ms}}\nload: {load}\n"


def test_a_scenario_replays_a_profile_under_its_folder(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(fixture_profile()))
    plan = load_text(scenario("{tool: profile, file: p.json, speed: 2, duration: 30s}", tmp_path), base_dir=tmp_path)
    point = plan.points[0].plan()
    assert point.load.profile.replay.speed == 2.0 and point.load.profile.script == "profile"
    assert point.data.script == "oltp_write_only"  # the data set of `data:`, for a sysbench point beside it
    assert point.settings["load"] == {"tool": "profile", "file": "p.json", "speed": 2.0, "threads": 1, "seconds": 30}


@pytest.mark.parametrize(
    "load, words_",
    [
        ("{tool: profile}", "file: tool profile replays a write profile"),
        ("{tool: profile, file: ../p.json}", "must be a path under the scenarios folder"),
        ("{tool: profile, file: none.json}", "file: none.json: No such file or directory"),
        ("{tool: profile, file: bad.json}", "file: bad.json"),
        ("{tool: sysbench, file: p.json}", "file: only with tool: profile"),
        ("{tool: profile, file: p.json, speed: 0}", "speed: Input should be greater than or equal to 0.01"),
    ],
)
def test_a_scenarios_profile_load_is_checked(tmp_path, load, words_):
    (tmp_path / "p.json").write_text(json.dumps(fixture_profile()))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScenarioError) as caught:
        load_text(scenario(load, tmp_path), base_dir=tmp_path)
    assert words_ in str(caught.value)


def test_the_shipped_scenario_sweeps_the_replay_beside_sysbench():
    plan = load_text((ROOT / "scenarios/customer-batch-over-wan.yaml").read_text(), base_dir=ROOT / "scenarios")
    labels = [words.params(p.params) for p in plan.points]
    assert labels == ["replay of profiles/nightly-batch.json", "sysbench oltp_insert at 560 TPS"]
    assert plan.points[0].plan().load.tool == "profile" and plan.points[1].plan().load.tool == "sysbench"


def test_load_start_refuses_a_file_that_is_not_a_profile_before_any_request(tmp_path):
    from click.testing import CliRunner

    from laglab.cli import cli

    (tmp_path / "notes.json").write_text('{"a": 1}')
    (tmp_path / "text.json").write_text("hello")
    runner = CliRunner()
    for name, words_ in (
        ("notes.json", "is not a write profile (`laglab profile BINLOG` writes one)"),
        ("text.json", "is not JSON"),
        ("none.json", "No such file or directory"),
    ):
        done = runner.invoke(cli, ["--url", "http://127.0.0.1:9", "load", "start", "--profile", str(tmp_path / name)])
        assert done.exit_code == 2 and words_ in done.output, done.output


# Point 1 of a run of scenarios/customer-batch-over-wan.yaml on the lab (2026-11-28, MySQL 9.7.4, userspace
# shaping, 180 ms and 10 Mbit/s), its summary.json's figures as recorded.
BATCH_POINT = {
    "point": 1, "verification": {"rtt": {"median_ms": 181.0}, "rtt_asked_ms": 180.0, "throughput_mbit": 9.575},
    "link_mbit": 2.1055, "binlog_mbit": 2.0699, "lag_slope": -0.02475, "max_lag_seconds": 22.781,
    "replicator": {"kind": "native"},
    "replay": {"profile": {"figures": {"transaction_bytes_max": 25813163}, "profile": "profiles/nightly-batch.json"},
               "replay": {"transaction_bytes_max": 25915425, "transactions": 6001}},
}  # fmt: skip


def test_the_largest_transaction_bounds_a_replay_whose_mean_rate_leaves_the_link_room():
    from laglab.scenarios.analysis import bottleneck

    (found,) = bottleneck.explain({"points": [BATCH_POINT]}, {})
    assert found["bound"] == "largest transaction" and found["agrees"] is True, found
    # 25,915,425 bytes x 1.017 on the wire (the point's link 2.1055 / binlog 2.0699 Mbit/s) x 8 / 9.575 Mbit/s
    # = 22.02 s, plus half the 181 ms round trip
    assert found["predicted"]["max_lag_seconds"] == pytest.approx(22.11, abs=0.01)
    slow = {**BATCH_POINT, "max_lag_seconds": 60.0}  # far beyond the crossing: something else binds
    (found,) = bottleneck.explain({"points": [slow]}, {})
    assert found["agrees"] is False and "not the largest transaction alone" in found["words"]
    small = {**BATCH_POINT, "replay": {"replay": {"transaction_bytes_max": 100_000}}}  # 0.2 s: not a bound
    (found,) = bottleneck.explain({"points": [small]}, {})
    assert found["bound"] == "load"


def test_the_verdict_says_a_burst_of_lag_is_not_a_steady_one():
    from laglab.scenarios.report.verdict import _lag_words

    assert _lag_words(BATCH_POINT) == "lag peaked at 22.78 s, with no lasting growth"
    assert _lag_words({"lag_slope": 0.0, "max_lag_seconds": 0.6}) == "lag held steady, at most 0.60 s"
    assert _lag_words({"lag_slope": 0.05, "max_lag_seconds": 30.0}) == (
        "lag grew 0.050 s per second (about 3 s behind per minute), at most 30.00 s"
    )
