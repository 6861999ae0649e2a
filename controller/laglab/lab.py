"""The lab's parts, built once by the app factory (app.py, the composition root) and shared by the
blueprints and the scenario runs. Parts are None when the app runs without them (unit tests:
START_RECORDER / START_SHAPING false)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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
    from laglab.state.recovery import Restart


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


@dataclass
class Lab:
    """What the blueprints and runs share. Parts are None when the app runs without them (unit tests:
    START_RECORDER / START_SHAPING false)."""

    settings: config.Settings
    source: Endpoint
    target: Endpoint
    events: Events
    problems: Problems = field(default_factory=Problems)  # what a person must repair, on /api/health
    runs: dict[str, ScenarioRunning] = field(default_factory=dict)  # scenario runs by id
    runs_lock: threading.Lock = field(default_factory=threading.Lock)  # one run at a time, checked and started as one
    run: Run | None = None  # the controller's own live results folder
    recorder: LagRecorder | None = None
    platform: platforms.Platform | None = None  # where the services run (Docker; Kubernetes: #23)
    executor: Executor | None = None
    shaping: ShapingManager | None = None
    counters: Counters | PodCounters | None = None
    load: LoadGenerator | None = None
    faults: FaultManager | None = None
    clusters: ClusterWatch | None = None  # per-node lag of the profiles' clusters
    captures: Captures | None = None  # packet captures of links (tcpdump in the namespaces)
    netem_available: bool | None = None
    state_dir: Path | None = None  # shaping.json, faults.json, run.json, api-token: what outlives a crash
    run_parts: RunParts | None = None  # what a scenario run drives (built with the recorder and shaping)
    restart: Restart | None = None  # what the start found and put right (state/recovery.py), on /api/health
    token_origin: str = ""
    checks: dict[str, threading.Lock] = field(
        default_factory=dict
    )  # long checks running (api.parts.exclusive)  # where the API's token came from (LAB_API_TOKEN, or generated: its file)
