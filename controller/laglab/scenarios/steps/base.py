"""What a timeline step kind is, and the registry the scenario schema and the timeline read.

A kind is a pydantic section (the value under its key in a step: `shaping: {...}`, `fault: {...}`)
that says what it does when its time comes, how it reads in the events, which links it shapes (so the
backend can be ready before the window) and whether a `duration` undoes it. `TimelineRun` (the
`run` argument) gives it the parts it changes (`run.parts`: shaping, faults, captures, the clock) and
a place to leave its undo.
"""

from __future__ import annotations

import itertools
import re
import time
from typing import ClassVar

from laglab.scenarios.schema.fields import Section

KINDS: dict[str, type[StepKind]] = {}


def register(cls: type[StepKind]) -> type[StepKind]:
    KINDS[cls.name] = cls
    return cls


class StepKind(Section):
    name: ClassVar[str]
    undone_by_duration: ClassVar[bool] = True  # False: a duration makes no sense (clear, heal)

    def check_duration(self, step) -> None:
        """Raises ValueError when this step's `duration` cannot be honoured."""
        if not self.undone_by_duration:
            raise ValueError(f"duration: {self.name} is not undone; leave duration out")

    def describe(self) -> str:
        return self.name

    def receivers(self) -> set[str]:
        """Services whose received packets this step shapes."""
        return set()

    def do(self, run, key: int, step) -> tuple[float, bool]:
        """Does it now; returns (the time it took effect, whether it ends a disruption). What undoes it
        goes to run.later(key, step, fn)."""
        raise NotImplementedError

    def changes_per_occurrence(self, step, length: float) -> int:
        """Entries one occurrence puts in the schedule (the scenario's limit counts them before any is made)."""
        return 2 if step.duration is not None else 1

    def items(self, run, number: int, step, at: float, order: itertools.count, key: int) -> list[tuple]:
        """(offset, order, step number, text, fn) for the schedule: the step, and its undo after its
        duration when that falls within the window."""
        out = [(at, next(order), number, self.describe(), lambda: self.do(run, key, step))]
        if step.duration is not None and at + step.duration < run.length:
            out.append((at + step.duration, next(order), number, f"undo: {self.describe()}", lambda: run.undo(key)))
        return out


def no_bare_times(body: dict) -> None:
    """A bare number is tc's microseconds: in a scenario file a time needs its unit (as everywhere)."""
    for key in ("delay", "jitter"):
        value = body.get(key)
        if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
            isinstance(value, str) and re.fullmatch(r"\s*[\d.]+\s*", value)
        ):
            raise ValueError(f"{key}: {value!r} has no unit; write it like '{value}ms' (units: us, ms, s, m, h)")


def now() -> float:
    return time.time()
