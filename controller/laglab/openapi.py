"""The OpenAPI 3.1 document of the controller's API. tests/unit/test_openapi.py checks that it
names exactly the routes the app serves."""

from __future__ import annotations

ERROR = {
    "description": "error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}

LAG_SAMPLE = {
    "type": "object",
    "properties": {
        "time": {"type": "string", "description": "UTC, ISO 8601, microseconds"},
        "epoch": {"type": "number"},
        "status": {"type": "string", "enum": ["ok", "gap"]},
        "reason": {"type": ["string", "null"], "description": "why the sample is a gap"},
        "lag_seconds": {
            "type": ["number", "null"],
            "description": "age of the oldest heartbeat not yet on the target; 0 when caught up",
        },
        "heartbeat_age_seconds": {
            "type": ["number", "null"],
            "description": "target now - newest heartbeat on the target",
        },
        "heartbeat_seq": {"type": ["integer", "null"]},
        "seconds_behind_source": {"type": ["integer", "null"]},
        "applier_lag_seconds": {"type": ["number", "null"], "description": "MySQL: end of apply - original commit"},
        "io_running": {"type": ["string", "null"]},
        "sql_running": {"type": ["string", "null"]},
    },
}


def _get(summary: str, params: list | None = None, ok: dict | None = None, errors=(400, 401, 503)) -> dict:
    responses = {"200": {"description": "ok", "content": {"application/json": {"schema": ok or {"type": "object"}}}}}
    responses.update({str(code): ERROR for code in errors})
    return {"get": {"summary": summary, "parameters": params or [], "responses": responses}}


def _query(name: str, description: str, minimum: float, maximum: float, default: float) -> dict:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": "number", "minimum": minimum, "maximum": maximum, "default": default},
    }


PATHS = {
    "/api/health": _get("Controller and recorder status", errors=()),
    "/api/lag": _get(
        "Latest lag sample and a recent window",
        [_query("seconds", "window length", 0, 86400, 30)],
        {
            "type": "object",
            "properties": {
                "latest": LAG_SAMPLE,
                "samples": {"type": "array", "items": LAG_SAMPLE},
                "interval_ms": {"type": "integer"},
                "csv": {"type": "string"},
                "window_seconds": {"type": "number"},
            },
        },
    ),
    "/api/consistency": _get(
        "Wait for the target to execute the source's GTID set, then compare every lab table",
        [_query("timeout", "seconds to wait for the target", 1, 600, 30)],
        {
            "type": "object",
            "properties": {
                "identical": {"type": "boolean"},
                "gtid": {"type": "object"},
                "tables": {"type": "array", "items": {"type": "object"}},
                "differences": {"type": "array", "items": {"type": "string"}},
            },
        },
    ),
    "/api/openapi.json": _get("This document", errors=()),
}


def document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "laglab controller", "version": "0.1.0"},
        "paths": PATHS,
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "status"],
                    "properties": {"error": {"type": "string"}, "status": {"type": "integer"}},
                }
            },
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "when LAB_API_TOKEN is set"}
            },
        },
    }
