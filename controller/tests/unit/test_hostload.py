"""The host's load in a window: the saturation rule on synthetic series, /proc as the kernel writes it,
and the warning in report.md and summary.json's words."""

import json

from laglab.measurement import hostload
from laglab.measurement.hostload import Reading, summary
from laglab.scenarios.report import markdown as report


def series(runnable: list[int], busy_per_step=150, total_per_step=200, own_per_step=5):
    return [
        Reading(at=i * 0.5, busy=i * busy_per_step, total=i * total_per_step, runnable=r, load1=1.0 + r / 10,
                own=i * own_per_step, workers=i * 2)
        for i, r in enumerate(runnable)
    ]  # fmt: skip


def test_a_window_with_more_runnable_tasks_than_cores_a_fifth_of_the_time_is_saturated():
    busy = summary(series([1, 3, 3, 1, 1, 4, 1, 1, 1, 1, 1]), cores=2, hz=100)
    assert (busy["saturated"], busy["saturated_share"], busy["runnable_max"]) == (True, 0.3, 4)
    assert busy["cpu_pct"] == 75.0 and busy["controller_cpu_pct"] == 10.0 and busy["workers_cpu_pct"] == 4.0
    quiet = summary(series([1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1]), cores=2, hz=100)
    assert (quiet["saturated"], quiet["saturated_share"]) == (False, 0.1)
    assert summary(series([1]), cores=2) is None


def test_proc_is_read_as_the_kernel_writes_it(tmp_path):
    (tmp_path / "stat").write_text(
        "cpu  100 5 50 800 20 0 5 0 0 0\ncpu0 50 2 25 400 10 0 2 0 0 0\nintr 1\nprocs_running 4\nprocs_blocked 0\n"
    )
    (tmp_path / "loadavg").write_text("2.50 1.20 0.80 4/321 9999\n")
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "stat").write_text("42 (python3 (x)) S " + " ".join(["0"] * 10) + " 7 3 0 0\n")
    got = hostload.read(str(tmp_path))
    assert (got.busy, got.total, got.runnable, got.load1, got.own, got.workers) == (160, 980, 3, 2.5, 10, 0)


def test_the_report_warns_of_a_saturated_window(tmp_path):
    host = summary(series([3, 3, 3, 1]), cores=2)
    point = {"point": 1, "params": {}, "verification": {}, "assertions": [], "host": host}
    (tmp_path / "summary.json").write_text(
        json.dumps({"id": "x", "scenario": "s", "status": "completed", "points": [point], "host_saturated_points": [1]})
    )
    text = report.render(tmp_path).read_text()
    assert "**Warning: the host was saturated** in point(s) 1" in text
    assert "bound by the CPU, not by the network" in text
