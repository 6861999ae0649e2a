"""The point's load (scenarios/measure.LoadPhase._load) through the run's sleep: `load.reconnect`
starts sysbench again, a second apart, while the server keeps dropping it (#52.3: one wait helper,
deadline.poll, in place of a hand-written deadline loop), and a cancelled run's sleep ends it.

The load generator here answers as LoadGenerator does: start() runs one sysbench, wait() returns when
it ended, and `error` is its FATAL line. A sysbench that loses its server ends with sysbench's own
driver message (src/drivers/mysql/drv_mysql.c: "unable to connect to MySQL server on host '%s', port
%u, aborting..."), logged with the FATAL prefix that LoadGenerator._follow keeps."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from laglab.scenarios.plan import load_text
from laglab.scenarios.run.measure import LoadPhase, Window

LOST = "FATAL: unable to connect to MySQL server on host 'mysql-source', port 3306, aborting..."


class DroppedLoad:
    """sysbench whose first `drops` runs lose the server."""

    def __init__(self, drops: int):
        self.drops, self.starts = drops, []
        self.error, self.stopping = None, False

    def start(self, profile, seconds, on_row=None, owner="panel"):
        self.starts.append((seconds, owner))
        self.error = LOST if len(self.starts) <= self.drops else None
        if on_row is not None and self.error is None:
            on_row({"elapsed_s": 1, "tps": 10.0, "qps": 40.0})

    def wait(self, timeout=None):
        return None


def phase(load, sleep, reconnect=True) -> LoadPhase:
    text = f"name: x\nload: {{rate: 10, duration: 60s, reconnect: {str(reconnect).lower()}}}\nwarmup: 0s\n"
    plan = load_text(text).points[0].plan().load
    clock = SimpleNamespace(sleep=sleep, time=time.time, monotonic=time.monotonic)  # the run's, its sleep given
    return LoadPhase(load, plan, 1, "run-1", [], clock)


def test_a_dropped_sysbench_is_started_again_a_second_later_and_each_restart_counted():
    load, slept = DroppedLoad(drops=2), []
    window = Window(load_start=0.0)
    phase(load, slept.append)._load(window)
    assert len(load.starts) == 3 and slept == [1.0, 1.0] and window.load_restarts == 2
    assert all(owner == "run-1" and 58 <= seconds <= 60 for seconds, owner in load.starts), load.starts
    assert load.error is None and window.load_rows[0]["point"] == 1


def test_without_reconnect_a_dropped_sysbench_is_the_points_load_error():
    load, slept = DroppedLoad(drops=1), []
    window = Window(load_start=0.0)
    phase(load, slept.append, reconnect=False)._load(window)
    assert len(load.starts) == 1 and slept == [] and load.error == LOST and window.load_restarts == 0


def test_a_cancelled_run_ends_the_retries():
    class Interrupted(Exception):
        pass

    def cancelled(seconds):
        raise Interrupted

    load = DroppedLoad(drops=5)
    window = Window(load_start=0.0)
    phase(load, cancelled)._load(window)  # the load's thread ends; the run's own wait raises
    assert len(load.starts) == 1 and window.load_restarts == 1


def test_a_failure_of_the_load_itself_is_not_taken_for_a_cancel():
    class Broken(DroppedLoad):
        def start(self, *args, **kwargs):
            raise RuntimeError("loadgen could not write its option files")

    with pytest.raises(RuntimeError, match="option files"):
        phase(Broken(0), lambda s: None)._load(Window(load_start=0.0))


class Counting:
    """A replicator's window counter and its own figures, as replicators/base.py defines them: the byte
    counter read at the window's start and end, a figure each second while the load runs."""

    def __init__(self):
        self.reads = iter([1000, 1500])

    def window_bytes(self):
        return next(self.reads)

    def sample(self):
        return {"queue": 1}


def test_the_window_is_a_pipeline_of_values_the_runner_takes_in_order():
    """#52.3: start -> warm_up -> measure, each a value the runner takes; nothing calls back into it."""
    load, slept = DroppedLoad(drops=0), []
    steps = phase(load, slept.append)
    window = steps.start()
    assert window.start == 0.0 and window.load_start > 0 and load.starts  # the load runs; no window yet
    start = steps.warm_up(window)
    assert start == window.start >= window.load_start and slept[0] == 0  # warmup: 0s, slept through the run's
    measured = steps.measure(window, Counting())
    assert measured is window and measured.end >= start and measured.bytes == 500
    assert measured.load_error is None and measured.load_rows[0]["point"] == 1
