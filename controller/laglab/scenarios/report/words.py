"""A point's parameters in a reader's words, with units: the one place report.md, the plots and the
runs' summaries turn `{"replicator": {...}, "load.rate": 50}` into `DTLE (group max size 1 MiB, ...),
50 TPS` (issue #27: reports printed Python reprs). Each replicator kind words its own options
(Replicator.describe)."""

from __future__ import annotations

import re

from laglab.load.replay import speed_words
from laglab.replicators import KINDS
from laglab.shaping.params import ParamError, format_words, parse_rate, parse_time

# key -> how its value reads (a unit, or a function of the value)
_UNITS = {"load.rate": "TPS", "load.threads": "threads", "load.duration": None, "cluster.delay": None}
_SECONDS = ("load.duration", "onset", "warmup")  # stored in seconds (scenario.json): said as 20 s, 10 min, 2 h
_NAMES = {"link.rtt": "RTT", "link.rate": "link", "link.loss": "loss", "link.jitter": "jitter", "load.rate": "",
          "load.threads": "", "replicator": "", "load": ""}  # fmt: skip
_TIME = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s|min|m|h)$")
_TIME_WORDS = {"m": "min"}  # `10m` reads `10 min` (a rate's `m` never reaches here: rates are parsed first)


def _bits(raw: str) -> float | None:
    """A rate as the scenario wrote it ('2mbit', '2Mbit/s', '2Mbps'), read by the one parser."""
    try:
        return parse_rate("rate", raw)
    except ParamError:
        return None


def duration(seconds: float) -> str:
    """`20 s`, `10 min`, `1.5 h`: a length of time as a reader says it."""
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:g} s"


def seconds(raw: str) -> float | None:
    """A time as the scenario wrote it ('10m', '250ms'), in seconds; None when it is not one."""
    try:
        return parse_time("time", raw, high=1e9)
    except ParamError:
        return None


def value(key: str, raw) -> str:
    """One parameter's value in words: `2 Mbit/s`, `250 ms`, `50 TPS`, a replicator's own description."""
    if isinstance(raw, dict) and "kind" in raw and raw["kind"] in KINDS:
        return KINDS[raw["kind"]].describe(raw)
    if key == "load" and isinstance(raw, dict):
        return load(raw)
    if key in _SECONDS and not isinstance(raw, bool):
        secs = float(raw) if isinstance(raw, int | float) else seconds(raw) if isinstance(raw, str) else None
        if secs is not None:
            return duration(secs)
    if key in _UNITS and _UNITS[key] and isinstance(raw, int | float):
        return f"{raw:g} {_UNITS[key]}"
    if isinstance(raw, str):
        if (bits := _bits(raw)) is not None:
            return format_words(bits)
        if m := _TIME.match(raw):
            return f"{float(m.group(1)):g} {_TIME_WORDS.get(m.group(2), m.group(2))}"
    if isinstance(raw, bool):
        return "on" if raw else "off"
    return str(raw)


def load(section: dict) -> str:
    """A load section swept whole: `replay of profiles/x.json`, `sysbench oltp_insert at 550 TPS`."""
    tool = section.get("tool", "sysbench")
    if tool == "profile":
        return f"replay of {section.get('file')}{speed_words(float(section.get('speed', 1)))}"
    if tool == "sysbench":
        rate = section.get("rate")
        return f"sysbench {section.get('script', 'oltp_write_only')} at {f'{rate} TPS' if rate else 'full speed'}"
    return str(tool)


def name(key: str) -> str:
    """A parameter's name in words ("" where the value says it all: `50 TPS`, `DTLE (...)`)."""
    if key in _NAMES:
        return _NAMES[key]
    return key.split(".")[-1].replace("_", " ")


def param(key: str, raw) -> str:
    label = name(key)
    return f"{label} {value(key, raw)}" if label else value(key, raw)


def params(values: dict, keys=None) -> str:
    """Several parameters (all, or `keys` of them), in words, joined by commas; "-" when none."""
    keys = list(values) if keys is None else keys
    return ", ".join(param(k, values[k]) for k in keys if k in values) or "-"


def number(key: str, raw) -> tuple[float, str] | None:
    """A parameter's value as a number and its unit, for a plot's axis: rates in Mbit/s, times in ms,
    plain numbers as they are (with the key's unit); None when the value is not a quantity."""
    if isinstance(raw, bool) or isinstance(raw, dict):
        return None
    if isinstance(raw, int | float):
        return float(raw), _UNITS.get(key) or ""
    if isinstance(raw, str):
        if (bits := _bits(raw)) is not None:
            return bits / 1e6, "Mbit/s"
        if (secs := seconds(raw)) is not None:
            return secs * 1e3, "ms"
    return None


_AXES = {"load.rate": "load rate", "load.threads": "client threads", "link.rtt": "RTT", "link.rate": "link rate"}


def axis(key: str) -> str:
    """A parameter's name on a plot's axis (where `name` may be empty: the value says it in a row)."""
    return _AXES.get(key) or name(key) or key
