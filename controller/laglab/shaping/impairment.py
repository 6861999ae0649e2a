"""One set of impairments: the value every layer passes on, from a PUT body or a scenario's link to the
kernel's argv and the userspace worker's rules.

Standard library only: the worker (nfqueue.py) imports it inside the bridge's namespace. A new netem
knob is one entry of KNOBS (its name, kind, help: the API's body, the CLI's options, the parser and the
docs derive from it), one field of Impairment and its renderers below (`to_json` for the API,
`netem_args` for tc), and the backends that implement it; `plus` is the one place settings on the
same packets are merged.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")
GEMODEL_KEYS = ("p", "r", "1-h", "1-k")


def format_time(seconds: float) -> str:
    if seconds >= 1 and float(seconds).is_integer():
        return f"{int(seconds)}s"
    ms = seconds * 1e3
    if ms >= 1 or seconds == 0:
        return f"{ms:g}ms"
    return f"{seconds * 1e6:g}us"


def format_rate(bits: float) -> str:
    for unit, size in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits >= size and math.isclose(bits / size, round(bits / size, 3)):
            return f"{round(bits / size, 3):g}{unit}"
    return f"{int(bits)}bit"


def format_percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


@dataclass(frozen=True)
class Knob:
    """One knob of the API, as everything that names one reads it (#37: the field set was written out
    seven times). kind: time (with its unit), percent, rate (tc units), choice (of `choices`), count
    (whole packets), gemodel (netem's loss model, an object)."""

    name: str
    kind: str
    help: str
    example: str | None = None
    alone: bool = True  # applies by itself ("nothing to apply" names these); False: modifies another
    choices: tuple[str, ...] = ()


# In the order a reader names them (the CLI's options, the API's body).
KNOBS: tuple[Knob, ...] = (
    Knob("delay", "time", "one-way delay, 0..60s", "125ms"),
    Knob("jitter", "time", "± around the delay; needs a delay", "5ms"),
    Knob("distribution", "choice", "of the jitter", alone=False, choices=DISTRIBUTIONS),
    Knob("correlation", "percent", "of successive draws: the jitter, the loss, the reorder", alone=False),
    Knob("loss", "percent", "random loss", "0.5%"),
    Knob("gemodel", "gemodel", "Gilbert-Elliott (bursty) loss, instead of loss"),
    Knob("rate", "rate", "bandwidth, 8kbit..10gbit (2Mbit/s, 2mbit or 2Mbps = megabits; 2MB/s = megabytes; tc's 2mbps is refused: it reads two ways)", "2mbit"),
    Knob("duplicate", "percent", "packets sent twice", "0.1%"),
    Knob("corrupt", "percent", "packets with a flipped bit (the receiver drops them)", "0.1%"),
    Knob("reorder", "percent", "packets sent at once, overtaking held ones (no effect without a delay, as netem)"),
    Knob("gap", "count", "netem's reorder gap, 1..1000 packets; needs a reorder", alone=False),
)  # fmt: skip


@dataclass(frozen=True)
class Impairment:
    """What happens to a stream of packets, in SI units (seconds, fractions, bits per second).
    0 or None = not asked for."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    rate: float | None = None
    correlation: float = 0.0  # of successive draws (jitter, loss, reorder, duplicate, corrupt), as netem's
    distribution: str | None = None  # of the jitter
    duplicate: float = 0.0
    corrupt: float = 0.0
    reorder: float = 0.0  # this share goes at once, ahead of the held packets
    gemodel: tuple[float, float, float, float] | None = None  # netem's loss gemodel p r 1-h 1-k (fractions)
    gap: int = 0  # netem's reorder gap: only a packet after gap - 1 delayed ones may be reordered

    @property
    def empty(self) -> bool:
        return self == Impairment()

    @property
    def holds(self) -> bool:
        """Whether it does anything to a packet but limit the rate (what the receiving side applies)."""
        return bool(self.delay or self.jitter or self.loss or self.gemodel or self.duplicate or self.corrupt)

    def held(self) -> Impairment | None:
        """The part applied to received packets (everything but the rate), None when that does nothing."""
        return replace(self, rate=None) if self.holds else None

    def plus(self, other: Impairment) -> Impairment:
        """Two settings on the same packets: delays and jitters add, losses combine, the lower rate wins,
        the stronger of the other shares."""
        rates = [r for r in (self.rate, other.rate) if r]
        return Impairment(
            delay=self.delay + other.delay,
            jitter=self.jitter + other.jitter,
            loss=1.0 - (1.0 - self.loss) * (1.0 - other.loss),
            rate=min(rates) if rates else None,
            correlation=max(self.correlation, other.correlation),
            distribution=self.distribution or other.distribution,
            duplicate=max(self.duplicate, other.duplicate),
            corrupt=max(self.corrupt, other.corrupt),
            reorder=max(self.reorder, other.reorder),
            gemodel=self.gemodel or other.gemodel,
            gap=max(self.gap, other.gap),
        )

    # --- renderers ---
    def to_json(self) -> dict:
        """The API's words: tc-style strings, only the fields that are set."""
        out: dict = {}
        for knob in KNOBS:
            value = getattr(self, knob.name)
            if value in (None, 0.0):
                continue
            if knob.kind == "gemodel":
                out[knob.name] = dict(zip(GEMODEL_KEYS, (format_percent(v) for v in value), strict=True))
            else:
                out[knob.name] = RENDER.get(knob.kind, lambda v: v)(value)
        return out

    def netem_args(self) -> list[str]:
        """tc-netem(8)'s words after `netem [limit N]`."""
        args: list[str] = []
        # The one correlation of the API goes with every draw that takes one, as the userspace worker does.
        corr = [format_percent(self.correlation)] if self.correlation else []
        if self.delay:
            args += ["delay", format_time(self.delay)]
            if self.jitter:
                args += [format_time(self.jitter), *corr]
                if self.distribution:
                    args += ["distribution", self.distribution]
        if self.gemodel:
            args += ["loss", "gemodel", *(format_percent(v) for v in self.gemodel)]
        if self.loss:
            args += ["loss", format_percent(self.loss), *corr]
        if self.duplicate:
            args += ["duplicate", format_percent(self.duplicate), *corr]
        if self.corrupt:
            args += ["corrupt", format_percent(self.corrupt), *corr]
        if self.reorder:
            args += ["reorder", format_percent(self.reorder), *corr, *(["gap", str(self.gap)] if self.gap else [])]
        return args

    def to_wire(self) -> dict:
        """JSON-safe: what the controller saves and sends the worker (lists where the type has tuples)."""
        return asdict(self)

    @classmethod
    def from_wire(cls, values: dict) -> Impairment:
        """What to_wire wrote; unknown keys are an error (a worker older than its controller says so)."""
        gemodel = values.get("gemodel")
        return cls(**{**values, "gemodel": tuple(float(v) for v in gemodel) if gemodel else None})


RENDER = {"time": format_time, "rate": format_rate, "percent": format_percent}
