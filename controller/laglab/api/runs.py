"""Scenario runs: POST /api/runs (start), GET /api/runs, GET /api/runs/<id> (progress, summary),
DELETE /api/runs/<id> (interrupt: cleanup runs, partial results are kept)."""

from pathlib import Path

from flask import Blueprint, current_app, request

from ..errors import ApiError, bad_request
from ..scenarios.runner import ScenarioRun
from ..scenarios.spec import ScenarioError, load_text

bp = Blueprint("runs", __name__)


def lab():
    value = current_app.extensions["laglab"]
    if value.shaping is None or value.recorder is None:
        raise ApiError(503, "runs need the lag recorder and shaping, which are not running in this controller")
    return value


@bp.post("/api/runs")
def start():
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise bad_request("body", 'expected a JSON object like {"scenario": "<YAML text>", "quick": false}')
    text = body.get("scenario")
    if not isinstance(text, str) or not text.strip():
        raise bad_request("scenario", "expected the scenario file's YAML text")
    quick = body.get("quick", False)
    if not isinstance(quick, bool):
        raise bad_request("quick", f"{quick!r} is not true or false")
    try:
        plan = load_text(text, quick=quick)
    except ScenarioError as error:
        raise bad_request(f"scenario: {error.path}", error.message) from None
    runs = current_app.extensions["laglab_runs"]
    if any(r.status in ("pending", "running") for r in runs.values()):
        raise ApiError(409, "run: another run is in progress; wait for it or DELETE it")
    the_lab = lab()
    if the_lab.load is not None and the_lab.load.running:
        raise ApiError(409, "run: the load panel's load is running; DELETE /api/load first")
    run = ScenarioRun(the_lab, plan, Path(current_app.config["RESULTS_DIR"]), text)
    runs[run.id] = run
    run.start()
    return run.as_json(), 201


@bp.get("/api/runs")
def index():
    return {"runs": [r.as_json() | {"summary": None} for r in current_app.extensions["laglab_runs"].values()]}


def find(run_id: str) -> ScenarioRun:
    run = current_app.extensions["laglab_runs"].get(run_id)
    if run is None:
        raise ApiError(404, f"run: no run {run_id[:80]!r} in this controller")
    return run


@bp.get("/api/runs/<run_id>")
def show(run_id):
    return find(run_id).as_json()


@bp.delete("/api/runs/<run_id>")
def cancel(run_id):
    run = find(run_id)
    run.cancel()
    return run.as_json(), 202
