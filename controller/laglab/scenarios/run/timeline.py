"""A point's timeline: steps at offsets from the start of its measured window, each one of the step
kinds (scenarios/steps/: shaping, clear, partition, heal, fault, trace). A step may repeat (`every`,
`times`) and be undone after a `duration`. Validated with the scenario (schema/timeline.py); run by
`TimelineRun` during the window.

Every change is an event with the time it was asked and the time it took effect: in the run's
events.csv, on the lab's event list (dashboard markers) and in the point's summary, with the time the
replica took to catch up (lag < 1 s) after each disruption ended.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from laglab.measurement.results import iso
from laglab.scenarios.schema.timeline import Step

if TYPE_CHECKING:
    from laglab.scenarios.run.parts import TimelineParts

log = logging.getLogger("laglab.timeline")
EVENT_COLUMNS = [
    "point", "step", "action", "text", "asked", "asked_epoch", "effect_epoch", "effect_ms", "ends_disruption",
    "at_end", "catch_up_seconds", "error",
]  # fmt: skip


# --- running a timeline ---
class TimelineRun:
    """Runs the steps of one point from `start(t0)` in a thread; `stop()` ends it and undoes whatever
    is still in force (partition, fault, shaping or trace with a duration). `on_event` gets every
    event as it happens (the run's events.csv, the lab's events, the point's recording)."""

    def __init__(
        self, parts: TimelineParts, steps: list[Step], length: float, point: int, on_event, folder: Path | None = None
    ):
        self.parts, self.steps, self.length, self.point = parts, steps, length, point
        self.folder = Path(folder) if folder is not None else Path(".")  # the run's results (a capture's files)
        self.on_event = on_event
        self.events: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._undos: dict[int, tuple[int, str, object]] = {}  # key -> (step, text, undo fn) still due
        self._keys = itertools.count()
        self._lock = threading.Lock()
        self.t0 = 0.0

    # schedule: (offset, order, step number, what, fn)
    def _schedule(self) -> list[tuple]:
        items = []
        order = itertools.count()
        for number, step in enumerate(self.steps, start=1):
            for at in step.occurrences(self.length):
                items += self._items(number, step, at, order)
        heapq.heapify(items)
        return items

    def _items(self, number: int, step: Step, at: float, order) -> list[tuple]:
        return step.kind.items(self, number, step, at, order, next(self._keys))

    # --- what the step kinds call ---
    @property
    def stopping(self) -> threading.Event:
        return self._stop

    def later(self, key: int, step: Step, fn) -> None:
        """What undoes step `key` (after its duration, or when the point ends)."""
        with self._lock:
            self._undos[key] = (step, fn)

    def undo(self, key: int) -> tuple[float, bool] | None:
        with self._lock:
            due = self._undos.pop(key, None)
        if due is None:
            return None
        when = due[1]()
        return (when if isinstance(when, float) else self.parts.clock.time()), True

    # --- the thread ---
    def receivers(self) -> list[str]:
        """The services whose received packets the steps shape (each end of a link, each side of a
        partition), so that the backend can be ready before the first step (TimelineRun.prepare)."""
        out: set[str] = set()
        for step in self.steps:
            out |= step.kind.receivers()
        return sorted(out)

    def prepare(self) -> None:
        """Before the window opens: a first change should not wait for the backend to start its helpers."""
        try:
            self.parts.shaping.prepare(self.receivers(), warm=True)
        except Exception as error:  # only a speed-up: the steps still work without it
            log.warning("preparing the timeline's links failed: %s", error)

    def start(self, t0: float) -> None:
        self.t0 = t0
        schedule = self._schedule()
        self._thread = threading.Thread(target=self._main, args=(schedule,), name=f"timeline-{self.point}", daemon=True)
        self._thread.start()

    def _main(self, schedule: list[tuple]) -> None:
        while schedule and not self._stop.is_set():
            offset, _, number, text, fn = heapq.heappop(schedule)
            due = self.t0 + offset
            if self.parts.clock.wait(self._stop, due - self.parts.clock.time()):
                return
            self._run(number, text, due, fn)

    def _run(self, number: int, text: str, asked: float, fn, at_end: bool = False) -> None:
        event = {"point": self.point, "step": number, "text": text, "asked_epoch": round(asked, 3), "asked": iso(asked)}
        event["at_end"] = at_end  # undone because the window ended: no catch-up can be measured
        try:
            done = fn()
            if done is None:
                return  # an undo already done
            effect, ends = done
            event.update(
                effect_epoch=round(effect, 3), effect_ms=round((effect - asked) * 1000, 1), ends_disruption=ends
            )
        except Exception as error:  # a failing step is an event, not the end of the run
            message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
            event.update(effect_epoch=None, effect_ms=None, ends_disruption=False, error=message[:300])
            log.warning("timeline step %s (%s) failed: %s", number, text, message)
        event["action"] = self.steps[number - 1].action
        event["catch_up_seconds"] = None
        self.events.append(event)
        self.on_event(event)

    def stop(self) -> None:
        """End of the window (or of the run): the thread stops; what is still in force is undone."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        try:
            self.parts.shaping.prepare(self.receivers(), warm=False)
        except Exception as error:
            log.warning("releasing the timeline's links failed: %s", error)
        with self._lock:
            due = sorted(self._undos.items(), reverse=True)
        for key, (step, _fn) in due:
            number = next(i for i, s in enumerate(self.steps, start=1) if s is step)
            text = f"undo at the end of the point: {step.kind.describe()}"
            self._run(number, text, self.parts.clock.time(), lambda k=key: self.undo(k), at_end=True)
