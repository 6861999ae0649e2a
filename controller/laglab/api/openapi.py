"""The API's operations, declared once: each route says its query, body and response models
(laglab/api/models.py) through `operation`, which registers the route on its blueprint, validates
what comes in, and lists the operation for the OpenAPI 3.1 document served at /api/openapi.json.

A request the models refuse is a 400 whose message names the field; tests/unit/test_api.py checks
that the document names exactly the routes the app serves.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from flask import Blueprint, request
from pydantic import BaseModel, ValidationError

from laglab import limits
from laglab.api.models import PATTERN_MESSAGES, Error
from laglab.errors import ApiError, bad_request
from laglab.limits import LIMITS
from laglab.shaping.params import RATE_PATTERN, ambiguous_rate

OPEN_PATHS = ("/api/health", "/api/openapi.json", "/metrics", "/")
REF = "#/components/schemas/{model}"


@dataclass
class Operation:
    method: str
    rule: str  # Flask's
    summary: str
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    ok: tuple[int, object] = (200, None)  # (status, model | media type string | None for no content)
    errors: tuple[int, ...] = ()
    path_params: dict = field(default_factory=dict)  # name -> JSON schema
    description: str = ""

    @property
    def path(self) -> str:
        """The OpenAPI path: <name> and <path:name> become {name}."""
        out = self.rule
        for token in self.rule.split("<")[1:]:
            inner = token.split(">")[0]
            out = out.replace(f"<{inner}>", "{" + inner.split(":")[-1] + "}")
        return out


OPERATIONS: list[Operation] = []


def operation(bp: Blueprint, method: str, rule: str, summary: str, **kwargs):
    """Declare, register and validate one route. The view gets `query=` and `body=` as model instances."""
    op = Operation(method.upper(), rule, summary, **kwargs)
    OPERATIONS.append(op)

    def wrap(fn):
        @functools.wraps(fn)
        def view(**path_values):
            for name, schema in op.path_params.items():
                pattern = schema.get("pattern")
                if pattern and not re.search(pattern, path_values[name]):
                    value = path_values[name][:64]
                    raise bad_request(name, PATTERN_MESSAGES.get(pattern, "{value!r} is not valid").format(value=value))
            if op.query is not None:
                path_values["query"] = validate(op.query, request.args.to_dict())
            if op.body is not None:
                try:
                    data = request.get_json(silent=True)
                except RecursionError:  # 100,000 `[`: json.loads recursed out (HTTP 500 before, #54)
                    raise bad_request(
                        "body", f"nested deeper than {limits.JSON_DEPTH} levels (limit json_depth)"
                    ) from None
                if data is not None and json_depth(data) > limits.JSON_DEPTH:
                    raise bad_request("body", f"nested deeper than {limits.JSON_DEPTH} levels (limit json_depth)")
                if not isinstance(data, dict):
                    raise bad_request("body", "expected a JSON object (Content-Type: application/json)")
                path_values["body"] = validate(op.body, data)
            return fn(**path_values)

        bp.add_url_rule(rule, endpoint=fn.__name__, view_func=view, methods=[op.method])
        return view

    return wrap


def json_depth(data) -> int:
    """How deep a parsed JSON value nests (iterative: the value may be as deep as the parser allowed)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(value, dict):
            stack.extend((v, level + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, level + 1) for v in value)
    return deepest


def validate(model: type[BaseModel], data: dict):
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ApiError(400, describe(model, error)) from None


def describe(model: type[BaseModel], error: ValidationError) -> str:
    """'<field>: <what is wrong>' for the first field in error, from the most telling of its errors."""
    errors = error.errors()
    name = errors[0]["loc"][0] if errors[0]["loc"] else "body"
    mine = [e for e in errors if (e["loc"][:1] or ("body",))[0] == name]
    # In a union (a time as '125ms' or as a number) the branch of the value's own type says most.
    best = next((e for e in mine if not e["type"].endswith("_type")), mine[0])
    value = best.get("input")
    shown = repr(value) if len(repr(value)) <= 66 else repr(value)[:63] + "..."
    kind, ctx = best["type"], best.get("ctx") or {}
    field = model.model_fields.get(str(name))
    shown_name = (field.alias if field is not None and field.alias else str(name))[:64]
    if kind == "string_pattern_mismatch":
        message = PATTERN_MESSAGES.get(ctx.get("pattern"), "{value!r} is not of the expected form").format(value=value)
        if ctx.get("pattern") == RATE_PATTERN and isinstance(value, str) and (why := ambiguous_rate(value)):
            message = why  # '2mbps': both readings named (shaping/params.py)
        if len(message) > 200:
            message = f"{shown} " + message.split(" ", 1)[-1].split(" ", 1)[-1]
    elif kind == "extra_forbidden":
        known = sorted(f.alias or n for n, f in model.model_fields.items())
        message = f"unknown field; known fields: {', '.join(known)}"
    elif kind == "literal_error":
        message = f"{shown} is not one of {ctx.get('expected', '').replace(' or ', ', ').replace(chr(39), '')}"
    elif kind == "missing":
        message = "required"
    elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        low, high = _bounds(field)
        if low is not None and high is not None:
            message = f"{value} is out of range {low:g}..{high:g}"
        else:
            op = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">", "less_than": "<"}[kind]
            message = f"{shown} must be {op} {next(iter(ctx.values()), '?')}"
    elif kind in ("float_parsing", "int_parsing", "finite_number"):
        message = f"{shown} is not a number"
    else:
        message = f"{best['msg'][0].lower()}{best['msg'][1:]}, got {shown}"
    return f"{shown_name}: {message}"


def _bounds(field) -> tuple[float | None, float | None]:
    low = high = None
    for item in getattr(field, "metadata", ()):
        low = getattr(item, "ge", None) if getattr(item, "ge", None) is not None else low
        high = getattr(item, "le", None) if getattr(item, "le", None) is not None else high
    return low, high


# --- the document ---
def _schema_ref(model: type[BaseModel], components: dict) -> dict:
    schema = model.model_json_schema(by_alias=True, ref_template=REF)
    for name, sub in schema.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components.setdefault(model.__name__, schema)
    return {"$ref": REF.format(model=model.__name__)}


def _parameters(op: Operation, components: dict) -> list[dict]:
    params = [{"name": n, "in": "path", "required": True, "schema": s} for n, s in op.path_params.items()]
    if op.query is not None:
        schema = op.query.model_json_schema()
        for name, prop in schema["properties"].items():
            prop = dict(prop)
            prop.pop("title", None)
            params.append({"name": name, "in": "query", "description": prop.pop("description", ""), "schema": prop})
    return params


def _response(ok: object, components: dict) -> dict:
    if ok is None:
        return {"description": "no content"}
    if isinstance(ok, str):
        schema = {"type": "object"} if ok == "application/json" else {"type": "string"}
        return {"description": ok, "content": {ok: {"schema": schema}}}
    return {"description": "ok", "content": {"application/json": {"schema": _schema_ref(ok, components)}}}


def document() -> dict:
    components: dict = {}
    error = {"description": "error", "content": {"application/json": {"schema": _schema_ref(Error, components)}}}
    # Over the body limit the API answers in its error shape; over twice that, the HTTP server itself
    # (waitress's max_request_body_size: __main__.py) answers before the API sees the request, in plain text.
    too_large = {
        "description": "the body is over the limit `body`: the error shape; over twice that, the HTTP server's own text",
        "content": {**error["content"], "text/plain": {"schema": {"type": "string"}}},
    }
    paths: dict = {}
    for op in OPERATIONS:
        entry: dict = {"summary": op.summary, "responses": {str(op.ok[0]): _response(op.ok[1], components)}}
        if op.description:
            entry["description"] = op.description
        errors = set(op.errors)
        if op.query is not None or op.body is not None or op.path_params:
            errors.add(400)
        errors.add(403)  # a page of another origin (api/access.py)
        if op.path not in OPEN_PATHS:
            errors.add(401)
            entry["security"] = [{"bearer": []}]
        if op.body is not None:
            errors.add(413)  # over MAX_BODY_BYTES
        entry["responses"].update({str(code): error for code in sorted(errors)})
        if 413 in errors:
            entry["responses"]["413"] = too_large
        parameters = _parameters(op, components)
        if parameters:
            entry["parameters"] = parameters
        if op.body is not None:
            entry["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": _schema_ref(op.body, components)}},
            }
        paths.setdefault(op.path, {})[op.method.lower()] = entry
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "laglab controller",
            "version": "0.2.0",
            "description": "400: the request does not match this document (the message names the field). "
            "422: it matches, but a value is out of range or breaks a rule across fields. Limits (a request over "
            "one is refused at once, naming it): "
            + "; ".join(f"{lim.name} {lim.value} {lim.unit}: {lim.what}" for lim in LIMITS.values()),
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "LAB_API_TOKEN (make up writes one into .env); without one set the controller "
                    "makes its own, in its state folder's api-token",
                }
            },
        },
    }
