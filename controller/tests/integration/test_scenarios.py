"""The shipped scenarios, --quick, end to end through `laglab run` (as a user runs them); assertions
on the results bundle the run leaves."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT


def run_scenario(name) -> tuple[subprocess.CompletedProcess, dict, str]:
    """A shipped scenario by name, or any scenario file by its path, --quick, through `laglab run`."""
    scenario = str(name) if isinstance(name, Path) else f"scenarios/{name}.yaml"
    done = subprocess.run(
        [str(ROOT / "laglab"), "run", scenario, "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    match = re.search(r"-> (results/\S+)", done.stdout)
    assert match, done.stdout + done.stderr
    folder = ROOT / match.group(1)
    return done, json.loads((folder / "summary.json").read_text()), folder


@pytest.mark.second_lab
def test_latency_sweep_quick(api):
    done, summary, folder = run_scenario("replication-latency-sweep")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "point 2/2 (RTT 250 ms): load (measuring)" in done.stdout  # progress was shown
    for name in (
        "scenario.yaml",
        "environment.json",
        "summary.json",
        "lag.csv",
        "links.csv",
        "load.csv",
        "report.md",
        "lag.png",
        "sweep.png",
    ):
        assert (folder / name).stat().st_size > 0, name
    assert summary["status"] == "completed" and summary["consistency"]["identical"] is True
    environment = json.loads((folder / "environment.json").read_text())
    assert environment["platform"] == "docker" and len(environment["nodes"]) == 1  # one engine, one host
    assert environment["service_nodes"]["mysql-target"] == environment["nodes"][0]
    low, high = summary["points"]
    assert (low["params"], high["params"]) == ({"link.rtt": "0ms"}, {"link.rtt": "250ms"})
    for point in (low, high):
        v = point["verification"]
        assert v["ok"], v
        assert abs(v["rtt"]["median_ms"] - v["rtt_asked_ms"]) <= 5
        assert point["tps"] > 60  # 75 TPS asked
        assert point["lag_samples"] > 50
    assert high["p95_lag_seconds"] > low["p95_lag_seconds"] + 0.05, (low, high)
    assert api.get("/api/shaping").json()["shaping"] == [], "cleanup cleared the shaping"
    text = (folder / "report.md").read_text()  # the swept key its own column, its values in words (#27)
    assert "| # | RTT | RTT asked / measured (ms) |" in text and "| 2 | 250 ms |" in text


@pytest.mark.second_lab
def test_max_pressure_quick_search_finds_the_knee_on_a_2_mbit_link(api):
    """replication-max-pressure --quick: the highest write rate native replication sustains at 2 Mbit/s
    and 250 ms, searched (100 TPS doubling, then bisected to 50 %): a knee with its bracket in a few
    probes, and the link, not the host, is what the failing probe ran into."""
    done, summary, folder = run_scenario("replication-max-pressure")
    assert done.returncode == 0, done.stdout[-3000:]
    assert summary["status"] == "completed" and summary["consistency"]["identical"] is True
    assert summary["search"]["until"] == "lag_slope < 0.01", summary["search"]  # --quick's criterion
    (knee,) = summary["knees"]
    assert knee["state"] == "found" and knee["final"] and knee["probes"] <= 6, knee
    good, bad = knee["bracket"]
    assert summary["knee"] == {"load.rate": good} and 50 <= good < bad <= 400, knee
    assert knee["expect"] == [{"expectation": "knee >= 100", "knee": float(good), "passed": True}]
    assert (bad - good) / good <= 0.5
    probes = {p["probe"]["value"]: p for p in summary["points"]}
    assert [p["point"] for p in summary["points"]] == knee["points"] == list(range(1, knee["probes"] + 1))
    held, failed = probes[good], probes[bad]
    assert held["probe"]["verdict"] == "sustained" and held["lag_slope_ci"]["high"] < 0.01, held
    # Not sustained, or undecided twice (its repeat, with a window twice as long), which the search
    # itself counts as not sustained (scenarios/analysis/knee_search.py).
    verdict = failed["probe"]["verdict"]
    assert verdict == "not sustained" or (verdict == "undecided" and failed["probe"]["window_factor"] == 2), failed
    # The failing probe filled the link (its measured goodput), while the one that held did not need to.
    goodput = failed["verification"]["throughput_mbit"]
    assert failed["link_mbit"] >= 0.85 * goodput, (failed["link_mbit"], goodput)
    assert held["binlog_mbit"] < goodput, (held["binlog_mbit"], goodput)
    assert f"knee at native, uncompressed: highest load rate sustained {good} TPS (not at {bad} TPS)" in done.stdout
    text = (folder / "report.md").read_text()
    assert f"the highest load rate that holds: **{good} TPS**; {bad} TPS did not" in text
    assert (folder / "search.png").stat().st_size > 0


def test_client_bandwidth_quick():
    done, summary, folder = run_scenario("client-bandwidth")
    assert done.returncode == 0, done.stdout[-3000:]
    lower, higher = summary["points"]
    assert lower["params"]["link.rate"] == "100mbit" and higher["params"]["link.rate"] == "1gbit"
    assert lower["verification"]["rate_ok"], lower["verification"]
    assert lower["tps"] < 0.8 * higher["tps"], (lower["tps"], higher["tps"])
    # Under the lower cap, the responses to the client fill the link.
    assert lower["reverse_link_mbit"] > 80
    text = (folder / "report.md").read_text()  # a column per swept key, the values in words (#27)
    assert "| # | link rate | protocol | client threads |" in text and "| 100 Mbit/s | plain | " in text


@pytest.mark.second_lab
def test_mysqlslap_point_under_delay(tmp_path):
    """mysqlslap as a scenario's load: 200 single-row inserts, 4 clients, 40 ms RTT to the source."""
    scenario = tmp_path / "slap.yaml"
    scenario.write_text(
        "name: slap-check\nlink: {between: [loadgen, mysql-source], rtt: 40ms}\n"
        "load: {tool: mysqlslap, threads: 4, queries: 200}\nwarmup: 0s\n"
    )
    done = subprocess.run(
        [str(ROOT / "laglab"), "run", str(scenario)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    folder = ROOT / re.search(r"-> (results/\S+)", done.stdout).group(1)
    (point,) = json.loads((folder / "summary.json").read_text())["points"]
    assert point["load_error"] is None
    # 200 inserts over 4 clients = 50 round trips each of >= 40 ms (autocommit: one per insert).
    assert point["load_seconds"] >= 50 * 0.040 * 0.9, point
    assert 0 < point["qps"] <= 200 / (50 * 0.040 * 0.9)


def test_a_cpu_hog_in_loadgen_shows_as_a_saturated_window(tmp_path, settings):
    """#26: every run reports the host's load in each measured window; one the host could not serve (more
    runnable tasks than cores: here busy loops in loadgen) is flagged in summary.json and report.md."""
    loadgen, cores = f"{settings.COMPOSE_PROJECT_NAME}-loadgen-1", os.cpu_count() or 1
    hogs = [
        subprocess.Popen(["docker", "exec", loadgen, "timeout", "120", "sha256sum", "/dev/zero"])
        for _ in range(2 * cores)
    ]
    try:
        scenario = tmp_path / "cpu-hog.yaml"
        scenario.write_text("name: cpu-hog\nload: {tool: none, duration: 6s}\nwarmup: 0s\n")
        done, summary, folder = run_scenario(scenario)
    finally:  # ending `docker exec` leaves its process running in the container
        subprocess.run(["docker", "exec", loadgen, "sh", "-c", "kill $(pidof sha256sum)"], check=False)
        for hog in hogs:
            hog.wait(30)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (point,) = summary["points"]
    host = point["host"]
    assert host["saturated"] and host["runnable_mean"] > cores and host["cpu_pct"] > 90, host
    assert summary["host_saturated_points"] == [1]
    assert "**Warning: the host was saturated** in point(s) 1" in (folder / "report.md").read_text()
