"""`trace: {link: [a, b], file: ... | rows: [...], bin, loop}`: a time series of shaping on both
directions of a link (CSV or Mahimahi, under the scenarios folder, or inline rows). It replays once
(the last row then holds) or, with `loop`, until the step's duration or the window ends; then the
link's shaping from before it is restored."""

from __future__ import annotations

import itertools
import math
from typing import Literal

from pydantic import ConfigDict, PrivateAttr, ValidationInfo, model_validator

from laglab.scenarios.schema import trace as traces
from laglab.scenarios.schema.fields import Seconds, Section, scenario_file
from laglab.scenarios.steps.base import StepKind, no_bare_times, now, register
from laglab.scenarios.steps.target import Target
from laglab.shaping.params import Impairment, ParamError, format_time


class TraceRow(Section):
    model_config = ConfigDict(extra="allow")
    t: Seconds(86400.0)
    _impairment: Impairment | None = PrivateAttr(None)  # its fields, parsed once by its step (None: unshaped)


def eases(before: TraceRow, after: TraceRow) -> bool:
    """A trace row that eases the link (no impairment worse, one better: a higher rate or none, less
    delay, jitter or loss) ends a disruption: the replica's catch-up after it is measured."""

    def values(row: TraceRow) -> tuple[float, float, float, float]:
        shaping = row._impairment
        if shaping is None:
            return 0.0, 0.0, 0.0, float("inf")
        return shaping.delay, shaping.jitter, shaping.loss, shaping.rate or float("inf")

    (d0, j0, l0, r0), (d1, j1, l1, r1) = values(before), values(after)
    no_worse = d1 <= d0 and j1 <= j0 and l1 <= l0 and r1 >= r0
    return no_worse and (d1, j1, l1, r1) != (d0, j0, l0, r0)


@register
class TraceStep(StepKind):
    name = "trace"
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
            path = scenario_file(self.file, info)
            try:
                rows, self.period = traces.read(path, self.format, self.bin)
            except traces.TraceError as error:
                if str(error).startswith("bin: "):
                    raise ValueError(str(error)) from None
                raise ValueError(f"file: {self.file}: {error}") from None
            self.rows = [TraceRow(t=format_time(t), **body) for t, body in rows]
        else:
            for index, row in enumerate(self.rows):
                try:
                    no_bare_times(row.model_extra or {})
                except ValueError as error:
                    raise ValueError(f"rows.{index}.{error}") from None
            try:
                self.rows = [TraceRow(t=format_time(r.t), **traces.normalise(r.model_extra or {})) for r in self.rows]
            except traces.TraceError as error:
                raise ValueError(f"rows: {error}") from None
            ts = [r.t for r in self.rows]
            for index in range(1, len(ts)):  # as in a file: a loop of rows at one t would never end
                if ts[index] < ts[index - 1] + traces.MIN_STEP - 1e-9:
                    raise ValueError(f"rows.{index}.t: must grow by at least {traces.MIN_STEP:g}s a row")
            self.period = ts[-1] + (ts[-1] - ts[-2] if len(ts) > 1 else 1.0)
        if self.period < traces.MIN_STEP:
            raise ValueError(f"rows: one pass must last at least {traces.MIN_STEP:g}s")
        target = Target(link=self.link)
        for index, row in enumerate(self.rows):
            if row.model_extra:
                try:
                    row._impairment = target.requests(row.model_extra)[0][1].shaping
                except ParamError as error:
                    raise ValueError(f"rows.{index}.{error.message}") from None
        return self

    def describe(self) -> str:
        return "trace"

    def changes_per_occurrence(self, step, length: float) -> int:
        lasts = min(step.duration if step.duration is not None else length, length)
        passes = math.ceil(lasts / self.period) if self.loop else 1
        return passes * len(self.rows) + 2

    def receivers(self) -> set[str]:
        return set(self.link)

    def items(self, run, number, step, at, order, key):
        stop_at = at + step.duration if step.duration is not None else run.length
        out = [(at, next(order), number, "trace start", lambda: self.do(run, key, step))]
        passes = itertools.count() if self.loop else range(1)
        for n in passes:
            start = at + n * self.period
            if start >= stop_at:
                break
            for index, row in enumerate(self.rows):
                ends = index > 0 and eases(self.rows[index - 1], row)
                if start + row.t >= stop_at:
                    break
                text = f"trace {self.link[0]}<->{self.link[1]}: " + (
                    " ".join(f"{k} {v}" for k, v in (row.model_extra or {}).items()) or "unshaped"
                )
                out.append((start + row.t, next(order), number, text, lambda r=row, e=ends: self.apply_row(run, r, e)))
        if step.duration is not None and at + step.duration < run.length:
            out.append((stop_at, next(order), number, "trace end: the link's shaping restored", lambda: run.undo(key)))
        return out

    def do(self, run, key, step):
        """The trace starts: the link's shaping before it is what its end restores."""
        shaping = run.parts.shaping
        saved = shaping.snapshot(Target(link=self.link).keys())
        run.later(key, step, lambda: shaping.restore(saved))
        return now(), False

    def apply_row(self, run, row: TraceRow, ends: bool) -> tuple[float, bool]:
        target = Target(link=self.link)
        if row._impairment is not None:
            in_force = run.parts.shaping.change(target.requests_of(row._impairment))
        else:
            in_force = run.parts.shaping.change([], removes=target.keys())
        return in_force, ends
