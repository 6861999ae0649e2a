"""A point's parameters in a reader's words, with units: the one place report.md, the plots and the
runs' summaries turn `{"replicator": {...}, "load.rate": 50}` into `DTLE (group max size 1 MiB, ...),
50 TPS` (issue #27: reports printed Python reprs). Each replicator kind words its own options
(Replicator.describe)."""

from __future__ import annotations

import re

from laglab.load.replay import speed_words
from laglab.replicators import KINDS

# key -> how its value reads (a unit, or a function of the value)
_UNITS = {"load.rate": "TPS", "load.threads": "threads", "load.duration": None, "cluster.delay": None}
_NAMES = {"link.rtt": "RTT", "link.rate": "link", "link.loss": "loss", "link.jitter": "jitter", "load.rate": "",
          "load.threads": "", "replicator": "", "load": ""}  # fmt: skip
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$", re.I)
_TIME = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")


def value(key: str, raw) -> str:
    """One parameter's value in words: `2 Mbit/s`, `250 ms`, `50 TPS`, a replicator's own description."""
    if isinstance(raw, dict) and "kind" in raw and raw["kind"] in KINDS:
        return KINDS[raw["kind"]].describe(raw)
    if key == "load" and isinstance(raw, dict):
        return load(raw)
    if key in _UNITS and _UNITS[key] and isinstance(raw, int | float):
        return f"{raw:g} {_UNITS[key]}"
    if isinstance(raw, str):
        if m := _RATE.match(raw):
            unit = {"bit": "bit/s", "kbit": "kbit/s", "mbit": "Mbit/s", "gbit": "Gbit/s"}[m.group(2).lower()]
            return f"{float(m.group(1)):g} {unit}"
        if m := _TIME.match(raw):
            return f"{float(m.group(1)):g} {m.group(2)}"
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
        if m := _RATE.match(raw):
            scale = {"bit": 1e-6, "kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}[m.group(2).lower()]
            return float(m.group(1)) * scale, "Mbit/s"
        if m := _TIME.match(raw):
            scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
            return float(m.group(1)) * scale, "ms"
    return None


_AXES = {"load.rate": "load rate", "load.threads": "client threads", "link.rtt": "RTT", "link.rate": "link rate"}


def axis(key: str) -> str:
    """A parameter's name on a plot's axis (where `name` may be empty: the value says it in a row)."""
    return _AXES.get(key) or name(key) or key
