"""One point's recording: the lag and link samples the recorders publish, streamed into the run's own
lag.csv and links.csv as they arrive, and the running figures of the measured window.

Nothing is copied out of a recorder's bounded in-memory buffer afterwards, so a point of any length
(load.duration goes up to 24 h) is recorded whole. Memory per point: one float per lag sample of the
measured window (for the exact p95) and a few numbers per link.
"""

from __future__ import annotations

import array
import math
import threading
from dataclasses import dataclass

from laglab.deadline import WALL, Clock
from laglab.measurement.counters import counter_delta
from laglab.measurement.stats import percentile
from laglab.scenarios.analysis.knee_search import slope_interval

CAUGHT_UP_BELOW = 1.0  # seconds of lag: the replica counts as caught up again after a disruption


def slope(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares slope (seconds of lag per second) of (time, lag) pairs."""
    if not samples:
        return None
    running = RunningSlope(samples[0][0])
    for t, y in samples:
        running.add(t, y)
    return running.value


class RunningSlope:
    """Least-squares slope of (time, value) pairs, kept as sums (times relative to `origin`)."""

    def __init__(self, origin: float):
        self.origin = origin
        self.n = 0
        self.sx = self.sy = self.sxx = self.sxy = 0.0

    def add(self, t: float, y: float) -> None:
        x = t - self.origin
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.sxy += x * y

    @property
    def value(self) -> float | None:
        if self.n < 2:
            return None
        var = self.sxx - self.sx * self.sx / self.n
        if var <= 0 or math.isclose(var, 0.0, abs_tol=1e-12):
            return None
        return (self.sxy - self.sx * self.sy / self.n) / var


@dataclass
class _LinkBytes:
    """A link's byte counter around the measured window, read once a second: interpolated at the
    window's start (the load runs through it), read at the first sample after its end (the load stops
    there), so the counters' slack either side never dilutes the rate. Wraps and resets count from zero."""

    start: float
    epoch: float  # the newest sample
    count: int  # its raw counter
    total: int = 0  # bytes counted since the first sample
    at_start: tuple[float, float] | None = None  # (epoch, bytes) where the window starts
    at_end: tuple[float, float] | None = None

    def __post_init__(self):
        if self.epoch >= self.start:
            self.at_start = (self.epoch, 0.0)

    def add(self, epoch: float, count: int, end: float | None) -> None:
        before = (self.epoch, self.total)
        self.total += counter_delta(self.count, count)
        self.epoch, self.count = epoch, count
        if self.at_start is None and epoch >= self.start:
            self.at_start = (self.start, _between(before, (epoch, self.total), self.start))
        if end is not None and self.at_end is None and epoch >= end:
            # The window ends when the load does: what the link counted after `end` is the tail of the
            # load's last second, not idle time, so the first reading after it closes the window.
            self.at_end = (end, self.total)

    @property
    def mbit(self) -> float | None:
        if self.at_start is None:
            return None
        (t0, b0), (t1, b1) = self.at_start, self.at_end or (self.epoch, self.total)
        if t1 <= t0:
            return None
        return round((b1 - b0) * 8 / 1e6 / (t1 - t0), 4)


def _between(a: tuple[float, float], b: tuple[float, float], t: float) -> float:
    """The counter at time t, on the line from sample a to sample b (t within them)."""
    (ta, va), (tb, vb) = a, b
    if tb <= ta or t <= ta:
        return va
    return va + (vb - va) * min(1.0, (t - ta) / (tb - ta))


class PointRecording:
    """Opened when a point's load starts; `measure_from` when the warm-up ends; `close` at the end."""

    LINK_SLACK = 1.5  # link counters tick once a second: one reading either side of the window

    def __init__(
        self,
        point: int,
        load_start: float,
        lag_series,
        link_series,
        links: tuple[tuple[str, str], ...],
        feeds: tuple[str, ...] = ("lag", "links"),
        nodes: tuple[str, ...] = (),
        clock: Clock = WALL,
    ):
        self.point, self.load_start, self.clock = point, load_start, clock
        self.lag_series, self.link_series = lag_series, link_series
        self.links = links
        self.start: float | None = None
        self.end: float | None = None
        self.lags = array.array("d")
        self.times = array.array("d")  # each lag sample's epoch (the slope's confidence interval)
        self.slope: RunningSlope | None = None
        self.gaps = 0
        self._before: dict[tuple[str, str], list[tuple[float, int]]] = {}
        self._bytes: dict[tuple[str, str], _LinkBytes] = {}
        self._lock = threading.Lock()
        self._past_end = {name: threading.Event() for name in feeds}  # only the feeds that will publish
        self._catch_up: list[dict] = []  # timeline events whose catch-up is not seen yet
        self.nodes = nodes  # a cluster point's members: their own lag samples are recorded too
        self.node_max: dict[str, float] = {}

    def watch_catch_up(self, event: dict) -> None:
        """Set event["catch_up_seconds"]: from its effect to the first sample with lag < 1 s."""
        with self._lock:
            self._catch_up.append(event)

    # --- subscribers of the recorders' feeds ---
    def on_lag(self, sample) -> None:
        if "lag" not in self._past_end:
            return  # the point's replication is not what the heartbeat measures (a cluster)
        with self._lock:
            if sample.epoch < self.load_start:
                return
            if self.end is not None and sample.epoch > self.end:
                self._past_end.get("lag", threading.Event()).set()
                return
            self.lag_series.append({"point": self.point, **sample.as_dict()})
            if sample.status != "ok":
                self.gaps += 1
            if self.start is not None and sample.epoch >= self.start and sample.lag_seconds is not None:
                self.lags.append(sample.lag_seconds)
                self.times.append(sample.epoch)
                self.slope.add(sample.epoch, sample.lag_seconds)
            if sample.status == "ok" and sample.lag_seconds is not None and sample.lag_seconds < CAUGHT_UP_BELOW:
                for event in [e for e in self._catch_up if sample.epoch >= e["effect_epoch"]]:
                    event["catch_up_seconds"] = round(sample.epoch - event["effect_epoch"], 3)
                    self._catch_up.remove(event)

    def on_node_lag(self, sample) -> None:
        """A cluster member's lag sample (laglab.measurement.cluster_lag): into lag.csv with its replica, and its
        maximum over the measured window."""
        if sample.replica not in self.nodes:
            return
        with self._lock:
            if sample.epoch < self.load_start or (self.end is not None and sample.epoch > self.end):
                return
            self.lag_series.append({"point": self.point, **sample.as_dict()})
            if self.start is not None and sample.epoch >= self.start and sample.lag_seconds is not None:
                self.node_max[sample.replica] = max(self.node_max.get(sample.replica, 0.0), sample.lag_seconds)

    def on_links(self, rows: list[dict]) -> None:
        with self._lock:
            for row in rows:
                epoch = row["epoch"]
                if epoch < self.load_start:
                    continue
                if self.end is not None and epoch > self.end:
                    self._past_end.get("links", threading.Event()).set()
                    if epoch > self.end + self.LINK_SLACK:
                        continue
                else:
                    self.link_series.append({"point": self.point, **row})
                pair = (row["service"], row["peer"])
                if row["kind"] != "link" or pair not in self.links:
                    continue
                if self.start is None:
                    self._before.setdefault(pair, []).append((epoch, int(row["tx_bytes"])))
                    self._before[pair] = self._before[pair][-4:]
                else:
                    self._count(pair, epoch, int(row["tx_bytes"]))

    def _count(self, pair, epoch: float, count: int) -> None:
        if epoch < self.start - self.LINK_SLACK:
            return
        current = self._bytes.get(pair)
        if current is None:
            self._bytes[pair] = _LinkBytes(self.start, epoch, count)
        else:
            current.add(epoch, count, self.end)

    # --- the point's phases ---
    def measure_from(self, start: float) -> None:
        with self._lock:
            self.start = start
            self.slope = RunningSlope(start)
            for pair, rows in self._before.items():
                for epoch, count in rows:
                    self._count(pair, epoch, count)
            self._before.clear()

    def close(self, end: float, wait: float = 3.0) -> None:
        """The window ends at `end`; samples taken up to then may still be on their way: wait (at most
        `wait` seconds per feed) for the first one taken after it."""
        with self._lock:
            self.end = end
        for event in self._past_end.values():
            self.clock.wait(event, wait)

    def figures(self) -> dict:
        with self._lock:
            lags = self.lags
            slope = self.slope.value if self.slope else None
            interval = slope_interval(list(zip(self.times, lags, strict=True)))
            return {
                "lag_samples": len(lags),
                "gaps": self.gaps,
                "max_lag_seconds": round(max(lags), 3) if lags else None,
                "p95_lag_seconds": round(percentile(lags, 95), 3) if lags else None,
                "lag_slope": None if slope is None else round(slope, 5),
                # its 95 % interval from per-second means, widened for their autocorrelation (analysis/knee_search.py)
                "lag_slope_ci": None if interval is None else interval.as_json(),
                "links_mbit": {pair: b.mbit for pair, b in self._bytes.items()},
                **(
                    {"node_max_lag_seconds": {k: round(v, 3) for k, v in sorted(self.node_max.items())}}
                    if self.nodes
                    else {}
                ),
            }
