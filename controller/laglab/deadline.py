"""The lab's one way to wait for something: poll a check until it holds, with a deadline, sleeping
through a function the caller gives. A scenario run gives its cancellable sleep (ScenarioRun._sleep
raises Interrupted), so no wait outlives a cancelled run; elsewhere time.sleep does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from .errors import Kind, LabError

T = TypeVar("T")


class TimedOut(LabError):
    def __init__(self, message: str):
        super().__init__(Kind.TIMED_OUT, message)


def poll(
    check: Callable[[], T],
    timeout: float,
    interval: float = 0.5,
    what: str = "the condition",
    sleep: Callable[[float], object] = time.sleep,
    timed_out: Callable[[], Exception] | None = None,
) -> T:
    """The first truthy value of check(), called every `interval` s (at least once). After `timeout` s it
    raises timed_out() if given, else TimedOut naming `what`. A check that must stop early raises itself."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise timed_out() if timed_out is not None else TimedOut(f"{what}: not within {timeout:g}s")
        sleep(min(interval, left))
