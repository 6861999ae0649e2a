"""A scenario's published figures (`reference:`): where they come from, the cells and shapes to hold
the measured ones against, and how far the bottleneck models' predictions may stray (`bottleneck:`)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from laglab.scenarios.schema.fields import METRICS, Section


class Bottleneck(Section):
    """How far a measurement may stray from what the bottleneck models predict (analysis/bottleneck.py) before
    the report says they disagree."""

    tolerance_pct: float = Field(25.0, gt=0, le=1000)
    slope_tolerance: float = Field(0.01, gt=0, le=1, description="s of lag per s, for lag slopes")


class Source(Section):
    """Where published figures come from: enough to find them and to know what they measured."""

    title: str = Field(min_length=1)
    author: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://\S+$")
    date: str = Field(pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$")
    setup: str = Field(min_length=1, description="the published set-up, in one line")

    @field_validator("date", mode="before")
    @classmethod
    def _date_as_written(cls, value):
        return value.isoformat() if hasattr(value, "isoformat") else value  # YAML reads 2017-02-01 as a date


class Figures(Section):
    """One published series: the figures by the values of `by`, at fixed values of other swept keys."""

    at: dict[str, str | int | float] = {}
    by: str
    values: dict[str, float] = Field(min_length=1)
    # `at most` / `at least`: the source states a bound ("the delay stays under 2 s"), not a figure; a
    # measurement on the right side of it (within the tolerance) agrees.
    kind: Literal["figure", "at most", "at least"] = "figure"

    @field_validator("values", mode="before")
    @classmethod
    def _keys_as_written(cls, value):
        # YAML reads `{1: 51.6}` with an int key: compared as the sweep writes it (str of the value).
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value


class Saturation(Section):
    """The smallest value of `by` whose figure is within `within_pct` of the series' highest."""

    at: dict[str, str | int | float] = {}
    by: str
    within_pct: float = Field(5.0, gt=0, lt=100)


class Shape(Section):
    """A published figure that carries over between machines where absolute ones do not: a ratio of
    two cells (`ratio: {of: {...}, to: {...}}`) or where a series saturates (`saturation`)."""

    name: str = Field(min_length=1)
    published: float = Field(gt=0)
    ratio: dict[Literal["of", "to"], dict[str, str | int | float]] | None = None
    saturation: Saturation | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.ratio is None) == (self.saturation is None):
            raise ValueError("ratio: a shape is either a ratio (of, to) or a saturation, one of them")
        if self.ratio is not None and set(self.ratio) != {"of", "to"}:
            raise ValueError("ratio: needs both `of` and `to` (the cells divided)")
        return self

    def keys(self) -> list[str]:
        if self.ratio is not None:
            return [k for cell in self.ratio.values() for k in cell]
        return [self.saturation.by, *self.saturation.at]


class Reference(Section):
    """Published figures to hold the measured ones against, cell by cell (report.md: both, the
    ratio, and the cells outside the tolerance), and shapes where only those carry over."""

    source: Source
    metric: Literal[METRICS]  # type: ignore[valid-type]
    tolerance_pct: float = Field(25.0, gt=0, le=1000)
    # Settings the published figures need to be comparable (e.g. load.queries: 500); a run without
    # them (a quick one) shows the figures beside its own, marked not comparable.
    when: dict[str, str | int | float] = {}
    figures: list[Figures] = []
    shapes: list[Shape] = []

    @model_validator(mode="after")
    def _something(self):
        if not self.figures and not self.shapes:
            raise ValueError("figures: a reference needs figures, shapes or both")
        return self

    def for_summary(self, scenario: Section) -> dict:
        """What summary.json keeps (the report renders it): the figures, and what makes them not
        comparable with this run, if anything."""
        return {**self.model_dump(mode="json"), "not_comparable": self.comparable(scenario)}

    def comparable(self, scenario: Section) -> list[str]:
        """The `when` settings this scenario (the whole Scenario, typed as its base: scenario.py holds this
        section) does not have, in words ("load.queries is 200, not 500")."""
        dumped = scenario.model_dump(mode="json")
        missing = []
        for dotted, wanted in self.when.items():
            found: object = dumped
            for part in dotted.split("."):
                found = found.get(part) if isinstance(found, dict) else None
            if str(found) != str(wanted):
                missing.append(f"{dotted} is {found}, not {wanted}")
        return missing

    def cells(self) -> list[tuple[dict[str, str], float]]:
        """(the swept values that name a cell, as strings; the published figure)."""
        return [
            ({**{k: str(v) for k, v in f.at.items()}, f.by: key}, value)
            for f in self.figures
            for key, value in f.values.items()
        ]
