"""Runs a scenario plan in the controller, point after point, into one results folder.

Orchestration only: a point goes schema -> plan (plan.Point.plan) -> apply (the replicator, the
shaping) -> measure (measure.py) -> record (recording.py) -> summarise (analysis/summarise.py), over
the parts the composition root gave it (parts.RunParts) and on the run's own clock (parts.RunClock). Every
replicator kind is driven through the same interface (laglab.replicators.base); nothing here knows a
kind by name or holds SQL. After the last point the consistency check of every kind used runs.
Cleanup (load stopped, shaping cleared, every kind used restored) always runs; the run ends
`completed`, `failed` (with the reason) or `interrupted`.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
import traceback

from laglab.measurement.hostload import HostLoad
from laglab.measurement.results import Run
from laglab.scenarios.analysis import summarise
from laglab.scenarios.analysis.outcome import of_run
from laglab.scenarios.analysis.record import PointRecord
from laglab.scenarios.plan import Plan, Point, describe_point
from laglab.scenarios.report import markdown as report
from laglab.scenarios.run import files as run_files
from laglab.scenarios.run import measure
from laglab.scenarios.run.buffer_switch import BufferSwitch
from laglab.scenarios.run.kinds import RunKinds
from laglab.scenarios.run.orphan import RunMarker
from laglab.scenarios.run.parts import Interrupted, RunClock, RunParts
from laglab.scenarios.run.points import RunPoints
from laglab.scenarios.run.recording import PointRecording
from laglab.scenarios.run.timeline import EVENT_COLUMNS, TimelineRun
from laglab.shaping.plan import SEED_MAX

log = logging.getLogger("laglab.runs")
LOAD_COLUMNS = ["point", "time", "epoch", "elapsed_s", "threads", "tps", "qps", "latency_p95_ms", "errors_per_s"]
LAG_COLUMNS = [
    "point",
    "replica",
    "time",
    "epoch",
    "status",
    "lag_seconds",
    "lag_error_seconds",  # the reading's bound (half a heartbeat interval and the read's own window)
    "heartbeat_age_seconds",
    "seconds_behind_source",
    "applier_lag_seconds",
    "transit_seconds",
    "queue_seconds",
    "apply_seconds",
]
LINK_COLUMNS = ["point", "time", "epoch", "kind", "service", "peer", "rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]


class RunStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def in_progress(self) -> bool:
        return self in (RunStatus.PENDING, RunStatus.RUNNING)


class ScenarioRun:
    """One run of a plan. `start()` runs it in a thread; `cancel()` interrupts it between steps."""

    def __init__(
        self, parts: RunParts, plan: Plan, results_root, text: str, seed: int | None = None, instead: list[dict] = ()
    ):
        self.parts, self.plan = parts, plan
        self.clock = RunClock(parts.clock)  # every wait of the run, and its cancel token
        # The links' seed: asked (POST /api/runs's, else the scenario's) or drawn, and recorded either way.
        self.seed_asked = plan.scenario.seed if seed is None else seed
        self.seed = random.SystemRandom().randint(0, SEED_MAX) if self.seed_asked == "random" else self.seed_asked
        self.seed_note: str | None = None  # what the backend could not seed, in words
        meta = {"scenario": plan.scenario.name, "quick": plan.quick, "seed": self.seed, "seed_asked": self.seed_asked}
        self.run = Run(results_root, plan.scenario.name, meta)
        self.id = self.run.path.name
        self.text = text
        self._instead = list(instead)  # the pinned servers this run runs in place of (api/runs.py)
        self.status = RunStatus.PENDING
        self.reason: str | None = None
        self.point: Point | None = None  # the point being measured (a sweep point, or a search's probe)
        self.points = RunPoints(plan)
        self.knees = self.points.knees  # a search's answer per sweep point, as each one ends
        self.step = "queued"
        self.started = self.clock.time()
        self.finished: float | None = None
        self.summary: list[PointRecord] = []  # each point's record, in the order measured
        self._status_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._load_series = self.run.series("load.csv", LOAD_COLUMNS)
        self._lag_series = self.run.series("lag.csv", LAG_COLUMNS)
        self._link_series = self.run.series("links.csv", LINK_COLUMNS)
        self._event_series = self.run.series("events.csv", EVENT_COLUMNS) if plan.scenario.timeline else None
        self._timeline: TimelineRun | None = None
        self._recording: PointRecording | None = None
        self.identical: bool | None = None  # the consistency check's verdict, once it ran
        self.differences: list[str] = []  # and what it found different
        self.cleanup_errors: list[dict] = []  # {step, error, repair?}: a cleanup step that failed
        self.environment: dict = {}  # environment.json, once described
        # On disk while the run changes the lab: the next start ends it if the controller dies (orphan.py).
        self._marker = RunMarker(parts.state_dir, self.id, self.run.path)
        self._buffers = BufferSwitch(parts.platform, parts.executor, self._marker)
        self.kinds = RunKinds(parts.kinds, self._marker, self.clock)  # the replication kinds it uses

    # --- status ---
    def as_json(self) -> dict:
        elapsed = (self.finished or self.clock.time()) - self.started
        eta = max(0.0, self.plan.eta_seconds() - elapsed) if self.status == RunStatus.RUNNING else 0.0
        consistency = None if self.identical is None else {"identical": self.identical, "differences": self.differences}
        points = [p.as_json() for p in self.summary]
        return {
            "id": self.id,
            "scenario": self.plan.scenario.name,
            "status": self.status,
            "reason": self.reason,
            # with a search: the most points it can take (it usually ends sooner)
            "points": self.plan.most_points(),
            "point": None if self.point is None else self.point.index + 1,
            "point_params": None if self.point is None else self.point.params,
            "point_words": None if self.point is None else describe_point(self.point),
            "step": self.step,
            "elapsed_seconds": round(elapsed, 1),
            "eta_seconds": round(eta, 1),
            "results": f"results/{self.id}",
            "summary": points,
            "identical": self.identical,
            "cleanup_errors": self.cleanup_errors,
            "knees": self.knees,
            "seed": self.seed,
            # What the run came to, decided by outcome.py as summary.json's is (files.summary_doc).
            "outcome": of_run(
                self.status, self.reason, points, consistency, self.knees, self.plan.scenario.verdict.words()
            ).as_json(),
        }

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"run-{self.id}", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """Started and not yet done with its cleanup (an interrupted run is busy until its cleanup ends)."""
        return self.step != "done"

    def cancel(self, reason: str = "cancelled by request") -> None:
        """Interrupted from now on, whatever step it is in: a deleted run never shows `running`. Its
        thread notices at the next step and runs the cleanup."""
        with self._status_lock:
            self.clock.cancel(reason)
            if self.status.in_progress:
                self.status, self.reason = RunStatus.INTERRUPTED, reason

    def _set_status(self, status: RunStatus, reason: str | None = None) -> None:
        """A run that was interrupted stays interrupted (cancel() said so to whoever asked)."""
        with self._status_lock:
            if self.clock.cancelled.is_set() and status != RunStatus.FAILED:
                self.status, self.reason = RunStatus.INTERRUPTED, self.clock.reason
            else:
                self.status, self.reason = status, reason if reason is not None else self.reason

    def wait(self, timeout: float | None = None) -> None:
        if self._thread:
            self._thread.join(timeout)

    def _check(self, step: str) -> None:
        self.clock.check()
        self.step = step

    def _sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    # --- the run ---
    def _main(self) -> None:
        self._set_status(RunStatus.RUNNING)
        consistency_report = None
        feeds = self._feeds()
        for feed, fn in feeds:
            feed.subscribe(fn)
        try:
            # Inside the try: a full disk or an unwritable results/ fails this run, and the run still
            # ends (`done`): before, the thread died here and every later run was refused (409, #54).
            self._marker.write()
            self.run.write_json("scenario.json", {"plan": self.plan.model_dump(mode="json")})
            (self.run.path / "scenario.yaml").write_text(run_files.resolved_yaml(self.plan))
            self._check("describing the environment")
            self.environment = self.parts.describe()
            if self.plan.scenario.servers is not None:  # what it is about, beside what the servers said
                self.environment["servers_asked"] = self.plan.scenario.servers.model_dump()
                self.environment["servers_instead"] = list(self._instead)  # run on others: --on-lab-servers
            self.run.write_json("environment.json", self.environment)
            self._check("seeding the links")
            self.seed_note = self.parts.shaping.seed(self.seed)
            self.run.meta.update(seed_applies="no" if self.seed_note else "yes", seed_note=self.seed_note)
            self.run.write_json("run.json", self.run.meta)
            for point in self.points.each(self.summary):
                self.point = point
                self.parts.events.add(
                    "run",
                    f"{self.plan.scenario.name} point {point.index + 1}/{self.plan.most_points()}: {describe_point(point)}",
                )
                self.summary.append(self._run_point(point))
                self.run.write_json("summary.json", run_files.summary_doc(self, consistency_report))
            self._check("consistency check")
            consistency_report = self.kinds.consistency(self.parts.shaping.clear)
            self.identical = bool(consistency_report.get("identical"))
            self.differences = list(consistency_report.get("differences") or [])
            self._set_status(RunStatus.COMPLETED)
        except Interrupted as error:
            self._set_status(RunStatus.INTERRUPTED, str(error))
        except Exception as error:
            if self.clock.cancelled.is_set():  # what an interrupted step raised on its way out
                self._set_status(RunStatus.INTERRUPTED)
            else:
                self._set_status(RunStatus.FAILED, f"{type(error).__name__}: {error}")
                log.error("run %s failed: %s", self.id, traceback.format_exc())
                if getattr(error, "repair", None):  # a failed hand-back at any stage, not only in cleanup (#55)
                    self.parts.problems.add(getattr(error, "problem", "run"), f"run {self.id}: {error}", error.repair,
                                            getattr(error, "repaired", None))  # fmt: skip
        finally:
            self.step = "cleanup"
            for feed, fn in feeds:
                feed.unsubscribe(fn)
            self._cleanup()
            if self.status == RunStatus.FAILED and consistency_report is None and not self.cleanup_errors:
                consistency_report = self._consistency_after_failure()
            self.finished = self.clock.time()
            try:
                self.run.write_json("summary.json", run_files.summary_doc(self, consistency_report))
            except Exception as error:  # the run's status stands, and the controller takes the next run
                log.error("summary.json of %s could not be written: %s", self.id, error)
                self.cleanup_errors.append({"step": "summary.json", "error": f"{type(error).__name__}: {error}"})
            for series in (self._load_series, self._lag_series, self._link_series, self._event_series):
                if series is not None:
                    try:
                        series.close()
                    except OSError as error:  # its last rows could not be flushed (a full disk)
                        log.error("%s of %s: %s", series.path.name, self.id, error)
            try:
                report.render(self.run.path)
            except Exception as error:  # a report problem must not hide the run's own status
                log.error("report for %s failed: %s", self.id, error)
            try:
                self._marker.clear()
            except OSError as error:  # the next start ends the run again from the marker: harmless
                log.error("the run marker of %s could not be removed: %s", self.id, error)
            self.step = "done"

    def _feeds(self) -> list:
        """The recorders this run streams from, each with the subscriber that hands a sample to the
        point being recorded (samples between points are in the lab's live files only)."""
        return [
            (self.parts.lag, lambda sample: self._recording and self._recording.on_lag(sample)),
            (self.parts.links, lambda rows: self._recording and self._recording.on_links(rows)),
            (self.parts.nodes, lambda sample: self._recording and self._recording.on_node_lag(sample)),
        ]

    # --- one point ---
    def _run_point(self, point: Point) -> PointRecord:
        plan = point.plan()  # from here on, the plan alone: nothing reads the scenario again
        shaping = self.parts.shaping
        replicator = self.kinds.for_point(plan, self._check)
        self._check("clearing shaping")
        shaping.clear()
        self._check(f"applying {replicator.kind}")
        replicator.apply(plan.replicator, sleep=self._sleep)
        self._check("waiting for the replica to catch up")
        replicator.wait_caught_up(300, sleep=self._sleep)
        buffers = self._buffers.set_for(plan.buffers, self._check)
        if plan.shaping:
            self._check("applying shaping")
            for service, request in plan.shaping:
                shaping.put(service, request)
        self._check("verifying shaping")
        verification = self.parts.verify(plan.verify)
        self._check("load (warm-up)" if plan.load.warmup else "load")
        feeds = ("lag",) if replicator.records_lag else ()
        self._recording = PointRecording(
            plan.number,
            self.clock.time(),
            self._lag_series,
            self._link_series,
            links=plan.links,
            feeds=(*feeds, "links"),
            nodes=plan.nodes,
            clock=self.parts.clock,
        )

        timeline = None
        if plan.timeline:
            timeline = self._timeline = TimelineRun(
                self.parts.timeline, plan.timeline, plan.duration, plan.number, self._on_event, folder=self.run.path
            )
            timeline.prepare()

        host = HostLoad(workers=self.parts.workers)
        phase = measure.LoadPhase(self.parts.load, plan.load, plan.number, self.id, self._load_series, self.clock)
        try:
            window = phase.start()
            start = phase.warm_up(window)
            self._recording.measure_from(start)  # the window opens: what is recorded from here is the point's
            host.start()
            if timeline is not None:
                timeline.start(start)
            self._check("load (measuring)")
            window = phase.measure(window, replicator)
        finally:
            host_load = host.stop() if host.readings else None
        if timeline is not None:
            timeline.stop()  # what is still in force is undone: those events come after the window
            self._timeline = None
        self._recording.close(window.end)
        figures = self._recording.figures()
        self._recording = None
        events = timeline.events if timeline is not None else []
        for event in events:
            self._event_series.append(event)
        extra = replicator.summary(plan.replicator, window.samples)
        if buffers:
            extra = {**extra, "tcp_buffers": buffers}
        return summarise.point_result(plan, verification, window, figures, extra, events, host_load)

    def _on_event(self, event: dict) -> None:
        """A timeline event as it happens: a dashboard marker; the replica's catch-up is watched after
        a disruption ends."""
        state = f"error: {event['error']}" if event.get("error") else f"+{event['effect_ms']:g} ms"
        self.parts.events.add("timeline", f"point {event['point']} step {event['step']}: {event['text']} ({state})")
        if event.get("ends_disruption") and event.get("effect_epoch") and self._recording is not None:
            self._recording.watch_catch_up(event)

    # --- after the last point, and always ---
    def _cleanup(self) -> None:
        def unseed() -> None:  # the links draw from the host's randomness again
            self.parts.shaping.seed(None)

        steps = [self._stop_timeline, self._stop_load, self.parts.shaping.clear, unseed, self._buffers.restore]
        steps += [r.restore for r in self.kinds.ordered()]
        for step in steps:
            try:
                step()
            except Exception as error:
                log.error("cleanup step failed: %s", error)
                self._cleanup_failed(step, error)

    def _cleanup_failed(self, step, error: Exception) -> None:
        """A cleanup step that failed is in the run's result and its reason (a completed run whose
        cleanup failed is `failed`: the lab is not as the run found it), and on /api/health with its
        repair when the error names one."""
        name = getattr(step, "__qualname__", str(step))
        entry = {"step": name, "error": f"{type(error).__name__}: {error}"}
        repair = getattr(error, "repair", None)
        if repair:
            entry["repair"] = repair
            self.parts.problems.add(
                getattr(error, "problem", name), f"run {self.id}: {error}", repair, getattr(error, "repaired", None)
            )
        self.cleanup_errors.append(entry)
        if self.status == RunStatus.COMPLETED:
            self.status = RunStatus.FAILED
        reason = f"cleanup: {entry['error']}"
        self.reason = reason if not self.reason else f"{self.reason}; {reason}"

    def _consistency_after_failure(self) -> dict | None:
        """A run that failed in a point still says whether anything was lost, once its cleanup has handed
        replication back (the check needs the lab's default replication running)."""
        self.step = "consistency check (after the failure)"
        try:
            report = self.kinds.consistency(self.parts.shaping.clear)
        except Exception as error:
            log.error("consistency check after the failure of %s: %s", self.id, error)
            self.reason = f"{self.reason}; consistency check: {type(error).__name__}: {error}"
            return None
        self.identical = bool(report.get("identical"))
        self.differences = list(report.get("differences") or [])
        return report

    def _stop_timeline(self) -> None:
        """An interrupted point's timeline: undo its partitions, faults and shaping still in force, and
        keep its events (what was in force, and its undo) in events.csv as a finished point's are."""
        if self._timeline is not None:
            self._timeline.stop()
            for event in self._timeline.events:
                self._event_series.append(event)
            self._timeline = None

    def _stop_load(self) -> None:
        load = self.parts.load
        if load.running and load.owner == self.id:
            load.stop(wait=15)
        load.stop_mysqlslap(self.id)  # a mysqlslap point's exec, which no wait of the run holds
