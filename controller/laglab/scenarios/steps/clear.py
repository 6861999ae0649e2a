"""`clear: {link: [a, b]}` (or a service and its peer): that shaping removed; it ends a disruption."""

from __future__ import annotations

from laglab.scenarios.steps.base import StepKind, register
from laglab.scenarios.steps.target import Target


@register
class ClearStep(StepKind, Target):
    name = "clear"
    undone_by_duration = False

    def describe(self) -> str:
        return f"clear {self.where()}"

    def receivers(self) -> set[str]:
        return set()  # nothing is held once it is cleared

    def do(self, run, key, step):
        return run.parts.shaping.change([], removes=self.keys()), True
