"""The dashboard (GET /), its events (GET /api/events), the load panel (GET/POST/DELETE /api/load)
and results files (GET /results/<run>/<file>) for the reports it links to."""

from pathlib import Path

from flask import Blueprint, current_app, request, send_from_directory

from ..errors import ApiError, bad_request
from ..load import SCRIPTS, LoadBusy, Profile
from ..params import number

bp = Blueprint("dashboard", __name__, static_folder="../static", static_url_path="/static")


@bp.get("/")
def index():
    return send_from_directory(bp.static_folder, "dashboard.html")


@bp.get("/api/events")
def events():
    since = number("since", 0, 0, 1e11)
    return {"events": current_app.extensions["laglab"].events.since(since)}


def generator():
    load = current_app.extensions["laglab"].load
    if load is None:
        raise ApiError(503, "the load panel needs the Docker API, which this controller does not use")
    return load


@bp.get("/api/load")
def load_status():
    return generator().status()


@bp.post("/api/load")
def load_start():
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise bad_request("body", 'expected a JSON object like {"script": "oltp_write_only", "rate": 100}')
    script = body.get("script", "oltp_write_only")
    if script not in SCRIPTS:
        raise bad_request("script", f"{script!r} is not one of {', '.join(SCRIPTS)}")
    values = {}
    for field, default, low, high in (
        ("rate", 100, 0, 100000),
        ("threads", 4, 1, 256),
        ("seconds", 600, 1, 86400),
        ("tables", 4, 1, 64),
        ("rows", 10000, 1, 1000000),
    ):
        value = body.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise bad_request(field, f"{value!r} is not a whole number in {low}..{high}")
        values[field] = value
    load = generator()
    run = active_run()
    if run is not None:
        raise ApiError(
            409, f"load: scenario run {run.id} is using the load generator; wait for it or DELETE /api/runs/{run.id}"
        )
    profile = Profile(script, values["tables"], values["rows"], values["threads"], values["rate"])
    lab = current_app.extensions["laglab"]
    try:
        if load.running:
            raise LoadBusy(load.owner or "?")
        if body.get("prepare", False) is True:
            load.prepare(profile)
        load.start(profile, values["seconds"], owner="panel")
    except LoadBusy as error:
        raise ApiError(409, f"load: {error}; DELETE /api/load first") from None
    except RuntimeError as error:
        raise ApiError(409, f"load: {error}") from None
    lab.events.add("load", f"load started: {script} {values['rate'] or 'max'} TPS, {values['threads']} threads")
    return load.status(), 201


def active_run():
    """The scenario run in progress, if any: it owns the load generator while it runs."""
    runs = current_app.extensions["laglab_runs"]
    return next((r for r in runs.values() if r.status in ("pending", "running")), None)


@bp.delete("/api/load")
def load_stop():
    """Answers at once: the load gets SIGTERM and ends within a second or so (GET shows it)."""
    load = generator()
    if load.running and load.owner != "panel":
        raise ApiError(409, f"load: it belongs to scenario run {load.owner}; DELETE /api/runs/{load.owner} instead")
    if load.running:
        load.stop()
        current_app.extensions["laglab"].events.add("load", "load stopped")
    return load.status(), 202


@bp.get("/results/<path:name>")
def results_file(name):
    root = Path(current_app.config["RESULTS_DIR"]).resolve()
    return send_from_directory(root, name)  # refuses paths outside root (404)
