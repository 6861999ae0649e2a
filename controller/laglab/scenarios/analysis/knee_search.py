"""The search for a knee (a scenario's `search:`): the highest value of a knob that keeps a criterion
(a load rate the link sustains), or the lowest (the slowest link that carries a load), found by
growing the step until the criterion fails and then bisecting the bracket. The runner measures each
probe as a point of the run; this module decides what to probe next and what a probe's figures say.

A probe's verdict is statistical, not one figure: the lag slope over the measured window with its
confidence interval. Sustained when the whole interval is under the limit, not sustained when the whole
of it is over, undecided otherwise; an undecided probe is measured again with a window twice as long,
and a second undecided answer counts as not sustained (the knee is then reported no higher than it is
known to hold). Pure: the runner measures, this module decides.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from laglab.scenarios.analysis.record import PointRecord

SUSTAINED, NOT_SUSTAINED, UNDECIDED = "sustained", "not sustained", "undecided"
# Student's t, two-sided 95 %, by degrees of freedom (1..30); the normal's 1.96 beyond.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
       2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
       2.045, 2.042)  # fmt: skip


def t95(dof: float) -> float:
    if dof < 1:
        return math.inf
    return T95[int(dof) - 1] if dof <= len(T95) else 1.96


@dataclass(frozen=True)
class Slope:
    """A least-squares slope (s of lag per s) with its 95 % interval, from per-second means; the
    interval is widened for the samples' autocorrelation (effective sample size from the residuals'
    lag-1 correlation), since a lag series is anything but independent draws."""

    slope: float
    low: float
    high: float
    seconds: int  # per-second means it was fitted on
    effective: float  # their effective number once autocorrelation is counted

    def as_json(self) -> dict:
        return {"slope": round(self.slope, 5), "low": round(self.low, 5), "high": round(self.high, 5),
                "seconds": self.seconds, "effective": self.effective}  # fmt: skip

    @classmethod
    def from_json(cls, doc: dict | None) -> Slope | None:
        return None if doc is None else cls(doc["slope"], doc["low"], doc["high"], doc["seconds"], doc["effective"])


def slope_interval(samples: list[tuple[float, float]]) -> Slope | None:
    """(epoch seconds, lag seconds) samples -> Slope, or None with under 4 seconds of them."""
    bins: dict[int, list[float]] = {}
    for t, lag in samples:
        bins.setdefault(int(t), []).append(lag)
    if len(bins) < 4:
        return None
    xs = sorted(bins)
    ys = [statistics.fmean(bins[x]) for x in xs]
    n = len(xs)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    residuals = [y - (my + b * (x - mx)) for x, y in zip(xs, ys, strict=True)]
    variance = sum(r * r for r in residuals) / (n - 2)
    rho = 0.0
    if variance > 0:
        rho = sum(a * c for a, c in itertools.pairwise(residuals)) / (variance * (n - 2))
    rho = min(max(rho, 0.0), 0.95)
    effective = max(3.0, n * (1 - rho) / (1 + rho))
    se = math.sqrt(variance / sxx) * math.sqrt(n / effective)
    half = t95(effective - 2) * se
    return Slope(b, b - half, b + half, n, round(effective, 1))


@dataclass(frozen=True)
class Criterion:
    """`metric < limit` (only `<` for now: the searched metric is one that must stay low)."""

    metric: str
    limit: float

    @classmethod
    def parse(cls, text: str) -> Criterion:
        m = re.fullmatch(r"\s*([a-z_]+)\s*<\s*([0-9.eE+-]+)\s*", text or "")
        if not m:
            raise ValueError(f"until: {text!r} is not of the form 'lag_slope < 0.005'")
        if m[1] != "lag_slope":
            raise ValueError(f"until: the search decides on lag_slope (its confidence interval), not {m[1]}")
        return cls(m[1], float(m[2]))

    def verdict(self, slope: Slope | None) -> str:
        if slope is None:
            return UNDECIDED
        if slope.high < self.limit:
            return SUSTAINED
        if slope.low > self.limit:
            return NOT_SUSTAINED
        return UNDECIDED


@dataclass
class Probe:
    value: float
    verdict: str
    window_factor: int = 1  # 2: the repeat of an undecided probe, with a window twice as long
    slope: Slope | None = None


@dataclass
class KneeSearch:
    """`highest`: the highest value in [low, high] that is sustained (grow from `low`); otherwise the
    lowest (shrink from `high`: the slowest link that carries a load). `resolution`: the bracket's
    width relative to its sustained end at which the search stops. `growth`: the step's factor."""

    low: float
    high: float
    resolution: float = 0.05
    highest: bool = True
    growth: float = 2.0
    max_probes: int = 12
    # The knob's own step (whole TPS, whole kbit/s): a probe is asked at rounded values, and the search
    # ends when the next one would repeat a value already measured (the bracket is as tight as it goes).
    rounding: Callable[[float], float] = float
    probes: list[Probe] = field(default_factory=list)
    good: float | None = None  # the best value known sustained
    bad: float | None = None  # the nearest value known not sustained
    _pending: tuple[float, int] | None = None  # (value, window factor) asked and not yet recorded
    _finest: bool = False  # the knob's step is reached: nothing lies between good and bad

    def __post_init__(self):
        if not 0 < self.low < self.high:
            raise ValueError(f"from/to: need 0 < from < to (got {self.low:g}, {self.high:g})")
        if not 0 < self.resolution < 1:
            raise ValueError(f"resolution: {self.resolution:g} is not a fraction between 0 and 1")

    @property
    def start(self) -> float:
        return self.low if self.highest else self.high

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.highest else a < b

    def next(self) -> tuple[float, int] | None:
        """(value, window factor) of the next probe, or None when the search is over."""
        if self._pending is not None:
            return self._pending
        if len(self.probes) >= self.max_probes or self.done:
            return None
        if not self.probes:
            self._pending = (self.rounding(self.start), 1)
        elif self.bad is None:  # still growing (or shrinking) the step
            edge = self.high if self.highest else self.low
            value = min(self.good * self.growth, edge) if self.highest else max(self.good / self.growth, edge)
            value = self.rounding(value)
            if value == self.good:  # the whole range holds
                return None
            self._pending = (value, 1)
        else:
            value = self.rounding(math.sqrt(self.good * self.bad) if self.good else self.bad / 2)
            if value in (self.good, self.bad):
                self._finest = True
                return None
            self._pending = (value, 1)
        return self._pending

    def record(self, value: float, verdict: str, slope: Slope | None = None) -> None:
        factor = self._pending[1] if self._pending and self._pending[0] == value else 1
        self._pending = None
        self.probes.append(Probe(value, verdict, factor, slope))
        if verdict == UNDECIDED and factor == 1:
            self._pending = (value, 2)  # measured again, twice as long
            return
        if verdict == SUSTAINED:
            if self.good is None or self._better(value, self.good):
                self.good = value
        elif self.bad is None or self._better(self.bad, value):  # not sustained, or undecided twice
            self.bad = value

    @property
    def done(self) -> bool:
        if self.probes and self.good is None and self.bad is not None and self.bad == self.start:
            return True  # even the start fails: no knee in the range
        if self.good is None or self.bad is None:
            return False
        return self._finest or abs(self.bad - self.good) / self.good <= self.resolution

    def result(self) -> dict:
        """The knee and its bracket, for summary.json and the report."""
        bracket = None if self.good is None else [self.good, self.bad]
        edge = self.rounding(self.high if self.highest else self.low)
        going = len(self.probes) < self.max_probes or self._pending is not None
        if self.good is not None and self.bad is None and self.good == edge:
            state = "the whole range holds"
        elif self.good is None and self.bad is not None and self.done:
            state = "nothing in the range holds"
        elif self.done:
            state = "found"
        elif going:
            state = "searching"
        else:
            state = f"stopped after {len(self.probes)} probes"
        return {"knee": self.good, "bracket": bracket, "state": state, "probes": len(self.probes),
                "undecided": sum(1 for p in self.probes if p.verdict == UNDECIDED)}  # fmt: skip

    def most_probes(self) -> int:
        """The most probes the search can take (--plan): growth steps, bisections, and one repeat each."""
        steps = math.ceil(math.log(self.high / self.low, self.growth)) + 1
        bisections = max(0, math.ceil(math.log2(max(1.0, (self.growth - 1) / self.resolution))))
        return min(self.max_probes, 2 * (steps + bisections))


def took(tps: float, asked: float, seconds: float | None) -> bool:
    """Whether the source took the asked write rate. sysbench's --rate is a Poisson process (its
    eventgen_thread_proc, src/sysbench.c, sleeps exponentially distributed gaps), so a window of
    `seconds` counts asked x seconds +- its square root by chance alone: 15 s at 100 TPS is 100 +- 2.6
    TPS, and 95 % was missed by a load that ran as asked (seen in CI: 94.69 TPS, the lag flat at 0.2 s).
    Not taken: under 95 % of it and more than 4 standard deviations of that count under it."""
    sigma = math.sqrt(asked / seconds) if seconds else 0.0
    return tps >= min(0.95 * asked, asked - 4 * sigma)


def judge(criterion: Criterion, point: PointRecord, asked_rate: float | None = None) -> tuple[str, Slope | None, str]:
    """A measured point's verdict (its record's figures), its slope and why, in words. A load that
    failed, or a write rate the source did not take (`took`), is not sustained whatever the lag did:
    the load asked was not the load that ran."""
    slope = Slope.from_json(point.lag_slope_ci)
    if point.load_error:
        return NOT_SUSTAINED, slope, f"the load failed: {point.load_error}"
    if asked_rate and not took(point.tps or 0, asked_rate, point.measured_seconds):
        return NOT_SUSTAINED, slope, f"the source took {point.tps or 0:g} of {asked_rate:g} TPS asked"
    verdict = criterion.verdict(slope)
    if slope is None:
        return verdict, None, "too few lag samples for a slope"
    relation = {SUSTAINED: "under", NOT_SUSTAINED: "over", UNDECIDED: "across"}[verdict]
    return verdict, slope, f"the interval lies {relation} {criterion.limit:g} s/s"
