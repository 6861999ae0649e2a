"""The Flask app factory: the composition root, where the lab's parts are built and handed to what
uses them (laglab/lab.py holds them)."""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from flask import Flask

from laglab import config, errors, platforms
from laglab.api import BLUEPRINTS, access, parts
from laglab.api.parts import lab_of
from laglab.deadline import WALL
from laglab.faults import FaultManager
from laglab.lab import Lab, Netem, netem_known
from laglab.load.generator import LoadGenerator
from laglab.measurement.captures import Captures
from laglab.measurement.cluster_lag import ClusterWatch
from laglab.measurement.counters import Counters
from laglab.measurement.lag import LagRecorder
from laglab.measurement.pod_counters import PodCounters
from laglab.measurement.results import Run
from laglab.replicators.base import Parts
from laglab.replicators.db import Endpoint, lab_endpoints
from laglab.scenarios.run import measure, orphan
from laglab.scenarios.run.environment import Environment
from laglab.scenarios.run.parts import RunParts
from laglab.shaping import backends
from laglab.shaping.executor import Executor
from laglab.shaping.manager import ShapingManager
from laglab.state.events import Events
from laglab.state.problems import Problems
from laglab.state.recovery import Restart

MAX_BODY_BYTES = 1 << 20


def create_app(test_config: dict | None = None, environ=None, lab: Lab | None = None) -> Flask:
    """Defaults -> environment -> test overrides. The controller builds and starts every part of the lab
    (`build`); the unit tests pass a complete lab of their own (`lab`, from `assemble` over fakes)."""
    environ = os.environ if environ is None else environ
    app = Flask(__name__)
    app.config.from_mapping(
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
    settings = config.load(environ) if lab is None else lab.settings
    if lab is None:
        lab = build(settings, environ, Places.of(app.config))
    app.extensions[parts.KEY] = lab

    allowed_hosts = {"127.0.0.1", "localhost", "::1", "controller", settings.CONTROLLER_BIND}
    allowed_hosts |= set(filter(None, settings.CONTROLLER_HOSTS.split(",")))
    token, origin = access.resolve_token(settings.LAB_API_TOKEN, Path(app.config["STATE_DIR"]))
    app.config["API_TOKEN"], app.config["API_TOKEN_ORIGIN"] = token, origin
    if origin != "LAB_API_TOKEN":
        errors.log.warning("no LAB_API_TOKEN: the API requires a token %s (%s)", access.shown(token), origin)
    access.init_app(app, token, allowed_hosts)
    errors.init_app(app)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    return app


@dataclass(frozen=True)
class Places:
    """Where the lab keeps its files: the results folders, what outlives a crash, the shaping state."""

    results: Path
    state: Path
    shaping_state: Path

    @classmethod
    def of(cls, app_config) -> Places:
        return cls(Path(app_config["RESULTS_DIR"]), Path(app_config["STATE_DIR"]), Path(app_config["SHAPING_STATE"]))


def build(settings: config.Settings, environ, places: Places) -> Lab:
    """The controller's lab (`compose`), every part started."""
    lab = compose(settings, environ, places)
    start_shaping(lab)
    start_recording(lab)
    return lab


def compose(settings: config.Settings, environ, places: Places) -> Lab:
    """The lab the settings ask for: the platform they choose, the executor that enters its namespaces,
    the backend that fits its kernel, every part assembled over them; nothing started yet."""
    platform = platforms.create(
        platforms.choose(settings.LAB_PLATFORM, environ), settings.COMPOSE_PROJECT_NAME, environ
    )
    executor = Executor(owns=platform.owns)
    netem: Netem = "not probed"
    if platform.name == "docker":  # the controller enters the containers' namespaces (pid: host)
        netem = "available" if backends.netem_available(executor) else "missing"
    backend = backends.choose(settings.SHAPING_BACKEND, netem_known(netem), platform.name)
    return assemble(settings, lab_endpoints(settings, environ), platform, executor, backend, netem, places)


def assemble(settings: config.Settings, endpoints: tuple[Endpoint, Endpoint], platform: platforms.Platform,
             executor: Executor, backend, netem: Netem, places: Places) -> Lab:  # fmt: skip
    """Every part of the lab over the platform, executor and backend given, none of them started: the
    controller's (`build`) and the unit tests' (over fakes) are built by this one function."""
    from laglab.replicators import CLUSTERS

    source, target = endpoints
    events, problems = Events(), Problems()
    live = Run(places.results, "live", {"flavor_setting": settings.DB_FLAVOR})
    recorder = LagRecorder(source, target, settings.HEARTBEAT_INTERVAL_MS / 1000, settings.LAG_WINDOW_SECONDS, live)
    if hasattr(backend, "labels"):  # chaos objects say which recording made them
        backend.labels = {"laglab.io/run": live.path.name[:63]}
    shaping = ShapingManager(platform, executor, backend, places.shaping_state, events=events)
    load = LoadGenerator(platform, settings)
    faults = FaultManager(platform, events=events, state_path=places.state / "faults.json")
    captures = Captures(platform, executor, shaping, str(places.results))
    hosted = platform.name == "docker"  # the bridge's chains on Docker; on Kubernetes each pod counts its own
    counters = Counters(platform, executor, live) if hosted else PodCounters(platform, live)
    clusters = ClusterWatch(
        platform, settings, recorder.series, CLUSTERS, recorder.interval, settings.LAG_WINDOW_SECONDS,
        follow=recorder.follow,
    )  # fmt: skip
    kinds = functools.partial(kind_of, Parts(settings, source, target, platform, recorder, load))
    described = Environment(
        platform, executor, (source, target), backend.name, netem_known(netem),
        recorder.interval,
    )  # fmt: skip
    run_parts = RunParts(
        shaping=shaping, faults=faults, captures=captures, load=load, events=events, problems=problems,
        platform=platform, executor=executor, lag=recorder.feed, links=counters.feed, nodes=clusters.feed,
        kinds=kinds, describe=described.describe, verify=functools.partial(measure.verify_link, platform, executor),
        workers=functools.partial(backends.helper_pids, backend), state_dir=places.state, clock=WALL,
    )  # fmt: skip
    return Lab(
        settings, source, target, events, problems, places.state, live, recorder, platform, executor, netem,
        shaping, shaping.view, counters, load, faults, clusters, captures, Restart(), run_parts,
    )  # fmt: skip


def kind_of(parts: Parts, kind: str):
    """A new instance of a replicator kind, over what a kind may use of the lab (replicators/base.py
    Parts), nothing else."""
    from laglab.replicators import for_kind

    return for_kind(kind, parts)


def start_shaping(lab: Lab) -> None:
    """The platform's watch, shaping's reconciler, and what a controller that died left put right
    (state/recovery.py): shaping reloaded less what expired, faults undone or re-armed, an orphaned run
    ended; all of it on /api/health's `restart`."""
    lab.platform.watch()  # the list kept current from the platform's events: a live change lists nothing
    lab.shaping.start(restart=lab.restart)
    lab.faults.recover(lab.restart)
    orphan.recover(
        orphan.Parts(lab.state_dir, lab.platform, lab.executor, lab.shaping, lab.problems, lab.run_parts.kinds),
        lab.restart,
    )


def start_recording(lab: Lab) -> None:
    """The recorders' threads: the heartbeat and lag samples, the link counters, the clusters' members."""
    lab.recorder.start()
    lab.counters.start()
    lab.clusters.start()


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
    if lab.load.running:
        lab.load.stop(wait=5)
    lab.captures.stop_all()
    try:
        lab.faults.stop()
    except Exception as error:  # shutting down: log and go on
        errors.log.error("undoing faults at exit failed: %s", error)
    lab.counters.stop()
    lab.clusters.stop()
    lab.shaping.stop(clear_kernel=clear_kernel)
    lab.executor.close()
    lab.platform.unwatch()
    lab.recorder.stop()
