"""A point's timeline: steps at offsets from the start of its measured window, each one of
shaping (set on a service or a link), clear, partition, heal, fault (a container action) or trace (a
time series of shaping on a link). A step may repeat (`every`, `times`) and be undone after a
`duration`. Validated with the scenario (spec.py); run by `TimelineRun` during the window.

Every change is an event with the time it was asked and the time it took effect: in the run's
events.csv, on the lab's event list (dashboard markers) and in the point's summary, with the time the
replica took to catch up (lag < 1 s) after each disruption ended.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import re
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..faults import ACTIONS
from ..results import iso
from ..shaping.params import SERVICE_PATTERN, ParamError, format_time, parse_request
from . import trace as traces
from .fields import Seconds, Section

log = logging.getLogger("laglab.timeline")
EVENT_COLUMNS = [
    "point", "step", "action", "text", "asked", "asked_epoch", "effect_epoch", "effect_ms", "ends_disruption",
    "at_end", "catch_up_seconds", "error",
]  # fmt: skip


def _no_bare_times(body: dict) -> None:
    """A bare number is tc's microseconds: in a scenario file a time needs its unit (as everywhere)."""
    for key in ("delay", "jitter"):
        value = body.get(key)
        if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
            isinstance(value, str) and re.fullmatch(r"\s*[\d.]+\s*", value)
        ):
            raise ValueError(f"{key}: {value!r} has no unit; write it like '{value}ms' (units: us, ms, s)")


class Target(Section):
    """Where shaping goes: one service (to everyone, or to `peer`), or both directions of a link."""

    service: str | None = Field(None, pattern=SERVICE_PATTERN)
    peer: str | None = Field(None, pattern=SERVICE_PATTERN)
    link: tuple[str, str] | None = None

    @model_validator(mode="after")
    def _one_target(self):
        if (self.service is None) == (self.link is None):
            raise ValueError("give either service (with an optional peer) or link: [a, b]")
        if self.link is not None and self.peer is not None:
            raise ValueError("peer: only with service; a link names both ends")
        if self.link is not None and self.link[0] == self.link[1]:
            raise ValueError("link: two different services")
        return self

    def keys(self) -> list[tuple[str, str | None]]:
        if self.link is not None:
            a, b = self.link
            return [(a, b), (b, a)]
        return [(self.service, self.peer)]

    def requests(self, body: dict) -> list[tuple[str, object]]:
        """(service, parsed request) per end: a link's body goes on each end's egress towards the other."""
        return [(service, parse_request({**body, "peer": peer})) for service, peer in self.keys()]


class ShapingStep(Target):
    """`shaping: {link: [a, b], delay: 40ms, loss: 1%}`: netem's words, as PUT /api/shaping takes them."""

    model_config = ConfigDict(extra="allow")

    @property
    def body(self) -> dict:
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _valid_body(self):
        for key in ("duration", "direction"):
            if key in self.body:
                raise ValueError(f"{key}: set by the step (its duration), not in the shaping")
        _no_bare_times(self.body)
        try:
            self.requests(self.body)
        except ParamError as error:
            raise ValueError(error.message) from None
        return self


class PartitionStep(Section):
    a: list[str] = Field(min_length=1)
    b: list[str] = Field(min_length=1)
    oneway: bool = False


class FaultStep(Section):
    service: str = Field(pattern=SERVICE_PATTERN)
    action: Literal[tuple(ACTIONS)]  # type: ignore[valid-type]


class TraceRow(Section):
    model_config = ConfigDict(extra="allow")
    t: Seconds(86400.0)


class TraceStep(Section):
    """A time series of shaping on both directions of a link: `file` (CSV or Mahimahi, under the
    scenarios folder) or inline `rows`. It replays once (the last row then holds) or, with `loop`,
    until the step's duration or the window ends."""

    link: tuple[str, str]
    file: str | None = None
    format: Literal["csv", "mahimahi"] | None = None
    bin: Seconds(60.0) = 1.0
    loop: bool = False
    rows: list[TraceRow] = []
    period: float = 0.0  # one pass, seconds (filled from the file or the rows)

    @model_validator(mode="after")
    def _rows(self, info: ValidationInfo):
        if (self.file is None) == (not self.rows):
            raise ValueError("give either file (under the scenarios folder) or rows")
        if self.file is not None:
            base = Path((info.context or {}).get("base_dir") or ".").resolve()
            path = (base / self.file).resolve()
            plain = re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,200}", self.file)
            if not plain or ".." in Path(self.file).parts or base not in path.parents:
                raise ValueError(f"file: {self.file!r} must be a path under the scenarios folder")
            try:
                rows, self.period = traces.read(path, self.format, self.bin)
            except traces.TraceError as error:
                raise ValueError(f"file: {self.file}: {error}") from None
            self.rows = [TraceRow(t=format_time(t), **body) for t, body in rows]
        else:
            for index, row in enumerate(self.rows):
                try:
                    _no_bare_times(row.model_extra or {})
                except ValueError as error:
                    raise ValueError(f"rows.{index}.{error}") from None
            try:
                self.rows = [TraceRow(t=format_time(r.t), **traces.normalise(r.model_extra or {})) for r in self.rows]
            except traces.TraceError as error:
                raise ValueError(f"rows: {error}") from None
            ts = [r.t for r in self.rows]
            if ts != sorted(ts):
                raise ValueError("rows: t must not decrease")
            self.period = ts[-1] + (ts[-1] - ts[-2] if len(ts) > 1 else 1.0)
        target = Target(link=self.link)
        for index, row in enumerate(self.rows):
            if row.model_extra:
                try:
                    target.requests(row.model_extra)
                except ParamError as error:
                    raise ValueError(f"rows.{index}.{error.message}") from None
        return self


ACTIONS_OF_A_STEP = ("shaping", "clear", "partition", "heal", "fault", "trace")


class Step(Section):
    at: Seconds(86400.0)
    every: Seconds(86400.0) | None = None
    times: int | None = Field(
        None, ge=1, le=100_000, description="with every: how many times (default: until the window ends)"
    )
    duration: Seconds(86400.0) | None = None
    shaping: ShapingStep | None = None
    clear: Target | None = None
    partition: PartitionStep | None = None
    heal: Literal[True] | None = None
    fault: FaultStep | None = None
    trace: TraceStep | None = None

    @property
    def action(self) -> str:
        return next(name for name in ACTIONS_OF_A_STEP if getattr(self, name) is not None)

    @model_validator(mode="after")
    def _one_action(self):
        given = [name for name in ACTIONS_OF_A_STEP if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(ACTIONS_OF_A_STEP)} (got {', '.join(given) or 'none'})")
        action = given[0]
        if self.duration is not None:
            if action in ("clear", "heal"):
                raise ValueError(f"duration: {action} is not undone; leave duration out")
            if action == "fault" and ACTIONS[self.fault.action].undo is None:
                raise ValueError(f"duration: {self.fault.action} cannot be undone; leave duration out")
            if self.every is not None and self.duration >= self.every:
                raise ValueError("duration: must be shorter than every (one occurrence is undone before the next)")
        if self.times is not None and self.every is None:
            raise ValueError("times: needs every")
        if self.every is not None and self.every < 0.1:
            raise ValueError("every: at least 100ms")
        return self

    def occurrences(self, length: float) -> list[float]:
        """Offsets at which the step happens within a window of `length` seconds."""
        if self.every is None:
            return [self.at] if self.at < length else []
        count = self.times if self.times is not None else 1_000_000
        out = []
        for k in range(count):
            t = self.at + k * self.every
            if t >= length:
                break
            out.append(t)
        return out

    @field_validator("heal", mode="before")
    @classmethod
    def _heal(cls, value):
        if value in (True, "all"):
            return True
        raise ValueError("write heal: all (every partition is healed)")


def _eases(before: TraceRow, after: TraceRow) -> bool:
    """A trace row that eases the link (no impairment worse, one better: a higher rate or none, less
    delay, jitter or loss) ends a disruption: the replica's catch-up after it is measured."""

    def values(row: TraceRow) -> tuple[float, float, float, float]:
        extra = row.model_extra or {}
        shaping = parse_request(extra).shaping if extra else None
        if shaping is None:
            return 0.0, 0.0, 0.0, float("inf")
        return shaping.delay, shaping.jitter, shaping.loss, shaping.rate or float("inf")

    (d0, j0, l0, r0), (d1, j1, l1, r1) = values(before), values(after)
    no_worse = d1 <= d0 and j1 <= j0 and l1 <= l0 and r1 >= r0
    return no_worse and (d1, j1, l1, r1) != (d0, j0, l0, r0)


# --- running a timeline ---
class TimelineRun:
    """Runs the steps of one point from `start(t0)` in a thread; `stop()` ends it and undoes whatever
    is still in force (partition, fault, shaping or trace with a duration). `on_event` gets every
    event as it happens (the run's events.csv, the lab's events, the point's recording)."""

    def __init__(self, lab, steps: list[Step], length: float, point: int, on_event):
        self.lab, self.steps, self.length, self.point = lab, steps, length, point
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
        action = step.action
        key = next(self._keys)
        ends = step.duration is not None and at + step.duration < self.length
        if action == "trace":
            tr = step.trace
            stop_at = at + step.duration if step.duration is not None else self.length
            out = [(at, next(order), number, "trace start", lambda k=key, s=step: self._trace_start(k, s))]
            passes = itertools.count() if tr.loop else range(1)
            for n in passes:
                start = at + n * tr.period
                if start >= stop_at:
                    break
                for index, row in enumerate(tr.rows):
                    eases = index > 0 and _eases(tr.rows[index - 1], row)
                    if start + row.t >= stop_at:
                        break
                    text = f"trace {tr.link[0]}<->{tr.link[1]}: " + (
                        " ".join(f"{k} {v}" for k, v in (row.model_extra or {}).items()) or "unshaped"
                    )
                    out.append((start + row.t, next(order), number, text,
                                lambda r=row, s=step, e=eases: self._trace_row(s, r, e)))  # fmt: skip
            if ends:
                out.append(
                    (
                        stop_at,
                        next(order),
                        number,
                        "trace end: the link's shaping restored",
                        lambda k=key: self._undo(k),
                    )
                )
            return out
        out = [(at, next(order), number, self._describe(step), lambda k=key, s=step: self._do(k, s))]
        if ends:
            out.append(
                (at + step.duration, next(order), number, f"undo: {self._describe(step)}", lambda k=key: self._undo(k))
            )
        return out

    @staticmethod
    def _describe(step: Step) -> str:
        if step.shaping is not None:
            where = (
                "<->".join(step.shaping.link)
                if step.shaping.link
                else f"{step.shaping.service}->{step.shaping.peer or 'all'}"
            )
            return f"shaping {where}: " + " ".join(f"{k} {v}" for k, v in step.shaping.body.items())
        if step.clear is not None:
            return "clear " + (
                "<->".join(step.clear.link) if step.clear.link else f"{step.clear.service}->{step.clear.peer or 'all'}"
            )
        if step.partition is not None:
            p = step.partition
            return f"partition {','.join(p.a)} {'->' if p.oneway else '<->'} {','.join(p.b)}"
        if step.heal:
            return "heal all partitions"
        if step.fault is not None:
            return f"{step.fault.action} {step.fault.service}"
        return "trace"

    # --- the actions (each returns the effect time; registers its undo) ---
    def _do(self, key: int, step: Step) -> tuple[float, bool]:
        shaping, faults = self.lab.shaping, self.lab.faults
        if step.shaping is not None:
            saved = shaping.snapshot(step.shaping.keys())
            shaping.change(step.shaping.requests(step.shaping.body))
            self._later(key, step, lambda: shaping.restore(saved))
            return time.time(), False
        if step.clear is not None:
            shaping.change([], removes=step.clear.keys())
            return time.time(), True
        if step.partition is not None:
            p = step.partition
            made = shaping.partition(p.a, p.b, p.oneway)
            self._later(key, step, lambda: shaping.heal(made.id) if made.id in shaping.partitions else None)
            return time.time(), False
        if step.heal:
            shaping.heal(None)
            return time.time(), True
        # Without a duration a fault that can be undone is undone when the point ends (the run's
        # consistency check needs every server back); one that cannot (restart) is over at its effect.
        undoable = ACTIONS[step.fault.action].undo is not None
        duration = step.duration or (max(0.1, self.length - (time.time() - self.t0)) if undoable else None)
        fault = faults.inject(step.fault.service, step.fault.action, duration, timer=False)
        if undoable:

            def undo():
                # As POST /api/faults: the duration counts from the effect (a clean stop takes seconds).
                if step.duration and not self._stop.is_set():
                    self._stop.wait(max(0.0, fault.effect + step.duration - time.time()))
                return faults.undo(fault.id).undone if fault.active else None

            self._later(key, step, undo)
        return fault.effect, not undoable

    def _trace_start(self, key: int, step: Step) -> tuple[float, bool]:
        shaping = self.lab.shaping
        saved = shaping.snapshot(Target(link=step.trace.link).keys())
        self._later(key, step, lambda: shaping.restore(saved))
        return time.time(), False

    def _trace_row(self, step: Step, row: TraceRow, eases: bool) -> tuple[float, bool]:
        target = Target(link=step.trace.link)
        body = dict(row.model_extra or {})
        if body:
            self.lab.shaping.change(target.requests(body))
        else:
            self.lab.shaping.change([], removes=target.keys())
        return time.time(), eases

    def _later(self, key: int, step: Step, fn) -> None:
        with self._lock:
            self._undos[key] = (step, fn)

    def _undo(self, key: int) -> tuple[float, bool] | None:
        with self._lock:
            due = self._undos.pop(key, None)
        if due is None:
            return None
        when = due[1]()
        return (when if isinstance(when, float) else time.time()), True

    # --- the thread ---
    def receivers(self) -> list[str]:
        """The services whose received packets the steps shape (each end of a link, each side of a
        partition), so that the backend can be ready before the first step (TimelineRun.prepare)."""
        out: set[str] = set()
        for step in self.steps:
            if step.shaping is not None and step.shaping.link is not None:
                out.update(step.shaping.link)
            elif step.shaping is not None:
                out.update({step.shaping.peer} if step.shaping.peer else set())
            if step.trace is not None:
                out.update(step.trace.link)
            if step.partition is not None:
                out.update(step.partition.a + step.partition.b)
        return sorted(out)

    def prepare(self) -> None:
        """Before the window opens: a first change should not wait for the backend to start its helpers."""
        try:
            self.lab.shaping.prepare(self.receivers(), warm=True)
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
            if self._stop.wait(max(0.0, due - time.time())):
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
            self.lab.shaping.prepare(self.receivers(), warm=False)
        except Exception as error:
            log.warning("releasing the timeline's links failed: %s", error)
        with self._lock:
            due = sorted(self._undos.items(), reverse=True)
        for key, (step, _fn) in due:
            number = next(i for i, s in enumerate(self.steps, start=1) if s is step)
            text = f"undo at the end of the point: {self._describe(step)}"
            self._run(number, text, time.time(), lambda k=key: self._undo(k), at_end=True)
