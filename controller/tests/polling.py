"""Polling instead of fixed sleeps, for every suite (standard library only: the kernel suite runs it
inside User-mode Linux, where the lab's test dependencies are not installed)."""

import time


def wait_until(predicate, timeout: float, interval: float = 0.1, message: str = "condition"):
    """The first truthy value of predicate(), polled every `interval` s; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
