"""Every bound the controller puts on what one request may ask, in one table: the API's models, the
scenario schema and the managers read them from here, and docs/api.md's table of limits is checked
against it (tests/unit/test_limits.py). A request over one is answered at once with a 4xx naming the
limit; nothing is built before its size is known.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    name: str
    value: int
    unit: str
    what: str


LIMITS: dict[str, Limit] = {}


def _limit(name: str, value: int, unit: str, what: str) -> int:
    LIMITS[name] = Limit(name, value, unit, what)
    return value


BODY_BYTES = _limit("body", 1 << 20, "bytes", "a request body (413 over it; waitress refuses it at the socket too)")
SCENARIO_BYTES = _limit("scenario", 256 << 10, "bytes", "a scenario's YAML text (POST /api/runs `scenario`)")
YAML_NODES = _limit("yaml_nodes", 20_000, "nodes", "values in a scenario once its aliases are expanded")
YAML_DEPTH = _limit("yaml_depth", 64, "levels", "nesting of a scenario's YAML, aliases and merge keys followed")
JSON_DEPTH = _limit("json_depth", 64, "levels", "nesting of a request's JSON body")
POINTS = _limit("points", 1_000, "points", "points one run may measure: the sweep's product times a search's probes")
TIMELINE_EVENTS = _limit(
    "timeline_events", 10_000, "changes", "changes one point's timeline schedules (repeats and trace rows counted)"
)
ACTIVE_FAULTS = _limit(
    "active_faults",
    32,
    "faults",
    "faults in force at once: with a duration, or kill, stop, pause until undone (409 over it)",
)
MATRIX_PAIRS = _limit(
    "matrix_pairs",
    1_024,
    "pairs",
    "member pairs a delay matrix shapes (each one request each way), counted before any is built",
)
PARTITIONS = _limit("partitions", 16, "partitions", "partitions in force at once (409 over it)")
LONG_CHECKS = _limit(
    "long_checks", 1, "per kind", "consistency checks, and link verifications, running at once (409 while one runs)"
)
CAPTURES = _limit("captures", 4, "captures", "packet captures running at once, one per link (409 over it)")
CAPTURE_SECONDS = _limit("capture_seconds", 600, "seconds", "one capture's duration")
CAPTURE_BYTES = _limit("capture_bytes", 64 << 20, "bytes", "one capture's pcap per side (it stops when one reaches it)")
SERVER_THREADS = _limit("server_threads", 8, "threads", "requests the controller answers at once")
CONTROLLER_MEMORY = _limit("controller_memory", 1024, "MiB", "the controller container's memory (compose mem_limit)")
