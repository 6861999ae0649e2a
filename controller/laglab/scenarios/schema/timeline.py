"""A point's timeline as a scenario writes it: steps at offsets from the start of its measured window,
each one of the step kinds (scenarios/steps/), repeated (`every`, `times`) and undone after a
`duration`. Validated with the scenario; run by run/timeline.py's TimelineRun."""

from __future__ import annotations

import math

from pydantic import Field, create_model, model_validator

from laglab.scenarios.schema.fields import Seconds, Section
from laglab.scenarios.steps import KINDS, StepKind


class _Step(Section):
    """When a step happens; what it does is the one kind field it has (`shaping:`, `fault:` ...)."""

    at: Seconds(86400.0) = Field(description="from the start of the measured window")
    every: Seconds(86400.0) | None = Field(None, description="repeat this often (at least 100ms)")
    times: int | None = Field(
        None, ge=1, le=100_000, description="with every: how many times (default: until the window ends)"
    )
    duration: Seconds(86400.0) | None = Field(None, description="undo it after this long (shorter than every)")

    @property
    def kind(self) -> StepKind:
        return next(getattr(self, name) for name in KINDS if getattr(self, name) is not None)

    @property
    def action(self) -> str:
        return self.kind.name

    @model_validator(mode="after")
    def _one_action(self):
        given = [name for name in KINDS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(KINDS)} (got {', '.join(given) or 'none'})")
        if self.duration is not None:
            self.kind.check_duration(self)
            if self.every is not None and self.duration >= self.every:
                raise ValueError("duration: must be shorter than every (one occurrence is undone before the next)")
        if self.times is not None and self.every is None:
            raise ValueError("times: needs every")
        if self.every is not None and self.every < 0.1:
            raise ValueError("every: at least 100ms")
        return self

    def count_within(self, length: float) -> int:
        """How many times the step happens within a window of `length` seconds (none built)."""
        if self.at >= length:
            return 0
        if self.every is None:
            return 1
        fits = math.ceil((length - self.at) / self.every - 1e-9)
        return min(fits, self.times) if self.times is not None else fits

    def occurrences(self, length: float) -> list[float]:
        """Offsets at which the step happens within a window of `length` seconds."""
        every = self.every or 0.0
        return [t for k in range(self.count_within(length)) if (t := self.at + k * every) < length]


def step_model() -> type[_Step]:
    """A step: its timing, and one optional field per registered kind (a new kind adds its key here)."""
    return create_model("Step", __base__=_Step, **{name: (cls | None, None) for name, cls in KINDS.items()})


Step = step_model()
