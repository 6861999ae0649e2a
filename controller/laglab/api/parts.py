"""The one place the blueprints reach the lab's parts: typed accessors, each answering 503 (in one
wording per part) when the part does not run in this controller (unit tests start the app without the
recorder or shaping). Nothing else reads `app.extensions`."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from flask import Flask, current_app

from laglab import limits
from laglab.errors import ApiError

if TYPE_CHECKING:
    from laglab.faults import FaultManager
    from laglab.lab import Lab
    from laglab.load.generator import LoadGenerator
    from laglab.measurement.captures import Captures
    from laglab.measurement.lag import LagRecorder
    from laglab.platforms import Platform
    from laglab.shaping.manager import ShapingManager

KEY = "laglab"


def lab_of(app: Flask) -> Lab:
    return app.extensions[KEY]


def lab() -> Lab:
    return lab_of(current_app)


def shaping() -> ShapingManager:
    part = lab().shaping
    if part is None:
        raise ApiError(503, "shaping is not available in this controller")
    return part


def faults() -> FaultManager:
    part = lab().faults
    if part is None:
        raise ApiError(503, "faults are not available in this controller")
    return part


def captures() -> Captures:
    part = lab().captures
    if part is None:
        raise ApiError(503, "captures are not available in this controller")
    return part


def recorder() -> LagRecorder:
    part = lab().recorder
    if part is None:
        raise ApiError(503, "the lag recorder is not running")
    return part


def load() -> LoadGenerator:
    part = lab().load
    if part is None:
        raise ApiError(503, "the load panel needs the Docker API, which this controller does not use")
    return part


def platform() -> Platform | None:
    """None where the controller runs without a platform (unit tests)."""
    return lab().platform


def for_runs() -> Lab:
    """The lab, when it has what a scenario run needs (the recorder and shaping)."""
    the_lab = lab()
    if the_lab.run_parts is None:
        raise ApiError(503, "runs need the lag recorder and shaping, which are not running in this controller")
    return the_lab


@contextlib.contextmanager
def exclusive(kind: str):
    """One long check of a kind at a time (limit long_checks): eight of them would hold every server
    thread for up to ten minutes. A second one is answered at once with 409."""
    gate = lab().checks.setdefault(kind, threading.Lock())
    if not gate.acquire(blocking=False):
        raise ApiError(
            409, f"{kind}: one is already running, at most {limits.LONG_CHECKS} at a time (limit long_checks)"
        )
    try:
        yield
    finally:
        gate.release()
