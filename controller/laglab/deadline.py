"""The lab's one way to wait for something: poll a check until it holds, with a deadline, sleeping
through a function the caller gives. A scenario run gives its cancellable sleep (RunClock.sleep
raises Interrupted), so no wait outlives a cancelled run; elsewhere time.sleep does.

And the clock a run reads and waits on (`Clock`): the wall's in the controller (`WALL`); the unit tests
give one that runs faster, so a sweep of ten points runs in a second (tests/unit/fakes.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from laglab.errors import Kind, LabError

T = TypeVar("T")


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (what a run records)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (what a run measures durations with)."""

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait up to `seconds` for `event`; True when it is set."""


class WallClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(max(0.0, seconds))


WALL = WallClock()


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
    clock: Clock = WALL,
    done: Callable[[T], object] = bool,
) -> T:
    """The first value of check() that is `done` (by default: truthy), check() called every `interval` s
    (at least once): a value and whether it is the answer are two things (a PID of None is an answer
    once the process is over). After `timeout` s it raises timed_out() if given, else TimedOut naming
    `what`. A check that must stop early raises itself."""
    deadline = clock.monotonic() + timeout
    while True:
        value = check()
        if done(value):
            return value
        left = deadline - clock.monotonic()
        if left <= 0:
            raise timed_out() if timed_out is not None else TimedOut(f"{what}: not within {timeout:g}s")
        sleep(min(interval, left))
