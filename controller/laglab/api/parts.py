"""The one place the blueprints reach the lab's parts: typed accessors over the Lab the app factory was
given, every part of it present (laglab/lab.py). Nothing else reads `app.extensions`."""

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
    from laglab.shaping.executor import Executor
    from laglab.shaping.manager import ShapingManager
    from laglab.shaping.present import ShapingView

KEY = "laglab"


def lab_of(app: Flask) -> Lab:
    return app.extensions[KEY]


def lab() -> Lab:
    return lab_of(current_app)


def shaping() -> ShapingManager:
    return lab().shaping


def shaping_view() -> ShapingView:
    return lab().shaping_view


def executor() -> Executor:
    return lab().executor


def faults() -> FaultManager:
    return lab().faults


def captures() -> Captures:
    return lab().captures


def recorder() -> LagRecorder:
    return lab().recorder


def load() -> LoadGenerator:
    return lab().load


def platform() -> Platform:
    return lab().platform


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
