"""Who watches what a link holds (a capture's side file, captures.py): told when a capture starts and
after every change that reaches the kernels (a change, a duration that ran out), in the API's words."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from laglab.shaping import present

log = logging.getLogger("laglab.shaping")


@dataclass(eq=False)
class LinkWatch:
    a: str
    b: str
    told: Callable[[float, dict[str, str]], None]
    last: dict[str, str] | None = None

    def tell(self, holds: dict[str, str], when: float) -> None:
        if holds != self.last:
            self.last = holds
            self.told(when, holds)


class LinkWatchers:
    """The shaping manager's watchers, under its lock (`desired()`: its desired state now; `listing`: the
    platform's list of the lab's containers)."""

    def __init__(self, lock: threading.RLock, desired, listing):
        self.lock, self.desired, self.listing = lock, desired, listing
        self.watching: list[LinkWatch] = []

    def watch(self, a: str, b: str, told: Callable[[float, dict[str, str]], None], now: float) -> Callable[[], None]:
        """`told(epoch, {"a->b": words, "b->a": words})` now and whenever what the link holds changes;
        returns what stops it."""
        watch = LinkWatch(a, b, told)
        lab = self.listing()
        with self.lock:
            self.watching.append(watch)
            watch.tell(present.link(self.desired(), lab, a, b), now)

        def stop() -> None:
            with self.lock:
                if watch in self.watching:
                    self.watching.remove(watch)

        return stop

    def tell(self, lab, when: float) -> None:
        """Under the manager's lock, once a change is in force."""
        for watch in list(self.watching):
            try:
                watch.tell(present.link(self.desired(), lab, watch.a, watch.b), when)
            except Exception:  # a watcher's failure must not undo a change that is in force
                log.exception("telling a link's watcher failed")
