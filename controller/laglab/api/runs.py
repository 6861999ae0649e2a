"""Scenario runs: POST /api/runs (start), GET /api/runs, GET /api/runs/<id> (progress, summary),
DELETE /api/runs/<id> (interrupt: cleanup runs, partial results are kept)."""

from pathlib import Path

from flask import Blueprint, current_app

from laglab.api import access, models, parts
from laglab.api.openapi import operation
from laglab.errors import ApiError
from laglab.replicators import servers
from laglab.scenarios.plan import load_text
from laglab.scenarios.run.runner import ScenarioRun
from laglab.scenarios.schema.scenario import ScenarioError

bp = Blueprint("runs", __name__)
RUN_ID = {"run_id": {"type": "string"}}


def lab():
    return parts.lab()


@operation(
    bp, "POST", "/api/runs", "Start a scenario run (one at a time)", body=models.RunBody,
    ok=(201, models.Run), errors=(404, 409, 422, 503),
    description="422: the scenario text is not a valid scenario (the message names the key path).",
)  # fmt: skip
def start(body: models.RunBody):
    if (body.scenario is None) == (body.file is None):
        raise ApiError(422, "scenario: give the scenario's text or a shipped file, one of them")
    folder = scenarios_dir()
    text = body.scenario
    if body.file is not None:
        path = folder / body.file
        if not path.is_file():
            raise ApiError(404, f"file: no scenario {body.file!r} (GET /api/scenarios lists them)")
        text = path.read_text()
    try:
        plan = load_text(text, quick=body.quick, base_dir=folder)
    except ScenarioError as error:
        raise ApiError(422, f"scenario: {error.path}: {error.message}") from None
    the_lab = lab()
    instead: list[dict] = []
    if plan.scenario.servers is not None:  # the versions it is about, or no run unless asked (and then said)
        pinned = plan.scenario.servers.model_dump()
        reported = servers.reported([the_lab.source, the_lab.target])
        if not body.on_lab_servers:
            servers.check(pinned, reported)
        images = {service: the_lab.platform.image(service) for service in servers.ROLES.values()}
        instead = servers.instead(pinned, reported, images)
    with the_lab.runs_lock:  # the check and the insert as one step: 8 server threads answer at once
        if any(r.busy for r in the_lab.runs.values()):
            raise ApiError(409, "run: another run is in progress (or still cleaning up); wait for it or DELETE it")
        if the_lab.load.running:
            raise ApiError(409, "run: the load panel's load is running; DELETE /api/load first")
        try:
            run = ScenarioRun(
                the_lab.run_parts, plan, Path(current_app.config["RESULTS_DIR"]), text, seed=body.seed, instead=instead
            )
        except OSError as error:  # results/ full or not writable: said, not an HTTP 500 (#54)
            raise ApiError(503, f"results: the run's folder cannot be written: {error.strerror or error}") from None
        the_lab.runs[run.id] = run
        run.start()
    return run.as_json(), 201


def scenarios_dir() -> Path:
    return Path(current_app.config["SCENARIOS_DIR"])


@operation(
    bp, "GET", "/api/scenarios", "The shipped scenario files (POST /api/runs {\"file\": ...} starts one)",
    ok=(200, models.ScenarioFiles),
)  # fmt: skip
def scenarios():
    out = []
    for path in sorted(scenarios_dir().glob("*.yaml")):
        entry = {
            "file": path.name, "name": None, "description": None, "points": None, "timeline_steps": None, "error": None,
        }  # fmt: skip
        try:
            plan = load_text(path.read_text(), base_dir=scenarios_dir())
            entry.update(name=plan.scenario.name, description=plan.scenario.description, points=plan.most_points(),
                         timeline_steps=len(plan.scenario.timeline))  # fmt: skip
        except (ScenarioError, OSError) as error:
            entry["error"] = str(error)[:300]
        out.append(entry)
    return {"scenarios": out}


@operation(bp, "GET", "/api/runs", "Scenario runs of this controller", ok=(200, models.Runs))
def index():
    return {"runs": [r.as_json() | {"summary": None, "links": links(r)} for r in parts.lab().runs.values()]}


REPORT_FILES = ("report.html", "report.md", "sweep.png", "lag.png")


def links(run: ScenarioRun) -> dict[str, str]:
    """The run's report files as links a browser opens without the token header (signed, for hours)."""
    token = current_app.config["API_TOKEN"]
    return {name: access.signed_link(token, f"/results/{run.id}/{name}") for name in REPORT_FILES}


def find(run_id: str) -> ScenarioRun:
    run = parts.lab().runs.get(run_id)
    if run is None:
        raise ApiError(404, f"run: no run {run_id[:80]!r} in this controller")
    return run


@operation(
    bp, "GET", "/api/runs/<run_id>", "A run's status, progress, ETA and per-point summary",
    path_params=RUN_ID, ok=(200, models.Run), errors=(404,),
)  # fmt: skip
def show(run_id):
    return find(run_id).as_json()


@operation(
    bp, "DELETE", "/api/runs/<run_id>",
    "Interrupt a run in progress (cleanup runs, partial results are kept); forget a finished one",
    path_params=RUN_ID, ok=(202, models.Run), errors=(404,),
    description="A finished run leaves this controller's list (its results folder stays on disk); one in "
    "progress is interrupted at once and stays listed until its cleanup is done (`step` goes from `cleanup` "
    "to `done`): until then that cleanup still clears shaping and stops the load, so wait for it before "
    "setting the lab up again.",
)  # fmt: skip
def cancel(run_id):
    run = find(run_id)
    if run.busy:
        run.cancel()  # interrupted from this answer on; it stays listed until its cleanup is done
    else:
        parts.lab().runs.pop(run_id, None)
    return run.as_json(), 202
