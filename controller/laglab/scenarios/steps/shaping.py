"""`shaping: {link: [a, b], delay: 40ms, loss: 1%}`: netem's words, as PUT /api/shaping takes them;
undone (the link's shaping before it restored) after its duration."""

from __future__ import annotations

from pydantic import ConfigDict, PrivateAttr, model_validator

from laglab.scenarios.steps.base import StepKind, no_bare_times, register
from laglab.scenarios.steps.target import Target
from laglab.shaping.params import Impairment, ParamError


@register
class ShapingStep(StepKind, Target):
    name = "shaping"
    model_config = ConfigDict(extra="allow")
    _impairment: Impairment | None = PrivateAttr(None)  # the body, parsed once

    @property
    def body(self) -> dict:
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _valid_body(self):
        for key in ("duration", "direction"):
            if key in self.body:
                raise ValueError(f"{key}: set by the step (its duration), not in the shaping")
        no_bare_times(self.body)
        try:
            self._impairment = self.requests(self.body)[0][1].shaping
        except ParamError as error:
            raise ValueError(error.message) from None
        return self

    def describe(self) -> str:
        return f"shaping {self.where()}: " + " ".join(f"{k} {v}" for k, v in self.body.items())

    def receivers(self) -> set[str]:
        return Target.receivers(self)

    def do(self, run, key, step):
        shaping = run.parts.shaping
        saved = shaping.snapshot(self.keys())
        in_force = shaping.change(self.requests_of(self._impairment))
        run.later(key, step, lambda: shaping.restore(saved))
        return in_force, False
