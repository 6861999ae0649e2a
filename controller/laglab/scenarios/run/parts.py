"""What a scenario run drives, named once (#52.2): the composition root (app.py) builds it from the
lab's parts, each typed and required, and hands it to every run; the unit tests build one from the
fakes of tests/unit/fakes.py. Nothing in a run reaches the lab's other parts.

The run's time is its own: every wait in it goes through `RunClock` (the run's cancel token on the
parts' clock), and every time it records comes from that clock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from laglab.deadline import Clock

if TYPE_CHECKING:
    from laglab.faults import FaultManager
    from laglab.load.generator import LoadGenerator
    from laglab.measurement.captures import Captures
    from laglab.measurement.results import Fanout
    from laglab.platforms import Platform
    from laglab.replicators.base import Replicator
    from laglab.scenarios.plan import VerifyPlan
    from laglab.shaping.executor import Executor
    from laglab.shaping.manager import ShapingManager
    from laglab.state.events import Events
    from laglab.state.problems import Problems


class Interrupted(Exception):
    """The run was cancelled: raised by its waits, so that whatever step it is in ends at once."""


@dataclass(frozen=True)
class TimelineParts:
    """What a timeline's steps change: the links (shaping, partitions, traces), the containers (faults)
    and the captures of a link."""

    shaping: ShapingManager
    faults: FaultManager
    captures: Captures
    clock: Clock


@dataclass(frozen=True)
class RunParts:
    shaping: ShapingManager
    faults: FaultManager
    captures: Captures
    load: LoadGenerator
    events: Events
    problems: Problems
    platform: Platform  # the services' containers (TCP buffers are set in their namespaces)
    executor: Executor
    lag: Fanout  # the lag recorder's samples, as they are taken
    links: Fanout  # the link counters' rows, once a second
    nodes: Fanout  # the clusters' members' lag
    kinds: Callable[[str], Replicator]  # kind -> a new instance of it (replicators.for_kind)
    describe: Callable[[], dict]  # what the run runs on (environment.json)
    verify: Callable[[VerifyPlan], dict]  # a point's link measured from inside the lab (measure.verify_link)
    workers: Callable[[], list[int]]  # the shaping workers' PIDs (their CPU is the lab's own load)
    state_dir: Path  # where a run's marker outlives the controller (orphan.py)
    clock: Clock

    @property
    def timeline(self) -> TimelineParts:
        return TimelineParts(self.shaping, self.faults, self.captures, self.clock)


class RunClock:
    """A run's clock and cancel token: its waits end at once when it is cancelled (Interrupted)."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.cancelled = threading.Event()
        self.reason = "cancelled by request"

    def time(self) -> float:
        return self.clock.time()

    def monotonic(self) -> float:
        return self.clock.monotonic()

    def cancel(self, reason: str) -> None:
        self.reason = reason
        self.cancelled.set()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Interrupted(self.reason)

    def sleep(self, seconds: float) -> None:
        """`seconds` on the run's clock, or Interrupted as soon as the run is cancelled."""
        if self.clock.wait(self.cancelled, seconds):
            raise Interrupted(self.reason)
