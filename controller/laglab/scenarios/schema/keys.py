"""The scenario keys as a reference table, generated from the schema itself (schema/scenario.py's Scenario): every key
a file may hold, its type or allowed values, its default, whether it can be swept, and what it means.
docs/scenarios.md carries it between markers; `scripts/docs` writes it and a unit test fails when the
page is stale (#36.4: the keys were documented only in the schema's module)."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator

from pydantic import BaseModel, PlainSerializer
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from laglab.scenarios.schema.scenario import SWEEPABLE, Scenario
from laglab.shaping.params import format_time


def _type_words(annotation) -> str:
    """An annotation as a reader wants it: 'one of a, b', 'time', 'list of ...', 'text'."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_words(args[0])
    if origin is typing.Literal and len(args) == 1:
        return f"`{args[0]}`"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        return " or ".join(_type_words(a) for a in kept)
    if origin is list:
        return f"list of {_type_words(args[0])}" if args else "list"
    if origin is tuple:
        return "pair of " + _type_words(args[0]) + "s" if args else "pair"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return {str: "text", int: "whole number", float: "number", bool: "true or false"}.get(annotation, str(annotation))


def _is_time(info: FieldInfo) -> bool:
    """A Seconds field (fields.py), or one that may be None: typed with its unit, dumped by format_time."""

    def timed(metadata) -> bool:
        return any(isinstance(m, PlainSerializer) and m.func is format_time for m in metadata)

    inner = [
        typing.get_args(a)[1:] for a in typing.get_args(info.annotation) if typing.get_origin(a) is typing.Annotated
    ]
    return timed(info.metadata) or any(timed(m) for m in inner)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if value is PydanticUndefined or value is None:
        return "-"
    if isinstance(value, BaseModel):
        return "(its keys' defaults)"
    if _is_time(info):
        return f"`{format_time(value)}`"
    if isinstance(value, (list, tuple)) and not value:
        return "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value)
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return "empty"
    return f"`{value}`"


def _models(annotation) -> list[type[BaseModel]]:
    """The sections an annotation holds (a model, a list of models, a model or None)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _what(info: FieldInfo, annotation) -> str:
    if info.description:
        return info.description
    for model in _models(annotation):
        if model.__doc__ and model.__module__.startswith("laglab"):
            return " ".join(model.__doc__.split("\n\n")[0].split())
    return ""


def rows(model: type[BaseModel] = Scenario, prefix: str = "") -> Iterator[tuple[str, str, str, str, str]]:
    """(key, type, default, sweepable, what) for every key, depth first as a file nests them; a list of
    sections is `key[]`."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{info.alias or name}"
        annotation = info.annotation
        swept = "yes" if key in SWEEPABLE else ""
        kind = "time (with its unit: us, ms, s)" if _is_time(info) else _type_words(annotation)
        yield key, kind, _default(info), swept, _what(info, annotation).replace("|", "\\|")
        inner = "[]" if typing.get_origin(annotation) is list else ""
        for section in _models(annotation):
            yield from rows(section, f"{key}{inner}.")


def markdown() -> str:
    """The table docs/scenarios.md holds between its markers."""
    lines = ["| key | type | default | sweep | what |", "|---|---|---|---|---|"]
    lines += [
        "| `sweep` | mapping | none | | a swept key (`sweep` column) -> its list of values: one point per combination |",
        "| `quick` | mapping | none | | `--quick`: dotted keys (`load.duration: 60s`) replaced before the sweep expands; "
        "`quick.sweep` replaces the sweep's lists key by key; a list (`assertions`) is replaced whole |",
    ]
    for key, kind, default, swept, what in rows():
        lines.append(f"| `{key}` | {kind} | {default} | {swept} | {what} |")
    return "\n".join(lines) + "\n"
