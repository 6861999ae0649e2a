"""GET /api/health: is the controller up, is the lag recorder running, and what must a person repair
(`problems`, each with its command). GET /metrics: Prometheus."""

from flask import Blueprint, Response, current_app

from laglab.api import access, models, parts
from laglab.api.metrics import CONTENT_TYPE, render
from laglab.api.openapi import operation
from laglab.lab import netem_known

bp = Blueprint("health", __name__)


@operation(bp, "GET", "/api/health", "Controller and recorder status", ok=(200, models.Health))
def health():
    if not access.authorized():
        return {"status": "ok", "authenticated": False}
    lab = parts.lab()
    recorder = lab.recorder
    latest = recorder.samples[-1] if recorder.samples else None
    return {
        "status": "ok",
        "authenticated": True,
        "problems": lab.problems.current(),
        "restart": lab.restart.as_json(),
        "token": current_app.config["API_TOKEN_ORIGIN"],
        "flavor_setting": lab.settings.DB_FLAVOR,
        "run": lab.run.path.name,
        "platform": {"name": lab.platform.name, "project": lab.platform.project},
        "shaping": {
            "backend": lab.shaping_view.backend,
            "netem_available": netem_known(lab.netem),
            "last_error": lab.shaping.last_error,
        },
        "counters": {"kind": type(lab.counters).__name__, "last_error": lab.counters.last_error},
        "recorder": {
            "running": recorder.alive,
            "interval_ms": round(recorder.interval * 1000),
            "max_window_seconds": round(recorder.samples.maxlen * recorder.interval),
            "samples": len(recorder.samples),
            "heartbeats_written": recorder.writes,
            "latest": latest.as_dict() if latest else None,
            "servers": recorder.servers(),
        },
    }


@operation(bp, "GET", "/metrics", "Prometheus metrics (text format)", ok=(200, "text/plain"))
def metrics():
    return Response(render(parts.lab(), parts.lab().runs), content_type=CONTENT_TYPE)
