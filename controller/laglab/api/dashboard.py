"""The dashboard (GET /), its events (GET /api/events), the load panel (GET/POST/DELETE /api/load)
and results files (GET /results/<run>/<file>) for the reports it links to."""

from pathlib import Path

from flask import Blueprint, current_app, send_from_directory

from laglab.api import models, parts
from laglab.api.openapi import operation
from laglab.errors import ApiError
from laglab.load.generator import LoadBusy, Profile, Replay
from laglab.load.replay import speed_words as replay_speed

bp = Blueprint("dashboard", __name__, static_folder="../static", static_url_path="/static")


@operation(bp, "GET", "/", "The dashboard", ok=(200, "text/html"))
def index():
    return send_from_directory(bp.static_folder, "dashboard.html")


@operation(
    bp, "GET", "/api/events", "Lab events (shaping changes, run points, load) for chart markers",
    query=models.EventsQuery, ok=(200, models.Events),
)  # fmt: skip
def events(query: models.EventsQuery):
    return {"events": parts.lab().events.since(query.since)}


def generator():
    return parts.load()


@operation(
    bp, "GET", "/api/load", "The lab's load generator: running, owner, profile, latest per-second report",
    ok=(200, models.LoadStatus), errors=(503,),
)  # fmt: skip
def load_status():
    return generator().status()


@operation(
    bp, "POST", "/api/load", "Start sysbench in loadgen at a fixed rate, or the replay of a write profile",
    body=models.LoadBody, ok=(201, models.LoadStatus), errors=(409, 422, 503),
)  # fmt: skip
def load_start(body: models.LoadBody):
    load = generator()
    run = active_run()
    if run is not None:
        raise ApiError(
            409, f"load: scenario run {run.id} is using the load generator; wait for it or DELETE /api/runs/{run.id}"
        )
    if body.profile is not None:
        profile = Profile.replaying(Replay(body.profile, body.speed, body.profile_name))
    else:
        profile = Profile(body.script, body.tables, body.rows, body.threads, body.rate)
    lab = parts.lab()
    try:
        if load.running:
            raise LoadBusy(load.owner or "?")
        if profile.replay is not None:
            load.prepare_replay(profile)
        elif body.prepare:
            load.prepare(profile)
        load.start(profile, body.seconds, owner="panel")
    except LoadBusy as error:
        raise ApiError(409, f"load: {error}; DELETE /api/load first") from None
    except RuntimeError as error:
        raise ApiError(409, f"load: {error}") from None
    what = (
        f"a replay of {body.profile_name}{replay_speed(body.speed)}, {profile.threads} threads"
        if profile.replay is not None
        else f"{body.script} {body.rate or 'max'} TPS, {body.threads} threads"
    )
    lab.events.add("load", f"load started: {what}")
    return load.status(), 201


def active_run():
    """The scenario run in progress, if any: it owns the load generator while it runs."""
    runs = parts.lab().runs
    return next((r for r in runs.values() if r.busy), None)


@operation(
    bp, "DELETE", "/api/load", "Stop the panel's load: answers at once, sysbench gets SIGTERM (GET shows the end)",
    ok=(202, models.LoadStatus), errors=(409, 503),
)  # fmt: skip
def load_stop():
    load = generator()
    if load.running and load.owner != "panel":
        raise ApiError(409, f"load: it belongs to scenario run {load.owner}; DELETE /api/runs/{load.owner} instead")
    if load.running:
        load.stop()
        parts.lab().events.add("load", "load stopped")
    return load.status(), 202


@operation(
    bp, "GET", "/results/<path:name>", "A file under results/ (reports, plots, CSVs)",
    path_params={"name": {"type": "string"}}, ok=(200, "application/octet-stream"), errors=(404,),
)  # fmt: skip
def results_file(name):
    root = Path(current_app.config["RESULTS_DIR"]).resolve()
    response = send_from_directory(root, name)  # refuses paths outside root (404)
    # A results file is shown, never run: report.html in a sandbox (no script, no storage of this
    # origin, where the dashboard keeps the token), images only from itself.
    response.headers["Content-Security-Policy"] = (
        "sandbox; default-src 'none'; img-src data: 'self'; style-src 'unsafe-inline'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
