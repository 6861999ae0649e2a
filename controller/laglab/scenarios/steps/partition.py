"""`partition: {a: [...], b: [...], oneway: false}`: every link between the groups cut; healed after its
duration (or when the point ends)."""

from __future__ import annotations

from pydantic import Field

from .base import StepKind, now, register


@register
class PartitionStep(StepKind):
    name = "partition"
    a: list[str] = Field(min_length=1)
    b: list[str] = Field(min_length=1)
    oneway: bool = False

    def describe(self) -> str:
        return f"partition {','.join(self.a)} {'->' if self.oneway else '<->'} {','.join(self.b)}"

    def receivers(self) -> set[str]:
        return set(self.a + self.b)

    def do(self, run, key, step):
        shaping = run.lab.shaping
        made = shaping.partition(self.a, self.b, self.oneway)
        run.later(key, step, lambda: shaping.heal(made.id) if made.id in shaping.desired.partitions else None)
        return now(), False
