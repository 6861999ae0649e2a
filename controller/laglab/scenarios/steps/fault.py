"""`fault: {service: mysql-target, action: kill}`: a container action (laglab.faults); one that can be
undone is undone after its duration, counted from its effect, or when the point ends."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from laglab.faults import ACTIONS
from laglab.scenarios.steps.base import StepKind, register
from laglab.shaping.params import SERVICE_PATTERN


@register
class FaultStep(StepKind):
    name = "fault"
    service: str = Field(pattern=SERVICE_PATTERN)
    action: Literal[tuple(ACTIONS)]  # type: ignore[valid-type]

    def check_duration(self, step) -> None:
        if ACTIONS[self.action].undo is None:
            raise ValueError(f"duration: {self.action} cannot be undone; leave duration out")

    def describe(self) -> str:
        return f"{self.action} {self.service}"

    def do(self, run, key, step):
        faults = run.parts.faults
        # Without a duration a fault that can be undone is undone when the point ends (the run's
        # consistency check needs every server back); one that cannot (restart) is over at its effect.
        undoable = ACTIONS[self.action].undo is not None
        duration = step.duration or (max(0.1, run.length - (run.parts.clock.time() - run.t0)) if undoable else None)
        fault = faults.inject(self.service, self.action, duration, timer=False)
        if undoable:

            def undo():
                # As POST /api/faults: the duration counts from the effect (a clean stop takes seconds).
                if step.duration and not run.stopping.is_set():
                    run.parts.clock.wait(run.stopping, fault.effect + step.duration - run.parts.clock.time())
                return faults.undo(fault.id).undone if fault.active else None

            run.later(key, step, undo)
        return fault.effect, not undoable
