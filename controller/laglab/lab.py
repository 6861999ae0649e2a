"""The lab's parts, each typed and required (#52.2): built once by the composition root (app.py:
`build` for the controller, `assemble` from given platform, executor and backend for the unit tests'
fakes) and shared by the blueprints. Nothing below the HTTP edge takes the whole Lab: a scenario run
gets `run_parts`, a replicator kind its own Parts, each manager the collaborators it uses."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from laglab import config
from laglab.replicators.db import Endpoint
from laglab.state.events import Events
from laglab.state.problems import Problems

if TYPE_CHECKING:
    from laglab import platforms
    from laglab.faults import FaultManager
    from laglab.load.generator import LoadGenerator
    from laglab.measurement.captures import Captures
    from laglab.measurement.cluster_lag import ClusterWatch
    from laglab.measurement.counters import Counters
    from laglab.measurement.lag import LagRecorder
    from laglab.measurement.pod_counters import PodCounters
    from laglab.measurement.results import Run
    from laglab.scenarios.run.parts import RunParts
    from laglab.shaping.executor import Executor
    from laglab.shaping.manager import ShapingManager
    from laglab.shaping.present import ShapingView
    from laglab.state.recovery import Restart

# The kernel's netem as the controller found it: probed where it enters the containers' namespaces
# (Docker), "not probed" where it shapes through an operator (Kubernetes: Chaos Mesh, the shaper).
Netem = Literal["available", "missing", "not probed"]


def netem_known(netem: Netem) -> bool | None:
    """As the API and environment.json say it: true, false, or null where it was not probed."""
    return {"available": True, "missing": False}.get(netem)


class ScenarioRunning(Protocol):
    """What the lab's users (the API, the app's shutdown, /metrics) need of a scenario run; the runner's
    ScenarioRun is one. Declared here so that the lab does not import the runner that takes the lab."""

    id: str
    status: str

    @property
    def busy(self) -> bool: ...

    def cancel(self, reason: str = ...) -> None: ...

    def wait(self, timeout: float | None = None) -> None: ...

    def as_json(self) -> dict: ...


@dataclass(frozen=True)
class Lab:
    """What the blueprints share, every part present: a controller that cannot build one does not start
    (ConfigError, exit 2), and the unit tests pass a complete one built from fakes."""

    settings: config.Settings
    source: Endpoint
    target: Endpoint
    events: Events
    problems: Problems  # what a person must repair, on /api/health
    state_dir: Path  # shaping.json, faults.json, run.json, api-token: what outlives a crash
    run: Run  # the controller's own live results folder
    recorder: LagRecorder
    platform: platforms.Platform  # where the services run (Docker; Kubernetes: #23)
    executor: Executor
    netem: Netem
    shaping: ShapingManager
    shaping_view: ShapingView  # shaping's read side (shaping/present.py): what the API and /metrics read
    counters: Counters | PodCounters  # the bridge's chains on Docker; on Kubernetes each pod counts its own
    load: LoadGenerator
    faults: FaultManager
    clusters: ClusterWatch  # per-node lag of the profiles' clusters
    captures: Captures  # packet captures of links (tcpdump in the namespaces)
    restart: Restart  # what the start found and put right (state/recovery.py), on /api/health
    run_parts: RunParts  # what a scenario run drives
    runs: dict[str, ScenarioRunning] = field(default_factory=dict)  # scenario runs by id
    runs_lock: threading.Lock = field(default_factory=threading.Lock)  # one run at a time, checked and started as one
    checks: dict[str, threading.Lock] = field(default_factory=dict)  # long checks running (api.parts.exclusive)
