"""Query-string parsing with range checks; every failure names the parameter (400)."""

from __future__ import annotations

import math

from flask import request

from .errors import bad_request


def number(name: str, default: float, low: float, high: float) -> float:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise bad_request(name, f"{raw!r} is not a number") from None
    if not math.isfinite(value) or not low <= value <= high:
        raise bad_request(name, f"{raw} is out of range {low:g}..{high:g}")
    return value
