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


CLUSTER = {
    "type": "object",
    "properties": {
        "cluster": {"type": "string"},
        "formed": {"type": "boolean"},
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "service": {"type": "string"},
                    "reachable": {"type": "boolean"},
                    "ok": {"type": "boolean"},
                    "state": {
                        "type": ["string", "null"],
                        "description": "GR MEMBER_STATE or wsrep_local_state_comment",
                    },
                    "role": {"type": ["string", "null"], "description": "GR: PRIMARY or SECONDARY"},
                    "cluster_size": {"type": "integer", "description": "Galera: wsrep_cluster_size"},
                    "component": {"type": "string", "description": "Galera: wsrep_cluster_status"},
                    "error": {"type": "string"},
                },
            },
        },
    },
}


def _get(summary: str, params: list | None = None, ok: dict | None = None, errors=(400, 401, 503)) -> dict:
    responses = {"200": {"description": "ok", "content": {"application/json": {"schema": ok or {"type": "object"}}}}}
    responses.update({str(code): ERROR for code in errors})
    return {"get": {"summary": summary, "parameters": params or [], "responses": responses}}


def _with_body(summary: str, properties: dict, ok: tuple[str, str], errors, required=()) -> dict:
    """An operation with a JSON object body."""
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    responses = {ok[0]: {"description": ok[1]}, **{str(c): ERROR for c in errors}}
    return {
        "summary": summary,
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
        "responses": responses,
    }


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
    "/api/clusters": _get(
        "State of the group-replication and galera clusters (null: that profile is not running)",
        ok={"type": "object", "properties": {"clusters": {"type": "object"}}},
        errors=(401,),
    ),
    "/api/clusters/{name}": _get(
        "One cluster's nodes: state, role (GR) or cluster size (Galera); formed when all three are members",
        [
            {
                "name": "name",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "enum": ["group-replication", "galera"]},
            }
        ],
        CLUSTER,
        errors=(401, 404, 409),
    ),
    "/api/shaping": {
        **_get("Shaping of every service: desired and as read back from the kernel", errors=(401, 503)),
        "delete": {
            "summary": "Clear all shaping",
            "responses": {"204": {"description": "cleared"}, "401": ERROR, "502": ERROR},
        },
    },
    "/api/shaping/{service}": {
        "parameters": [{"name": "service", "in": "path", "required": True, "schema": {"type": "string"}}],
        **_get("One service's shaping, desired and read back", errors=(400, 401, 404)),
        "put": {
            "summary": "Apply (replace in place) a service's or one link's shaping",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ShapingRequest"}}},
            },
            "responses": {
                "200": {"description": "applied; desired and read back"},
                **{str(c): ERROR for c in (400, 401, 404, 409, 422, 502)},
            },
        },
        "delete": {
            "summary": "Remove a service's shaping (or only the link to ?peer=)",
            "parameters": [{"name": "peer", "in": "query", "schema": {"type": "string"}}],
            "responses": {"204": {"description": "removed"}, **{str(c): ERROR for c in (400, 401, 404, 502)}},
        },
    },
    "/api/containers": _get("The lab's services: container, PID, IP, shaping", errors=(401, 503)),
    "/api/links": _get(
        "Latest byte and packet counters per container and per link (also in links.csv)", errors=(401, 503)
    ),
    "/api/runs": {
        **_get("Scenario runs of this controller", errors=(401,)),
        "post": _with_body(
            "Start a scenario run (one at a time)",
            {
                "scenario": {"type": "string", "description": "the scenario file's YAML text"},
                "quick": {"type": "boolean", "default": False},
            },
            ("201", "started"),
            (400, 401, 409, 503),
            required=("scenario",),
        ),
    },
    "/api/runs/{run_id}": {
        "parameters": [{"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}],
        **_get("A run's status, progress, ETA and per-point summary", errors=(401, 404)),
        "delete": {
            "summary": "Interrupt a run: cleanup runs, partial results are kept",
            "responses": {"202": {"description": "interrupting"}, "401": ERROR, "404": ERROR},
        },
    },
    "/api/events": _get(
        "Lab events (shaping changes, run points, load) for chart markers",
        [_query("since", "only events after this epoch", 0, 1e11, 0)],
        errors=(400, 401),
    ),
    "/api/load": {
        **_get("The load panel's sysbench: running, profile, latest per-second report", errors=(401, 503)),
        "post": _with_body(
            "Start sysbench in loadgen at a fixed rate",
            {
                "script": {"type": "string", "default": "oltp_write_only"},
                "rate": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 100000,
                    "default": 100,
                    "description": "TPS; 0 = unlimited",
                },
                "threads": {"type": "integer", "minimum": 1, "maximum": 256, "default": 4},
                "seconds": {"type": "integer", "minimum": 1, "maximum": 86400, "default": 600},
                "tables": {"type": "integer", "default": 4},
                "rows": {"type": "integer", "default": 10000},
                "prepare": {"type": "boolean", "default": False, "description": "sysbench cleanup + prepare first"},
            },
            ("201", "started"),
            (400, 401, 409, 503),
        ),
        "delete": {
            "summary": "Stop the load",
            "responses": {"204": {"description": "stopped"}, "401": ERROR, "503": ERROR},
        },
    },
    "/": {"get": {"summary": "The dashboard (HTML)", "responses": {"200": {"description": "text/html"}}}},
    "/metrics": {
        "get": {"summary": "Prometheus metrics (text format)", "responses": {"200": {"description": "text/plain"}}}
    },
    "/results/{name}": {
        "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
        "get": {
            "summary": "A file under results/ (reports, plots, CSVs)",
            "responses": {"200": {"description": "the file"}, "404": ERROR},
        },
    },
    "/api/verify": {
        "post": _with_body(
            "Measure a link from inside the lab: RTT (ping -U) and throughput (iperf3, both directions)",
            {
                "from": {"type": "string"},
                "to": {"type": "string"},
                "count": {"type": "integer", "minimum": 20, "maximum": 1000, "default": 20},
                "seconds": {"type": "integer", "minimum": 1, "maximum": 60, "default": 3},
                "streams": {"type": "integer", "minimum": 1, "maximum": 16, "default": 1},
                "throughput": {"type": "boolean", "default": True, "description": "false: RTT only"},
            },
            ("200", "requested beside measured"),
            (400, 401, 404),
            required=("from", "to"),
        )
    },
}

SHAPING_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "delay": {"type": "string", "example": "125ms", "description": "0..60s"},
        "jitter": {"type": "string", "example": "5ms"},
        "loss": {"type": "string", "example": "0.5%"},
        "rate": {"type": "string", "example": "2mbit", "description": "8kbit..10gbit (tc units; kbps = kilobytes/s)"},
        "distribution": {"type": "string", "enum": ["uniform", "normal", "pareto", "paretonormal"]},
        "correlation": {"type": "string"},
        "duplicate": {"type": "string"},
        "corrupt": {"type": "string"},
        "reorder": {"type": "string"},
        "peer": {"type": "string", "description": "only the link to this service"},
        "direction": {"type": "string", "enum": ["egress", "ingress", "both"], "default": "egress"},
        "duration": {"type": "string", "example": "60s", "description": "revert by itself after this long"},
    },
}


def document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "laglab controller", "version": "0.1.0"},
        "paths": PATHS,
        "components": {
            "schemas": {
                "ShapingRequest": SHAPING_REQUEST,
                "Error": {
                    "type": "object",
                    "required": ["error", "status"],
                    "properties": {"error": {"type": "string"}, "status": {"type": "integer"}},
                },
            },
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "when LAB_API_TOKEN is set"}
            },
        },
    }
