"""What every scenario section is built from: a model that refuses unknown keys, and a time field
parsed once into seconds."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationInfo

from laglab.shaping.params import ParamError, format_time, parse_time


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def Seconds(high: float):
    """A scenario time: '125ms', '1.5s', '500us' -> seconds, parsed once here and never again.

    A bare number is refused with the units to use: in tc a bare number means microseconds, in a
    scenario file most people would mean seconds, and guessing either way silently changes an
    experiment by a factor of a million. Dumped (results, resolved copy) as a time string again."""

    def parse(value: object, info: ValidationInfo) -> float:
        bare = value.strip() if isinstance(value, str) else value
        if isinstance(bare, str) and re.fullmatch(r"[\d.]+", bare):
            bare = float(bare)
        if isinstance(bare, (int, float)) and not isinstance(bare, bool):
            raise ValueError(
                f"{value!r} has no unit; write it like '{bare:g}s' or '{bare:g}ms' (units: us, ms, s, m, h)"
            )
        try:
            return parse_time(info.field_name, value, high=high)
        except ParamError as error:
            raise ValueError(error.detail) from None

    return Annotated[float, BeforeValidator(parse), PlainSerializer(format_time, return_type=str)]


def scenario_file(name: str, info: ValidationInfo) -> Path:
    """A file a scenario names (a trace, a write profile): a plain relative path under the scenarios
    folder (the scenario's own folder), never outside it."""
    base = Path((info.context or {}).get("base_dir") or ".").resolve()
    path = (base / name).resolve()
    plain = re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,200}", name)
    if not plain or ".." in Path(name).parts or base not in path.parents:
        raise ValueError(f"file: {name!r} must be a path under the scenarios folder")
    return path


# What a point measures that assertions, searches and published figures can name.
METRICS = (
    "max_lag_seconds",
    "p95_lag_seconds",
    "lag_slope",
    "tps",
    "qps",
    "link_mbit",
    "binlog_mbit",
    "load_seconds",
    "max_catch_up_seconds",
)
