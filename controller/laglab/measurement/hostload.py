"""The host's load during a point's measured window, so a reader can tell a CPU-bound figure from a
network-bound one: the host's CPU use, its load average, how many tasks were runnable against how many
cores, and what the lab itself took (the controller, the userspace shaping workers).

Read from /proc (the controller runs with `pid: host`, so /proc is the host's: /proc/stat and
/proc/loadavg are not namespaced anyway). A window is **saturated** when, in at least a fifth of its
half-second samples, more tasks were runnable than the host has cores: some of them waited for a CPU,
the lab's servers and agents among them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

SATURATED_SHARE = 0.2  # of the samples with more runnable tasks than cores
INTERVAL = 0.5


@dataclass(frozen=True)
class Reading:
    at: float  # monotonic seconds
    busy: int  # host CPU ticks spent not idle (all cores)
    total: int  # all host CPU ticks
    runnable: int  # tasks runnable now (procs_running, the sampler itself not counted)
    load1: float
    own: int  # ticks of the controller's process
    workers: int  # ticks of the shaping workers


def read(proc: str = "/proc", workers: list[int] = ()) -> Reading:
    with open(f"{proc}/stat") as f:
        lines = f.read().splitlines()
    cpu = [int(v) for v in lines[0].split()[1:]]
    idle = cpu[3] + (cpu[4] if len(cpu) > 4 else 0)  # idle + iowait
    running = next((int(line.split()[1]) for line in lines if line.startswith("procs_running ")), 0)
    with open(f"{proc}/loadavg") as f:
        load1 = float(f.read().split()[0])
    return Reading(
        time.monotonic(), sum(cpu[:8]) - idle, sum(cpu[:8]), max(0, running - 1), load1,
        _ticks(proc, "self"), sum(_ticks(proc, str(pid)) for pid in workers),
    )  # fmt: skip


def _ticks(proc: str, pid: str) -> int:
    """utime + stime of a process (0 when it is gone)."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def summary(readings: list[Reading], cores: int, hz: int = 100) -> dict | None:
    """What the window's readings say (None for fewer than two)."""
    if len(readings) < 2:
        return None
    first, last = readings[0], readings[-1]
    wall = max(1e-6, last.at - first.at)
    samples = readings[1:]
    over = sum(1 for r in samples if r.runnable > cores)
    share = over / len(samples)
    return {
        "cores": cores,
        "cpu_pct": round(100 * (last.busy - first.busy) / max(1, last.total - first.total), 1),
        "load1_max": max(r.load1 for r in readings),
        "runnable_mean": round(sum(r.runnable for r in samples) / len(samples), 2),
        "runnable_max": max(r.runnable for r in samples),
        "saturated_share": round(share, 3),
        "saturated": share >= SATURATED_SHARE,
        # % of one core, as `docker stats` and top count
        "controller_cpu_pct": round(100 * (last.own - first.own) / hz / wall, 1),
        "workers_cpu_pct": round(100 * max(0, last.workers - first.workers) / hz / wall, 1),
    }


@dataclass
class HostLoad:
    """Samples the host every half second between start() and stop(); stop() answers summary()."""

    workers: Callable[[], list[int]] = list  # the shaping workers' PIDs now
    proc: str = "/proc"
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    readings: list[Reading] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.readings = [read(self.proc, self.workers())]
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="host-load", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(INTERVAL):
            try:
                self.readings.append(read(self.proc, self.workers()))
            except OSError:  # a /proc without these files: no figures rather than no run
                return

    def stop(self) -> dict | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        try:
            self.readings.append(read(self.proc, self.workers()))
        except OSError:
            pass
        return summary(self.readings, self.cores, os.sysconf("SC_CLK_TCK"))
