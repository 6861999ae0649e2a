"""`partition: {a: [...], b: [...], oneway: false, ports: [3306]}`: every link between the groups cut (only
the packets of `ports`, when given); healed after its duration (or when the point ends)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from laglab.errors import Kind
from laglab.scenarios.steps.base import StepKind, now, register
from laglab.shaping.params import ParamError, ShapingError, parse_ports
from laglab.shaping.ports import ALL, PROTOCOLS, Ports


@register
class PartitionStep(StepKind):
    name = "partition"
    a: list[str] = Field(min_length=1)
    b: list[str] = Field(min_length=1)
    oneway: bool = False
    ports: list[int | str] | None = None
    protocol: Literal[PROTOCOLS] | None = None  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _ports(self):
        try:
            parse_ports(self.ports, self.protocol)
        except ParamError as error:
            raise ValueError(error.message) from None
        return self

    @property
    def selected(self) -> Ports:
        return parse_ports(self.ports, self.protocol) if self.ports else ALL

    def describe(self) -> str:
        only = f" on ports {self.selected.text()}" if self.ports else ""
        return f"partition {','.join(self.a)} {'->' if self.oneway else '<->'} {','.join(self.b)}{only}"

    def receivers(self) -> set[str]:
        return set(self.a + self.b)

    def do(self, run, key, step):
        shaping = run.parts.shaping
        made = shaping.partition(self.a, self.b, self.oneway, ports=self.selected)
        run.later(key, step, lambda: heal_if_still_cut(shaping, made.id))
        return now(), False


def heal_if_still_cut(shaping, partition_id: str) -> None:
    """A partition's undo: healed, unless it was healed already (a heal step, DELETE /api/partitions)."""
    try:
        shaping.heal(partition_id)
    except ShapingError as error:
        if error.kind is not Kind.NOT_FOUND:
            raise
