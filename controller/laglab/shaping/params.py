"""Shaping parameters: tc-style units converted once, ranges declared once, cross-field rules.

A request body becomes an `Impairment` (impairment.py: all values in SI units) or a `ParamError`
naming the field. Nothing here touches the kernel.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

from laglab.errors import Kind, LabError
from laglab.shaping.impairment import (
    DISTRIBUTIONS,
    GEMODEL_KEYS,
    KNOBS,
    Impairment,
    format_percent,
    format_rate,
    format_time,
)
from laglab.shaping.ports import ALL, MULTIPORT_SLOTS, PROTOCOLS, Ports


class Direction(StrEnum):
    """Which packets of a service an impairment takes: what it sends, what it receives, or both."""

    EGRESS = "egress"
    INGRESS = "ingress"
    BOTH = "both"

    @property
    def sends(self) -> bool:
        return self is not Direction.INGRESS

    @property
    def receives(self) -> bool:
        return self is not Direction.EGRESS


DIRECTIONS = tuple(d.value for d in Direction)
__all__ = ["DISTRIBUTIONS", "GEMODEL_KEYS", "Impairment", "format_percent", "format_rate", "format_time"]

# Times as tc(8) writes them, and minutes and hours as pumba and tcconfig take them (`--for 10m`,
# `load.duration: 24h`; tcconfig's README: h/hour/hours, m/min/mins/minute/minutes). The output is
# seconds; what goes to tc is formatted again (format_time), so tc never sees `m`.
_TIME_UNITS = {
    "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
}  # fmt: skip
# Rates. tc(8) reads bit, kbit, mbit, gbit, tbit (any case) as bits/s but bps, kbps, mbps, gbps (any case:
# tc_util.c compares without case) as BYTES/s; tcconfig (`tcset eth0 --rate 100Kbps`, "[G/M/K bps]"), tcng
# and every ticket read Mbps as megabits (TLDP's tcng HOWTO, table 1: "Mbps = megabit(s) per second = tc's
# mbit; MBps = megabyte(s) = tc's mbps"). So: a bit unit in any case, with /s or not, is bits; K/M/G/T with
# `bps` as tcconfig writes it is bits; a capital B (MB/s, MBps) is bytes; any other spelling of bps (2mbps,
# 2kbps, 2bps) reads two ways a factor 8 apart and is refused naming both (never guessed: #53).
_BIT_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12, "kibit": 1024, "mibit": 1024**2, "gibit": 1024**3}  # fmt: skip
_BPS_BITS = {"Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12}
_BYTE_PREFIXES = {"": 8, "k": 8e3, "K": 8e3, "M": 8e6, "G": 8e9, "T": 8e12}
_NUMBER = r"([0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_SPACE = r"[ \t\n\r\f\v]*"  # spelled out: \s differs between Python's and pydantic's (Rust) regex engines
_AMBIGUOUS_RATE = re.compile(rf"^{_SPACE}{_NUMBER}{_SPACE}([kKmMgGtT]?[bB][pP][sS]){_SPACE}$")


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


def _units(units) -> str:
    return "(" + "|".join(_any_case(u) for u in sorted(units, key=len, reverse=True) if u) + ")"


def _rate_units() -> str:
    """The rate units the parser reads, as one pattern group: bits in any case (with or without /s),
    tcconfig's K/M/G/Tbps, and bytes with a capital B (B/s, kB/s, MBps)."""
    bits = [f"{_any_case(u)}(?:/[sS])?" for u in sorted(_BIT_UNITS, key=len, reverse=True)]
    return "(" + "|".join([*bits, "[KMGT]bps", "[kKMGT]?B(?:ps|/s)"]) + ")"


def _rate_scale(unit: str) -> float:
    """Bits per second of one `unit` as _rate_units() matched it."""
    lower = unit.lower().removesuffix("/s")
    if lower in _BIT_UNITS and not unit.endswith(("ps", "PS", "pS", "Ps")):
        return _BIT_UNITS[lower]
    if unit in _BPS_BITS:
        return _BPS_BITS[unit]
    return _BYTE_PREFIXES[unit.removesuffix("/s").removesuffix("ps")[:-1]]


# What the parsers below accept, as JSON Schema patterns for the OpenAPI document (one source: a test
# checks that a value matches the pattern exactly when its parser reads it).
TIME_PATTERN = rf"^{_SPACE}{_NUMBER}{_SPACE}{_units(_TIME_UNITS)}{_SPACE}$"  # the unit is required
PERCENT_PATTERN = rf"^{_SPACE}{_NUMBER}{_SPACE}%?{_SPACE}$"
RATE_PATTERN = rf"^{_SPACE}{_NUMBER}{_SPACE}{_rate_units()}{_SPACE}$"
SERVICE_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
_TIME_RE, _PERCENT_RE, _RATE_RE = (re.compile(p) for p in (TIME_PATTERN, PERCENT_PATTERN, RATE_PATTERN))

LIMITS = {
    "delay": (0.0, 60.0),
    "jitter": (0.0, 60.0),
    "rate": (8e3, 10e9),
    "duration": (1.0, 86400.0),
}


class ParamError(LabError, ValueError):
    """A field the lab cannot use: MALFORMED, not of the form the OpenAPI document describes (type, units,
    pattern); INVALID, well-formed but out of range or against a rule across fields. Its message starts
    with the field."""

    def __init__(self, field: str, message: str, kind: Kind = Kind.MALFORMED):
        super().__init__(kind, f"{field}: {message}")
        self.field = field
        self.detail = message


class ShapingError(LabError):
    """Shaping the lab refuses (an unknown service, one that is not shapeable, a rule) or that the kernel
    refused (Kind.FAILED)."""


def _out_of_range(field: str, message: str) -> ParamError:
    return ParamError(field, message, kind=Kind.INVALID)


def _rule(field: str, message: str) -> ParamError:
    return ParamError(field, message, kind=Kind.INVALID)


def parse_time(field: str, value: object, high: float | None = None) -> float:
    """'125ms', '1.5s', '500us' -> seconds. A bare number is refused with the units to use: tc reads it
    as microseconds, a person typing `--for 20` means seconds, and guessing either way changes an
    experiment by a factor of a million (issue #36). The range is the field's own (LIMITS) unless
    `high` is given."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ParamError(field, f"expected a time like '125ms', got {value!r}")
    bare = value.strip() if isinstance(value, str) else value
    if isinstance(bare, (int, float)) or re.fullmatch(_NUMBER, bare or ""):
        number = float(bare) if math.isfinite(float(bare)) else bare
        raise ParamError(
            field, f"{value!r} has no unit; write it like '{number:g}s' or '{number:g}ms' (units: us, ms, s, m, h)"
        )
    match = _TIME_RE.search(value)
    if not match:
        raise ParamError(field, f"{value!r} is not a time (units: us, ms, s, m, h)")
    seconds = float(match.group(1)) * _TIME_UNITS[match.group(2).lower()]
    low, limit = LIMITS.get(field, (0.0, 60.0))
    if high is not None:
        low, limit = 0.0, high
    if not low <= seconds <= limit:
        raise _out_of_range(field, f"{value!r} is out of range {format_time(low)}..{format_time(limit)}")
    return seconds


def parse_percent(field: str, value: object) -> float:
    """'0.5%' or 0.5 (meaning 0.5 %) -> fraction 0.005."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ParamError(field, f"expected a percentage like '0.5%', got {value!r}")
    if isinstance(value, str):
        match = _PERCENT_RE.search(value)
        if not match:
            raise ParamError(field, f"{value!r} is not a percentage")
        percent = float(match.group(1))
    elif math.isfinite(value):
        percent = float(value)
    else:
        raise ParamError(field, f"{value!r} is not a percentage")
    if not 0.0 <= percent <= 100.0:
        raise _out_of_range(field, f"{value!r} is out of range 0%..100%")
    return percent / 100.0


RATE_UNITS_WORDS = "units: kbit, Mbit/s, Mbps or mbit = megabits; MB/s = megabytes"


def ambiguous_rate(value: str) -> str | None:
    """Why a rate such as '2mbps' is refused, in words, or None when it is not such a rate."""
    match = _AMBIGUOUS_RATE.match(value)
    if not match or _RATE_RE.match(value):
        return None
    number, unit = float(match.group(1)), match.group(2)
    prefix = {"": "", "K": "k", "M": "M", "G": "G", "T": "T"}[unit[:-3].upper()]
    bits = number * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[prefix]
    return (
        f"{value.strip()!r} reads two ways: tc takes {unit} as bytes/s ({format_words(bits * 8)}), tcconfig "
        f"and most tickets as bits/s ({format_words(bits)}); write {number:g}{prefix}bit/s or "
        f"{number:g}{prefix}B/s"
    )


def format_words(bits: float) -> str:
    """A rate for people: `2 Mbit/s`, `512 kbit/s`, `1.5 Gbit/s`."""
    for unit, size in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= size:
            return f"{bits / size:.4g} {unit}"
    return f"{bits:.4g} bit/s"


def parse_rate(field: str, value: object) -> float:
    """'2mbit', '2Mbit/s', '2Mbps' (tcconfig's: megabits), '256kbit', '1gbit', '2MB/s' (bytes) -> bits per
    second. tc's own bytes spelling ('2mbps', '100kbps') is refused naming both readings."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ParamError(field, f"expected a rate like '2Mbit/s', got {value!r}")
    if why := ambiguous_rate(value):
        raise ParamError(field, why)
    match = _RATE_RE.search(value)
    if not match:
        raise ParamError(field, f"{value!r} is not a rate ({RATE_UNITS_WORDS})")
    bits = float(match.group(1)) * _rate_scale(match.group(2))
    low, high = LIMITS["rate"]
    if not low <= bits <= high:
        raise _out_of_range(field, f"{value!r} is out of range 8kbit..10gbit")
    return bits


@dataclass(frozen=True)
class Request:
    """A PUT body: what to apply, to which traffic, for how long."""

    shaping: Impairment
    peer: str | None = None
    direction: Direction = Direction.EGRESS
    duration: float | None = None
    ports: Ports = ALL  # which of the link's packets: all, or those to or from these ports


# The knobs of a value with its unit, parsed by their kind (impairment.KNOBS).
_PARSERS = {
    k.name: {"time": parse_time, "percent": parse_percent, "rate": parse_rate}[k.kind]
    for k in KNOBS
    if k.kind in ("time", "percent", "rate")
}
_SERVICE_RE = re.compile(SERVICE_PATTERN)


def _port(field: str, word: object) -> int:
    if isinstance(word, bool) or not isinstance(word, int | str):
        raise ParamError(field, f"{word!r} is not a port number")
    if isinstance(word, str) and not word.strip().isdigit():
        raise ParamError(field, f"{word[:32]!r} is not a port number")
    number = int(word)
    if not 1 <= number <= 65535:
        raise ParamError(field, f"{number} is not a port 1..65535", Kind.INVALID)
    return number


def parse_ports(value: object, protocol: object = None, field: str = "ports") -> Ports:
    """`[3306, "4567-4568"]` or `"3306,4567-4568"` (and `protocol`) as Ports, or PortsError naming the field."""
    if value is None:
        if protocol is not None:
            raise ParamError("protocol", "needs ports: a protocol selects among the ports' packets", Kind.INVALID)
        return ALL
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ParamError(field, 'expected a list of ports or ranges, e.g. [3306, "4567-4568"]')
    if len(items) > MULTIPORT_SLOTS:
        raise ParamError(field, f"{len(items)} items; at most {MULTIPORT_SLOTS}", Kind.INVALID)
    ranges = []
    for item in items:
        if isinstance(item, str) and "-" in item:
            low_word, _, high_word = item.partition("-")
            low, high = _port(field, low_word), _port(field, high_word)
            if low > high:
                raise ParamError(field, f"{item!r}: the range's low end is above its high end", Kind.INVALID)
        else:
            low = high = _port(field, item)
        ranges.append((low, high))
    ranges = sorted(set(ranges))
    slots = sum(1 if low == high else 2 for low, high in ranges)
    if slots > MULTIPORT_SLOTS:
        raise ParamError(field, f"{slots} slots (a range counts as two); at most {MULTIPORT_SLOTS}", Kind.INVALID)
    if protocol is not None and protocol not in PROTOCOLS:
        raise ParamError("protocol", f"{str(protocol)[:16]!r} is not one of {', '.join(PROTOCOLS)}")
    return Ports(tuple(ranges), protocol)


def parse_gemodel(value: object) -> tuple[float, float, float, float]:
    """netem's `loss gemodel p [r [1-h [1-k]]]` as {"p", "r", "1-h", "1-k"}: p good -> bad, r bad -> good,
    1-h the loss in the bad state, 1-k in the good one. netem's defaults: r = 1 - p (Bernoulli),
    1-h = 100 %, 1-k = 0 % (with r given: Simple Gilbert)."""
    if not isinstance(value, dict):
        raise ParamError("gemodel", 'expected an object like {"p": "1%", "r": "25%"}')
    for key in value:
        if key not in GEMODEL_KEYS:
            raise ParamError(f"gemodel.{str(key)[:16]}", f"unknown key; known keys: {', '.join(GEMODEL_KEYS)}")
    if value.get("p") is None:
        raise ParamError("gemodel.p", "required: the probability of going from the good state to the bad one")
    p = parse_percent("gemodel.p", value["p"])
    r = parse_percent("gemodel.r", value["r"]) if value.get("r") is not None else 1.0 - p
    one_minus_h = parse_percent("gemodel.1-h", value["1-h"]) if value.get("1-h") is not None else 1.0
    one_minus_k = parse_percent("gemodel.1-k", value["1-k"]) if value.get("1-k") is not None else 0.0
    return (p, r, one_minus_h, one_minus_k)


def check(shaping: Impairment) -> Impairment:
    """The rules across fields (netem's own, and "something to apply"); ParamError naming the field."""
    if shaping.gap and not shaping.reorder:
        raise _rule("gap", "needs a reorder")
    if shaping.gemodel and shaping.loss:
        raise _rule("gemodel", "a loss model instead of loss, not both")
    if shaping.jitter and not shaping.delay:
        raise _rule("jitter", "needs a delay")
    if shaping.distribution and not shaping.jitter:
        raise _rule("distribution", "needs a jitter")
    # A reorder without a delay is accepted, as netem accepts it (and does nothing with it: there is no
    # held packet to overtake). The document said "needs a delay" and the server answered 422.
    if shaping.correlation and not (shaping.jitter or shaping.loss):
        raise _rule("correlation", "needs a jitter or a loss")
    if shaping.empty:
        raise _rule("body", f"nothing to apply: give at least one of {', '.join(k.name for k in KNOBS if k.alone)}")
    return shaping


def parse_request(body: object) -> Request:
    """Validate a PUT /api/shaping/<service> body. Raises ParamError naming the first bad field."""
    if not isinstance(body, dict):
        raise ParamError("body", "expected a JSON object")
    known = {*(k.name for k in KNOBS), "peer", "direction", "duration", "ports", "protocol"}
    for key in body:
        if key not in known:
            raise ParamError(str(key)[:64], f"unknown field; known fields: {', '.join(sorted(known))}")
    values = {name: parse(name, body[name]) for name, parse in _PARSERS.items() if body.get(name) is not None}
    distribution = body.get("distribution")
    if distribution is not None and distribution not in DISTRIBUTIONS:
        raise ParamError("distribution", f"{distribution!r} is not one of {', '.join(DISTRIBUTIONS)}")
    gemodel = parse_gemodel(body["gemodel"]) if body.get("gemodel") is not None else None
    gap = body.get("gap") or 0
    if isinstance(gap, bool) or not isinstance(gap, int) or not 0 <= gap <= 1000:
        raise _out_of_range("gap", f"{gap!r} is not a whole number of packets 1..1000")
    shaping = check(Impairment(**values, distribution=distribution, gemodel=gemodel, gap=gap))
    peer = body.get("peer")
    if peer is not None and (not isinstance(peer, str) or not _SERVICE_RE.match(peer)):
        raise ParamError("peer", f"{peer!r} is not a service name")
    direction = body.get("direction", "egress")
    if direction not in DIRECTIONS:
        raise ParamError("direction", f"{direction!r} is not one of {', '.join(DIRECTIONS)}")
    duration = body.get("duration")
    ports = parse_ports(body.get("ports"), body.get("protocol"))
    if ports and shaping.rate:
        raise _rule("ports", "a rate shapes every packet of the link; ports select what is held (delay, loss, ...): "
                    "put the rate in an entry of its own, without ports")  # fmt: skip
    return Request(
        shaping=shaping,
        peer=peer,
        direction=Direction(direction),
        duration=None if duration is None else parse_time("duration", duration),
        ports=ports,
    )


def half_link(
    peer: str, rtt: float = 0.0, jitter: float = 0.0, loss: float = 0.0, rate: float | None = None, ports: Ports = ALL
):
    """One end of a link given by its round trip, as the reference experiments set it: half the RTT
    and of its jitter on each direction, the loss, and this end's own rate (on `ports` only, when
    given). None when that is nothing."""
    impairment = Impairment(delay=rtt / 2, jitter=jitter / 2, loss=loss, rate=rate)
    return None if impairment.empty else Request(check(impairment), peer=peer, ports=ports)


def valid_service(name: str) -> bool:
    return bool(_SERVICE_RE.match(name))
