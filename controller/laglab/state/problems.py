"""What is wrong with the lab now that a person has to act on, each with the one command that repairs
it. /api/health lists them, so a problem found in a run's cleanup (a failed DTLE hand-back) is not
only in the controller's log. A problem leaves the list once its own check says it is repaired."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("laglab")


@dataclass
class Problem:
    key: str
    message: str
    repair: str  # the one command that repairs it
    since: float
    repaired: Callable[[], bool] | None = None  # True once repaired (None: stays until the controller restarts)

    def as_dict(self) -> dict:
        return {"problem": self.key, "message": self.message, "repair": self.repair, "since": round(self.since, 3)}


class Problems:
    def __init__(self, clock=time.time):
        self._items: dict[str, Problem] = {}
        self._lock = threading.Lock()
        self.clock = clock

    def add(self, key: str, message: str, repair: str, repaired: Callable[[], bool] | None = None) -> None:
        with self._lock:
            self._items[key] = Problem(key, message, repair, self.clock(), repaired)

    def current(self) -> list[dict]:
        """The problems still there: each one's check runs here (a check that fails keeps its problem)."""
        with self._lock:
            items = list(self._items.values())
        out = []
        for problem in items:
            try:
                gone = problem.repaired is not None and problem.repaired()
            except Exception as error:  # the server it asks is down: still a problem
                log.debug("problem %s: check failed: %s", problem.key, error)
                gone = False
            if gone:
                with self._lock:
                    self._items.pop(problem.key, None)
            else:
                out.append(problem.as_dict())
        return out
