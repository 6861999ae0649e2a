"""`heal: all`: every partition healed; it ends a disruption."""

from __future__ import annotations

from pydantic import model_serializer, model_validator

from laglab.scenarios.steps.base import StepKind, now, register


@register
class HealStep(StepKind):
    name = "heal"
    undone_by_duration = False

    @model_validator(mode="before")
    @classmethod
    def _all(cls, value):
        if value in (True, "all", {}):
            return {}
        raise ValueError("write heal: all (every partition is healed)")

    @model_serializer
    def _as_written(self):
        return "all"

    def describe(self) -> str:
        return "heal all partitions"

    def do(self, run, key, step):
        run.parts.shaping.heal(None)
        return now(), True
