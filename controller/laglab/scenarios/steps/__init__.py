"""Timeline step kinds, one module each, registered by the key a scenario file writes (`shaping:`,
`clear:`, `partition:`, `heal:`, `fault:`, `trace:`, `capture:`). A new kind is one module here (a `StepKind`
subclass with `@register`) and its line below: the step schema and the timeline take it from KINDS."""

from laglab.scenarios.steps import capture, clear, fault, heal, partition, shaping, trace  # noqa: F401 (each registers its kind)
from laglab.scenarios.steps.base import KINDS, StepKind, register
from laglab.scenarios.steps.target import Target

__all__ = ["KINDS", "StepKind", "Target", "register"]
