"""The Flask app factory: the composition root, where the lab's parts are built and handed to what
uses them (laglab/lab.py holds them)."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

from flask import Flask

from laglab import config, errors, platforms
from laglab.api import BLUEPRINTS, access, parts
from laglab.api.parts import lab_of
from laglab.deadline import WALL
from laglab.faults import FaultManager
from laglab.lab import Lab
from laglab.load.generator import LoadGenerator
from laglab.measurement.captures import Captures
from laglab.measurement.cluster_lag import ClusterWatch
from laglab.measurement.counters import Counters
from laglab.measurement.lag import LagRecorder
from laglab.measurement.pod_counters import PodCounters
from laglab.measurement.results import Run
from laglab.replicators.base import Parts
from laglab.replicators.db import lab_endpoints
from laglab.scenarios.run import measure, orphan
from laglab.scenarios.run.environment import Environment
from laglab.scenarios.run.parts import RunParts
from laglab.shaping import backends
from laglab.shaping.executor import Executor
from laglab.shaping.manager import ShapingManager
from laglab.state.events import Events
from laglab.state.recovery import Restart

MAX_BODY_BYTES = 1 << 20


def create_app(test_config: dict | None = None, environ=None) -> Flask:
    """Defaults -> environment -> test overrides. Starts the lag recorder unless START_RECORDER is false."""
    environ = os.environ if environ is None else environ
    app = Flask(__name__)
    app.config.from_mapping(
        START_RECORDER=True,
        START_SHAPING=True,
        RESULTS_DIR=environ.get("RESULTS_DIR", "results"),
        # Shipped scenarios and their traces (compose mounts ./scenarios here, read-only).
        SCENARIOS_DIR=environ.get("SCENARIOS_DIR", str(Path(__file__).resolve().parents[2] / "scenarios")),
        # What must outlive the controller (its shaping, faults, the run in progress, its own token).
        STATE_DIR=environ.get("STATE_DIR", "/var/lib/laglab"),
    )
    if test_config:
        app.config.update(test_config)
    app.config.setdefault("SHAPING_STATE", str(Path(app.config["STATE_DIR"]) / "shaping.json"))
    # Every request body is bounded (waitress is told the same in __main__): 1 MiB holds any scenario.
    app.config.setdefault("MAX_CONTENT_LENGTH", MAX_BODY_BYTES)
    settings = config.load(environ)
    source, target = lab_endpoints(settings, environ)
    lab = Lab(settings, source, target, events=Events(), state_dir=Path(app.config["STATE_DIR"]))
    if app.config["START_RECORDER"]:
        lab.run = Run(Path(app.config["RESULTS_DIR"]), "live", {"flavor_setting": settings.DB_FLAVOR})
        interval = settings.HEARTBEAT_INTERVAL_MS / 1000
        lab.recorder = LagRecorder(source, target, interval, settings.LAG_WINDOW_SECONDS, lab.run)
        lab.recorder.start()
    if app.config["START_SHAPING"]:
        platform = lab.platform = platforms.create(
            platforms.choose(settings.LAB_PLATFORM, environ), settings.COMPOSE_PROJECT_NAME, environ
        )
        platform.watch()  # the list kept current from the platform's events: a live change lists nothing
        executor = lab.executor = Executor(owns=platform.owns)
        hosted = platform.name == "docker"  # the controller enters the containers' namespaces (pid: host)
        lab.netem_available = backends.netem_available(executor) if hosted else None
        backend = backends.choose(settings.SHAPING_BACKEND, lab.netem_available, platform.name)
        if lab.run is not None and hasattr(backend, "labels"):  # chaos objects say which recording made them
            backend.labels = {"laglab.io/run": lab.run.path.name[:63]}
        lab.shaping = ShapingManager(platform, executor, backend, Path(app.config["SHAPING_STATE"]), events=lab.events)
        lab.load = LoadGenerator(platform, settings)
        lab.faults = FaultManager(platform, events=lab.events, state_path=lab.state_dir / "faults.json")
        lab.captures = Captures(platform, executor, lab.shaping, app.config["RESULTS_DIR"])
        # What a controller that died left (state/recovery.py): shaping reloaded less what expired, faults
        # undone or re-armed, an orphaned run ended; all of it on /api/health's `restart`.
        lab.restart = Restart()
        lab.shaping.start(restart=lab.restart)
        lab.faults.recover(lab.restart)
        from laglab.replicators import for_kind

        orphan.recover(
            orphan.Parts(
                lab.state_dir,
                platform,
                executor,
                lab.shaping,
                lab.problems,
                lambda kind: for_kind(kind, kind_parts(lab)),
            ),
            lab.restart,
        )
        if lab.run is not None:  # the bridge's chains on Docker; on Kubernetes each pod counts its own
            lab.counters = Counters(platform, executor, lab.run) if hosted else PodCounters(platform, lab.run)
            lab.counters.start()
        if lab.recorder is not None:
            from laglab.replicators import CLUSTERS

            lab.clusters = ClusterWatch(
                platform, settings, lab.recorder.series, CLUSTERS, lab.recorder.interval, settings.LAG_WINDOW_SECONDS,
                follow=lab.recorder.follow,
            )  # fmt: skip
            lab.clusters.start()
            lab.run_parts = run_parts(lab, platform, executor, backend)
    app.extensions[parts.KEY] = lab

    allowed_hosts = {"127.0.0.1", "localhost", "::1", "controller", settings.CONTROLLER_BIND}
    allowed_hosts |= set(filter(None, settings.CONTROLLER_HOSTS.split(",")))
    token, lab.token_origin = access.resolve_token(settings.LAB_API_TOKEN, Path(app.config["STATE_DIR"]))
    app.config["API_TOKEN"] = token
    if lab.token_origin != "LAB_API_TOKEN":  # noqa: S105 - where it came from, not the token
        errors.log.warning("no LAB_API_TOKEN: the API requires a token %s (%s)", access.shown(token), lab.token_origin)
    access.init_app(app, token, allowed_hosts)
    errors.init_app(app)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    return app


def kind_parts(lab: Lab) -> Parts:
    """What a replicator kind may use of the lab (replicators/base.py), nothing else."""
    return Parts(lab.settings, lab.source, lab.target, lab.platform, lab.recorder, lab.load)


def run_parts(lab: Lab, platform, executor: Executor, backend) -> RunParts:
    """What every scenario run drives (scenarios/run/parts.py), from the parts built above."""
    from laglab.replicators import for_kind

    described = Environment(
        platform, executor, (lab.source, lab.target), backend.name, lab.netem_available, lab.recorder.interval
    )
    return RunParts(
        shaping=lab.shaping, faults=lab.faults, captures=lab.captures, load=lab.load, events=lab.events,
        problems=lab.problems, platform=platform, executor=executor, lag=lab.recorder.feed,
        links=lab.counters.feed, nodes=lab.clusters.feed, kinds=lambda kind: for_kind(kind, kind_parts(lab)),
        describe=described.describe, verify=functools.partial(measure.verify_link, platform, executor),
        workers=functools.partial(backends.helper_pids, backend), state_dir=lab.state_dir, clock=WALL,
    )  # fmt: skip


def shutdown(app: Flask, clear_kernel: bool, run_grace: float = 20.0) -> None:
    """A stopping controller (SIGTERM): runs in progress are interrupted and their cleanup runs
    (load stopped, shaping cleared, replicator options restored, status `interrupted`), then the
    recorders and shaping stop."""
    lab = lab_of(app)
    active = [r for r in lab.runs.values() if r.busy]
    for run in active:
        run.cancel("the controller is stopping")
    deadline = time.monotonic() + run_grace
    for run in active:
        run.wait(max(0.1, deadline - time.monotonic()))
    if lab.load is not None and lab.load.running:
        lab.load.stop(wait=5)
    if lab.captures is not None:
        lab.captures.stop_all()
    if lab.faults is not None:
        try:
            lab.faults.stop()
        except Exception as error:  # shutting down: log and go on
            errors.log.error("undoing faults at exit failed: %s", error)
    if lab.counters:
        lab.counters.stop()
    if lab.clusters:
        lab.clusters.stop()
    if lab.shaping:
        lab.shaping.stop(clear_kernel=clear_kernel)
    if lab.executor:
        lab.executor.close()
    if lab.platform:
        lab.platform.unwatch()
    if lab.recorder:
        lab.recorder.stop()
