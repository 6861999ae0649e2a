"""Lab events (shaping changed, run point started, load started/stopped) with their time, for the
dashboard's chart markers: GET /api/events?since=<epoch>."""

from __future__ import annotations

import collections
import threading
import time

from laglab.measurement.results import iso


class Events:
    def __init__(self, keep: int = 2000):
        self._items: collections.deque[dict] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, kind: str, text: str) -> None:
        now = time.time()
        with self._lock:
            self._items.append({"epoch": round(now, 3), "time": iso(now), "kind": kind, "text": text})

    def since(self, epoch: float) -> list[dict]:
        with self._lock:
            return [e for e in self._items if e["epoch"] > epoch]
