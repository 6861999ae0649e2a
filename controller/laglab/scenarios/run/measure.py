"""A point's measuring steps: verify the shaping from inside the lab, then run the load while the
window is measured (warm-up skipped, the replicator's own figures sampled every second)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from laglab.deadline import poll
from laglab.measurement.results import iso
from laglab.platforms import PlatformError
from laglab.scenarios.plan import LoadPlan, VerifyPlan
from laglab.shaping import verify

if TYPE_CHECKING:
    from laglab.load.generator import LoadGenerator
    from laglab.platforms import Platform
    from laglab.scenarios.run.parts import RunClock
    from laglab.shaping.executor import Executor


def verify_link(platform: Platform, executor: Executor, plan: VerifyPlan) -> dict:
    """RTT (and throughput when a rate is set) from plan.source to plan.to, measured from inside the lab."""
    a, b = platform.running(plan.source, plan.to, hint="is its profile up? make up PROFILE=...")
    rtt = verify.rtt_between(platform, executor, a, b.ip, 20)
    t = plan.tolerances
    tolerance = max(t.rtt_tolerance_ms, plan.rtt_ms * t.rtt_tolerance_pct / 100)
    result = {
        "rtt_asked_ms": plan.rtt_ms,
        "rtt": rtt,
        "rtt_ok": rtt.get("median_ms") is not None and abs(rtt["median_ms"] - plan.rtt_ms) <= tolerance,
    }
    if plan.ports:
        # ICMP has no port: ping crosses a ported link unshaped, so it says nothing of the asked RTT.
        result["rtt_ok"] = None
        result["rtt_note"] = (
            f"shaped on ports {plan.ports.text()} only; the ping above crossed the link unshaped (ICMP has no "
            "port), so the asked RTT is not verified here: the replication stream's lag shows it"
        )
    if plan.rate_bits:
        mbit = plan.rate_bits / 1e6
        side: dict = {}
        if a.entered and b.entered:
            got = verify.measure_throughput(executor, a.pid, b.pid, b.ip, t.throughput_seconds, False, side=side)
        else:  # Kubernetes: iperf3 in the pods' tools containers (the link's other traffic is not counted)
            try:
                got = verify.throughput_in_pods(platform, a, b, t.throughput_seconds, False)
            except PlatformError as error:  # the run goes on; the point says why its rate is unverified
                got, result["rate_note"] = None, str(error)
        other = side.get("other_mbit")
        result.update({"rate_asked_mbit": mbit, "throughput_mbit": got, "other_traffic_mbit": other})
        result["rate_ok"] = rate_verified(mbit, got, other, t.rate_tolerance_pct)
    result["ok"] = result["rtt_ok"] is not False and result.get("rate_ok") is not False
    return result


def rate_verified(asked: float, iperf3: float | None, other: float | None, tolerance_pct: float) -> bool:
    """The shaped rate holds when iperf3 got it, or when iperf3 and the link's other traffic during the
    measurement (the replicator's own, which shares the rate: DTLE's agents exchange messages on the very
    link that is measured) add up to it. A link that carries less than asked in total still fails."""
    if iperf3 is None:
        return False
    carried = iperf3 + (other or 0.0)
    margin = asked * tolerance_pct / 100
    return abs(iperf3 - asked) <= margin or abs(carried - asked) <= margin


@dataclass
class Window:
    """What the load phase of a point measured."""

    load_start: float
    start: float = 0.0
    end: float = 0.0
    load_rows: list[dict] = field(default_factory=list)
    samples: list[tuple[float, dict]] = field(default_factory=list)  # the replicator's own figures
    bytes: int | None = None  # the replicator's byte counter over the window
    load_error: str | None = None
    load_restarts: int = 0  # load.reconnect: sysbench started again after the server dropped it
    replay: dict | None = None  # a profile's replay: its figures beside the replay's, from the binlog


class LoadPhase:
    """The point's load and its measured window, as steps the runner takes in order, each giving a
    value: `start` (the load running in its thread: the Window, its load's start) -> `warm_up` (the
    window's start, once the warm-up is over; the runner opens its recording, host load and timeline
    there) -> `measure` (the replicator sampled every second until the load ends: the Window, whole).
    Every wait is the run's (RunClock): a cancelled run ends each step at once."""

    def __init__(self, load: LoadGenerator, plan: LoadPlan, point: int, owner: str, load_series, clock: RunClock):
        self.load, self.plan, self.point, self.owner = load, plan, point, owner
        self.load_series, self.clock, self.sleep = load_series, clock, clock.sleep
        self._thread: threading.Thread | None = None
        self._replay_start = None  # a profile's replay: where its binlog began

    def start(self) -> Window:
        """The load running (a profile's replay prepared first): the window with its load's start."""
        if self.plan.tool == "profile":
            self._replay_start = self.load.prepare_replay(self.plan.profile)
        window = Window(load_start=self.clock.time())
        self._thread = threading.Thread(target=self._load, args=(window,), name=f"load-{self.owner}", daemon=True)
        self._thread.start()
        return window

    def warm_up(self, window: Window) -> float:
        """The warm-up, slept through: the measured window's start."""
        self.sleep(self.plan.warmup)
        window.start = self.clock.time()
        return window.start

    def measure(self, window: Window, replicator) -> Window:
        """The window measured until the load ends: the replicator's own figures every second, its byte
        counter at both ends, the load's error, a replay's figures read back from its binlog."""
        before = replicator.window_bytes()
        while self._thread.is_alive():
            figures = replicator.sample()
            if figures is not None:
                window.samples.append((self.clock.time(), figures))
            self.sleep(0.5 if figures is None else 1.0)
        window.end = self.clock.time()
        after = replicator.window_bytes()
        window.bytes = None if before is None or after is None else after - before
        window.load_error = self.load.error
        profile = self.plan.profile
        if self.plan.tool == "profile" and profile.replay is not None:
            window.replay = {
                "profile": profile.replay.describe(),
                "replay": self._replayed(profile, self._replay_start, window),
            }
        return window

    def _replayed(self, profile, start, window: Window) -> dict:
        """The replay's own figures, read from the binlog its server wrote (warm-up included: the
        profile's clock started with the load)."""
        if start is None:
            return {"error": "the server wrote no binlog when the replay started"}
        try:
            return self.load.replayed(profile, start, window.end - window.load_start)
        except Exception as error:  # the point keeps its other figures; the report says why
            return {"error": f"reading the replay's binlog: {error}"[:300]}

    def _keep(self, window: Window, row: dict) -> None:
        row = {"point": self.point, **row}
        window.load_rows.append(row)
        self.load_series.append(row)

    def _load(self, window: Window) -> None:
        plan, load = self.plan, self.load
        if plan.tool == "none":
            load.error = None
            try:
                self.sleep(plan.seconds)  # the run's sleep: a cancelled run ends it at once
            except Exception:  # the run was interrupted (its own wait raises too)
                return
        elif plan.tool == "mysqlslap":
            # mysqlslap runs its queries once; the point's load row is its throughput, `seconds` its time.
            load.error = None
            result = load.mysqlslap(plan.target, plan.threads, plan.queries, plan.query, plan.setup, owner=self.owner)
            if "error" in result:
                load.error = result["error"]
                return
            now = self.clock.time()
            self._keep(window, {"time": iso(now), "epoch": round(now, 3), "elapsed_s": result["seconds"],
                                "threads": plan.threads, "tps": result["qps"], "qps": result["qps"]})  # fmt: skip
        else:
            started = self.clock.monotonic()

            def left() -> float:
                return plan.seconds - (self.clock.monotonic() - started)

            def one_load() -> bool:
                """sysbench for what is left of the window; False: start it again (load.reconnect: the
                server dropped it, and more than 2 s are left)."""
                offset = round(self.clock.monotonic() - started)

                def keep(row):
                    self._keep(window, {**row, "elapsed_s": row["elapsed_s"] + offset})

                load.start(plan.profile, max(1, round(left())), on_row=keep, owner=self.owner)
                load.wait()
                again = bool(plan.reconnect and load.error and not load.stopping and left() > 2)
                window.load_restarts += again
                return not again

            interrupted = []

            def between_tries(seconds: float) -> None:  # the server is still down: again in a second
                try:
                    self.sleep(seconds)
                except Exception:  # the run's sleep raises once it is cancelled
                    interrupted.append(True)
                    raise

            try:
                poll(one_load, plan.seconds + 60, interval=1.0, what="the load", sleep=between_tries, clock=self.clock)
            except Exception:
                if not interrupted:
                    raise
            if plan.reconnect and window.load_restarts and load.error and "connect" in load.error.lower():
                load.error = None  # the last try found the server still down as the window closed
