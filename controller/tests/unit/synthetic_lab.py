"""A lab whose physics is a queue, for whole runs at virtual time (#52.5): the real ScenarioRun, its
points, timeline, knee search, recording, summary and report, over the real ShapingManager,
FaultManager, Captures and LoadGenerator on the fakes of fakes.py, with virtual time (VirtualClock), moved on by the synthetic lab itself.

What stands in for the servers and the network:
- ping and iperf3 in a service's namespace (`SyntheticExecutor`): iputils' reply lines (`64 bytes from
  10.0.0.3: icmp_seq=1 ttl=64 time=20.1 ms`, ping/ping_common.c) at the round trip the ShapingManager
  holds, none across a partition; iperf3 -J's `end.sum_received.bits_per_second` at 95 % of the rate
  in force (TCP's goodput), as the lab's verification reads them.
- sysbench in loadgen (`SyntheticPlatform.exec_stream`): prints one report line a second for `--time`
  seconds in sysbench 1.0's format (src/sysbench.c, report_intermediate: `[ 1s ] thds: 4 tps: ...
  err/s: 0.00 reconn/s: 0.00`), at `--rate` transactions a second; `pkill -TERM -x sysbench` ends it
  and, as procps' pkill does, exits 1 when nothing matched.
- the replica: applies at most what the link carries (`LINK_BYTES` per transaction through the rate
  the ShapingManager holds for mysql-source -> mysql-target, nothing across a partition); its lag is
  the one-way delay plus the backlog's age, published every half second on the lag feed as
  LagSample, and the link's bytes every second on the links feed as the counters' rows.
"""

from __future__ import annotations

import json
import threading

from laglab import config
from laglab.deadline import TimedOut, poll
from laglab.load.generator import LoadGenerator
from laglab.measurement.lag import LagSample
from laglab.measurement.results import Fanout, iso
from laglab.replicators.base import Replicator
from laglab.scenarios.run import measure
from laglab.scenarios.run.parts import RunParts
from laglab.shaping import backends
from laglab.shaping.desired import BLOCK
from laglab.shaping.manager import ShapingManager

from .fakes import DryRunExecutor, FakeExecution, FakePlatform, kind_parts, run_parts

LINK_BYTES = 500  # bytes a transaction puts on the link (binlog events and their framing)
APPLY_TPS = 5000.0  # what the replica applies on an unshaped link
TICK = 0.1  # virtual seconds the lab's time moves at a time
REAL_PER_TICK = 0.0002  # real seconds between ticks (about 500 times the wall's pace, when the host allows)


class SyntheticExecutor(DryRunExecutor):
    """The dry-run executor, whose ping and iperf3 measure the synthetic link."""

    def __init__(self, lab: SyntheticLab):
        super().__init__(dry_run=True)
        self.synthetic = lab

    def run(self, argv, netns_pid=None, check=True, timeout=None, stdin=None):
        out = super().run(argv, netns_pid, check, timeout, stdin)
        if argv[0] not in ("ping", "iperf3") or "-s" in argv:
            return out
        ends = self.synthetic.ends_of(netns_pid, argv)
        if ends is None:
            return out
        there, back = self.synthetic.link(*ends), self.synthetic.link(*reversed(ends))
        if argv[0] == "ping":
            if there[2] or back[2]:
                return ""  # a partition: no reply
            rtt = (there[0] + back[0]) * 1000 + 0.08
            return "".join(f"64 bytes from {argv[-1]}: icmp_seq={n} ttl=64 time={rtt:.3f} ms\n" for n in range(1, 21))
        rate = 0.0 if there[2] else 0.95 * (there[1] or 10e9)
        return json.dumps({"end": {"sum_received": {"bits_per_second": rate}}})


class SyntheticPlatform(FakePlatform):
    """FakePlatform whose loadgen runs a sysbench that reports on the lab's clock."""

    def __init__(self, lab: SyntheticLab):
        base = FakePlatform.running_services("mysql-source", "mysql-target", "loadgen")
        super().__init__(base.lab, base.execs, base._bridge, base.project)
        self.synthetic = lab

    def exec(self, service, argv, workdir=None, container=None):
        if service == "loadgen" and list(argv[:4]) == ["pkill", "-TERM", "-x", "sysbench"]:
            self.ran.append((service, list(argv), workdir))
            return (0, b"") if self.synthetic.stop_sysbench() else (1, b"")
        return super().exec(service, argv, workdir, container)

    def exec_stream(self, service, argv, workdir=None, container=None):
        if service == "loadgen" and argv[0] == "sysbench" and "run" in argv:
            self.running(service)
            self.ran.append((service, list(argv), workdir))
            options = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
            return FakeExecution(self.synthetic.sysbench(int(options["time"]), int(options.get("rate", 0)),
                                                        int(options.get("threads", 1))))  # fmt: skip
        return super().exec_stream(service, argv, workdir, container)


class SyntheticLab:
    def __init__(self, tmp_path, clock, fail_catch_up_at: int | None = None):
        self.clock = clock
        self.platform, self.executor = SyntheticPlatform(self), SyntheticExecutor(self)
        self.shaping = ShapingManager(
            self.platform, self.executor, backends.KernelBackend(), tmp_path / "shaping.json", None
        )
        self.load = LoadGenerator(self.platform, config.load({}), clock=clock)
        self.lag, self.links = Fanout("lag"), Fanout("links")
        self.rate = 0.0  # transactions a second the source commits now (sysbench's)
        self.backlog = 0.0  # committed on the source, not yet applied on the replica
        self._behind = 0.0  # the age of the oldest of them
        self.carried = 0  # bytes the link carried
        self.catch_ups = 0  # wait_caught_up calls, for fail_catch_up_at
        self.fail_catch_up_at = fail_catch_up_at
        self.stalled = False  # the replica applies nothing (a failed point's)
        self._sysbench_stop = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._physics, name="synthetic-lab", daemon=True)
        self._thread.start()

    def parts(self, **given) -> RunParts:
        return run_parts(self.shaping, load=self.load, lag=self.lag, links=self.links,
                         kinds=lambda kind: SyntheticReplica(self), clock=self.clock,
                         verify=lambda plan: measure.verify_link(self.platform, self.executor, plan), **given)  # fmt: skip

    def close(self) -> None:
        self._stop.set()
        self._sysbench_stop.set()
        self._thread.join(5)

    # --- the network, as the ShapingManager holds it ---
    def link(self, a: str = "mysql-source", b: str = "mysql-target") -> tuple[float, float | None, bool]:
        """(one-way delay s, rate bit/s or None, partitioned) from a to b: what a's sending side and
        b's receiving side hold for that peer (or for every peer)."""
        delay, rate, blocked = 0.0, None, False
        for entry in self.shaping.desired.planned_entries():
            mine = entry.service == a and entry.peer in (None, b) and entry.direction.sends
            theirs = entry.service == b and entry.peer in (None, a) and entry.direction.receives
            if mine or theirs:
                blocked = blocked or entry.shaping == BLOCK
                delay += entry.shaping.delay
                rate = min(rate or entry.shaping.rate, entry.shaping.rate) if entry.shaping.rate else rate
        return delay, rate, blocked

    def ends_of(self, pid, argv) -> tuple[str, str] | None:
        """(from, to) services of a ping or iperf3 client run in `pid`'s namespace."""
        by_pid = {c.pid: c.service for c in self.platform.lab.values()}
        ips = {c.ip: c.service for c in self.platform.lab.values()}
        to = next((ips[a] for a in argv if a in ips), None)
        return (by_pid[pid], to) if pid in by_pid and to else None

    # --- sysbench in loadgen ---
    def sysbench(self, seconds: int, rate: int, threads: int):
        self._sysbench_stop.clear()
        for elapsed in range(1, seconds + 1):
            with self._lock:
                self.rate = float(rate or 1000)
            if self.clock.wait(self._sysbench_stop, 1.0):
                break
            tps = float(rate or 1000)
            yield (f"[ {elapsed}s ] thds: {threads} tps: {tps:.2f} qps: {4 * tps:.2f} (r/w/o: 0.00/{4 * tps:.2f}/0.00) "
                   f"lat (ms,95%): 5.00 err/s: 0.00 reconn/s: 0.00\n").encode()  # fmt: skip
        with self._lock:
            self.rate = 0.0

    def stop_sysbench(self) -> bool:
        running = self.rate > 0
        self._sysbench_stop.set()
        return running

    # --- the replica ---
    def _physics(self) -> None:
        """The lab's time: a tick of TICK virtual seconds, then what it did to the replica (the link as the
        ShapingManager holds it at that tick), a lag sample every half second and the link's counters
        every second; TICK's worth of real time between ticks, so the other threads keep up."""
        ticks = 0
        while not self._stop.wait(REAL_PER_TICK):
            if not self.clock.tick(TICK):
                continue  # a thread of the run is working or due: time waits for it
            ticks += 1
            now, dt = self.clock.time(), TICK
            delay, rate_bits, blocked = self.link()
            capacity = (
                0.0
                if blocked or self.stalled
                else min(APPLY_TPS, rate_bits / 8 / LINK_BYTES if rate_bits else APPLY_TPS)
            )
            with self._lock:
                committed = self.rate * dt
                applied = min(self.backlog + committed, capacity * dt)
                self.backlog = max(0.0, self.backlog + committed - applied)
                self.carried += int(applied * LINK_BYTES)
                # The oldest transaction not applied yet, in a queue served in order: the backlog's age
                # at the rate it came in (or goes out, once the load stopped).
                if self.backlog <= 1e-9:
                    self.backlog, behind = 0.0, 0.0
                elif self.rate > 0 or capacity > 0:
                    behind = self.backlog / (self.rate if self.rate > 0 else capacity)
                else:
                    behind = self._behind + dt
                self._behind = behind
            if ticks % round(0.5 / TICK) == 0:
                self.lag.publish(LagSample(iso(now), round(now, 3), "ok", lag_seconds=round(delay + behind, 3),
                                           replica="mysql-target", io_running="Yes", sql_running="Yes"))  # fmt: skip
            if ticks % round(1.0 / TICK) == 0:
                self.links.publish([{"time": iso(now), "epoch": round(now, 3), "kind": "link", "service": "mysql-source",
                                     "peer": "mysql-target", "rx_bytes": 0, "tx_bytes": self.carried,
                                     "rx_packets": 0, "tx_packets": 0}])  # fmt: skip

    def caught_up(self) -> bool:
        with self._lock:
            return self.backlog == 0 and self.rate == 0


class SyntheticReplica(Replicator):
    """The lab's native replication over the synthetic link: caught up when nothing is left to apply;
    `fail_catch_up_at`: the n-th catch-up times out as Native's does (deadline.poll's TimedOut)."""

    kind = "native"

    def __init__(self, lab: SyntheticLab):
        super().__init__(kind_parts(lab.platform, lab.load))
        self.lab, self.restored = lab, 0

    def wait_caught_up(self, timeout, sleep=None):
        self.lab.catch_ups += 1
        if self.lab.catch_ups == self.lab.fail_catch_up_at:
            with self.lab._lock:  # the replica stops applying, one transaction behind: the wait runs out
                self.lab.stalled, self.lab.backlog = True, self.lab.backlog + 1
        poll(self.lab.caught_up, timeout, interval=1.0, what="the replica to catch up", sleep=sleep,
             clock=self.lab.clock)  # fmt: skip

    def window_bytes(self) -> int:
        return self.lab.carried

    def consistency(self, sleep=None) -> dict:
        """As consistency.check: the target given up to 120 s to catch up (through the run's sleep), then compared."""
        try:
            poll(self.lab.caught_up, 120, interval=1.0, what="the target", sleep=sleep, clock=self.lab.clock)
        except TimedOut:
            return {"identical": False, "differences": ["target did not execute the source's GTID set within 120s"],
                    "gtid": None}  # fmt: skip
        return {"identical": True, "differences": [], "gtid": None}

    def restore(self) -> None:
        self.restored += 1
        self.lab.stalled = False
