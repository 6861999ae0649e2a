"""The lag recorder: a heartbeat written on the source, read back on the target, at a fixed rate.

Every interval the writer sets `laglab_meta.heartbeat` (seq, ts) on the source and remembers when the
write returned; half an interval later the sampler reads the row on the target. Every time is the
controller's own clock: `ts` is the controller's time of the write, and a reading's time is the middle
of its round trip, so neither server's clock enters a figure (on two hosts, or a server whose clock is
off, their difference would be added to every sample). Two readings:
- lag_seconds: how far behind the target is. Its replication frontier lies between the newest
  heartbeat it holds and the oldest one written but not yet on it; lag = the reading's time - the
  middle of those two writes' return times, and 0 when the target holds every heartbeat written so
  far, so it returns to 0 when replication catches up. lag_error_seconds bounds it: half the reading's
  round trip plus half the time between those two writes (at most half an interval).
- heartbeat_age_seconds: the reading's time - the newest heartbeat on the target (pt-heartbeat's
  reading); never below the time since the last write.
clock_offset_seconds is the target's clock minus the controller's (within half the round trip): shown,
never used. Each sample also keeps
Seconds_Behind_Source and, on MySQL, performance_schema's applier timestamps. Samples go to memory
(for /api/lag) and to results/<run>/lag.csv as they are taken. A server going away is recorded as a
gap with its reason; the recorder itself never stops.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from dataclasses import dataclass

import pymysql

from laglab.measurement.results import Fanout, Run, iso
from laglab.replicators.db import META_SCHEMA, Dialect, Endpoint, connect, replica_field, server_dialect

log = logging.getLogger("laglab.measurement.lag")

COLUMNS = [
    "replica",
    "time",
    "epoch",
    "status",
    "reason",
    "lag_seconds",
    "lag_error_seconds",
    "heartbeat_age_seconds",
    "heartbeat_seq",
    "seconds_behind_source",
    "applier_lag_seconds",
    "transit_seconds",
    "queue_seconds",
    "apply_seconds",
    "io_running",
    "sql_running",
    "clock_offset_seconds",
]


@dataclass
class LagSample:
    time: str
    epoch: float
    status: str  # "ok" or "gap"
    reason: str | None = None
    lag_seconds: float | None = None
    lag_error_seconds: float | None = None  # half the reading's round trip + half the frontier's gap
    heartbeat_age_seconds: float | None = None
    heartbeat_seq: int | None = None
    seconds_behind_source: int | None = None
    applier_lag_seconds: float | None = None
    transit_seconds: float | None = None  # newest applied transaction: original commit -> queued in the relay log
    queue_seconds: float | None = None  # queued -> apply started
    apply_seconds: float | None = None  # apply started -> ended
    io_running: str | None = None
    sql_running: str | None = None
    replica: str | None = None  # the node the sample is of (the main recorder's: mysql-target)
    # A cluster member's own queue figures (laglab.measurement.cluster_lag; None where the kind has no such figure).
    certifier_queue: int | None = None  # GR: transactions waiting for certification
    applier_queue: int | None = None  # GR: certified, waiting to be applied; Galera: wsrep_local_recv_queue
    flow_control: float | None = None  # GR: throttling active (0/1); Galera: wsrep_flow_control_paused
    clock_offset_seconds: float | None = None  # the replica's clock - the controller's (shown, never used)

    def as_dict(self) -> dict:
        # A shallow copy: every field is a plain value, and dataclasses.asdict's deep copy was a sixth
        # of the recorder's CPU at a 10 ms heartbeat.
        return dict(self.__dict__)


def heartbeat_age(target_now: float, heartbeat_ts: float) -> float:
    """Target's clock minus the newest heartbeat it holds, never negative (DATETIME(6) rounding can
    make a just-written heartbeat look a microsecond in the future)."""
    return round(max(0.0, target_now - heartbeat_ts), 6)


def frontier(
    now: float, target_seq: int, target_ts: float, written: list[tuple[int, float]]
) -> tuple[float | None, float]:
    """(lag, half the frontier's gap): `now` - the middle of (newest heartbeat on the target, oldest
    written but not on it), by their writes' return times in `written` (the row's own `target_ts` when
    the held one is no longer there); 0 when none is missing. None when nothing is known of what was
    written (no write succeeded yet)."""
    if not written:
        return None, 0.0
    held = next((t for seq, t in reversed(written) if seq <= target_seq), target_ts)
    for seq, t in written:
        if seq > target_seq:
            if t > now:  # written after the target was read
                return 0.0, 0.0
            return round(max(0.0, now - (held + t) / 2), 6), round(max(0.0, t - held) / 2, 6)
    return 0.0, 0.0


def frontier_lag(now: float, target_seq: int, target_ts: float, written: list[tuple[int, float]]) -> float | None:
    """frontier()'s lag alone."""
    return frontier(now, target_seq, target_ts, written)[0]


def unapplied(written, target_seq: int | None) -> list[tuple[int, float]]:
    """What frontier() needs of the heartbeats written (oldest first): the newest one the target holds
    and the oldest one it does not (or the newest written, when it holds them all); found from the
    newest end, so that the cost is the lag's length, not the history's (a window of 600 s keeps 6,000
    at 100 ms, 60,000 at 10 ms)."""
    if not written:
        return []
    if target_seq is None:
        return [written[0]]
    oldest_missing = None
    for seq, ts in reversed(written):
        if seq <= target_seq:
            return [(seq, ts), oldest_missing] if oldest_missing else [(seq, ts)]
        oldest_missing = (seq, ts)
    return [oldest_missing]


def read_time(sent: float, returned: float) -> tuple[float, float]:
    """(when a reading was taken, half its round trip) on the controller's clock: the server answered
    somewhere in between."""
    return (sent + returned) / 2, max(0.0, returned - sent) / 2


def applier_lag(committed: float | None, applied: float | None) -> float | None:
    """End of apply minus original commit of the newest applied transaction (MySQL 8+), or None when
    the server has not applied anything since it started (performance_schema shows zero dates)."""
    if not committed or not applied:
        return None
    return round(max(0.0, float(applied) - float(committed)), 6)


# Seconds between two readings of the replica's status and of performance_schema's applier timestamps.
# SHOW REPLICA STATUS is about sixty columns to parse (0.8 ms of CPU) and its Seconds_Behind_Source
# has a resolution of one second; the lag split needs the timestamps more often.
STATUS_EVERY = 1.0
APPLIER_EVERY = 0.1


class LagSplit:
    """Where the newest applied transaction's lag went, from performance_schema (MySQL 8+): transit
    (original commit -> end of queueing in the relay log), queue (-> start of apply) and apply (-> end).

    The queue timestamps exist only for the receiver's last queued transaction, so every sample
    remembers that one (GTID -> commit, queued). When the newest applied transaction was seen queued,
    its split is exact; otherwise its transit is that of the nearest transaction seen queued before it
    (the receiver's transit changes slowly) and the queue is what is left. The three add up to its
    end of apply - original commit."""

    def __init__(self, keep: int = 4096):
        self._queued: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()
        self._keep = keep
        self.exact = 0
        self.estimated = 0

    def observe(self, gtid: str | None, committed, queued) -> None:
        if not gtid or not committed or not queued or gtid in self._queued:
            return
        self._queued[gtid] = (float(committed), float(queued))
        while len(self._queued) > self._keep:
            self._queued.popitem(last=False)

    def split(self, gtid: str | None, committed, started, applied) -> tuple[float, float, float] | None:
        if not committed or not started or not applied:
            return None  # zero dates: nothing applied since the server started
        committed, started, applied = float(committed), float(started), float(applied)
        seen = self._queued.get(gtid or "")
        if seen is not None:
            transit = seen[1] - committed
            self.exact += 1
        else:
            # Queued in commit order: the nearest one before is found from the newest end.
            transit = next((q - c for c, q in reversed(self._queued.values()) if c <= committed), None)
            if transit is None:
                return None
            self.estimated += 1
        transit = min(max(0.0, transit), max(0.0, started - committed))
        queue = max(0.0, started - committed - transit)
        return round(transit, 6), round(queue, 6), round(max(0.0, applied - started), 6)


def make_sample(
    now: float,
    heartbeat: dict | None,
    status: dict | None,
    applier: dict | None,
    source_error: str | None,
    written: list[tuple[int, float]] | None = None,
    split: LagSplit | None = None,
    read_error: float = 0.0,
    replica: str = "mysql-target",
) -> LagSample:
    """One sample from what the target answered; `now` is when it answered, on the controller's clock
    (epoch seconds), within `read_error` (half the reading's round trip)."""
    sample = LagSample(time=iso(now), epoch=round(now, 6), status="ok")
    if status:
        sample.io_running = replica_field(status, "Replica_IO_Running")
        sample.sql_running = replica_field(status, "Replica_SQL_Running")
        behind = replica_field(status, "Seconds_Behind_Source")
        sample.seconds_behind_source = None if behind is None else int(behind)
    if applier:
        sample.applier_lag_seconds = applier_lag(applier.get("committed"), applier.get("applied"))
        if split is not None:
            split.observe(applier.get("queued_gtid"), applier.get("queued_committed"), applier.get("queued"))
            parts = split.split(applier.get("applied_gtid"), applier.get("committed"), applier.get("started"),
                                applier.get("applied"))  # fmt: skip
            if parts is not None:
                sample.transit_seconds, sample.queue_seconds, sample.apply_seconds = parts
    if heartbeat is None:
        sample.status, sample.reason = "gap", f"no heartbeat on {replica} yet"
        return sample
    sample.heartbeat_seq = int(heartbeat["seq"])
    if heartbeat.get("server_now") is not None:
        sample.clock_offset_seconds = round(float(heartbeat["server_now"]) - now, 6)
    sample.heartbeat_age_seconds = heartbeat_age(now, float(heartbeat["ts"]))
    lag, half_gap = frontier(now, sample.heartbeat_seq, float(heartbeat["ts"]), written or [])
    sample.lag_seconds = sample.heartbeat_age_seconds if lag is None else lag
    sample.lag_error_seconds = round(read_error + half_gap, 6)
    if source_error:
        sample.status, sample.reason = "gap", f"mysql-source: {source_error}"
    elif not status:
        sample.status, sample.reason = "gap", f"{replica} is not a replica"
    return sample


class Ticker:
    """Calls `fn` every `interval` seconds on a fixed schedule (no drift; late ticks are skipped)."""

    def __init__(self, interval: float, fn, stop: threading.Event, offset: float = 0.0):
        self.interval, self.fn, self.stop, self.offset = interval, fn, stop, offset

    def run(self) -> None:
        next_at = time.monotonic() + self.offset
        self.stop.wait(self.offset)
        while not self.stop.is_set():
            try:
                self.fn()
            except Exception as error:  # the recorder must outlive anything one tick does
                log.exception("%s: unexpected %s: %s", threading.current_thread().name, type(error).__name__, error)
            next_at += self.interval
            now = time.monotonic()
            if next_at < now:  # late: skip the ticks already missed
                next_at += ((now - next_at) // self.interval + 1) * self.interval
            self.stop.wait(next_at - now)


class ReplicaReader:
    """One replica's side of the recorder: its connection, the newest heartbeat it holds read on the
    controller's clock, its replication status and applier timestamps (read less often), its lag split."""

    def __init__(self, endpoint: Endpoint, interval: float, keep: int):
        self.endpoint, self.interval = endpoint, interval
        self.samples: collections.deque[LagSample] = collections.deque(maxlen=keep)
        self.conn = None
        self.dialect: Dialect | None = None
        self.split = LagSplit()
        self._status_due = self._applier_due = 0.0
        self._status: dict | None = None
        self._applier: dict | None = None

    def read(self, source_error: str | None, unapplied_of) -> LagSample:
        """A sample; `unapplied_of(seq)`: the heartbeats written after `seq` (LagRecorder._unapplied)."""
        name = self.endpoint.name
        try:
            if self.conn is None:
                self.conn = connect(self.endpoint, timeout=min(2.0, max(0.5, self.interval * 5)), tls=False)
                self.dialect = server_dialect(self.conn)
                self._status_due = self._applier_due = 0.0  # a new connection (a restarted server?) reads both now
            with self.conn.cursor() as cur:
                try:
                    # The reading's time is the controller's: the middle of this statement's round
                    # trip. The server's NOW(6) comes along only to show how far its clock is off.
                    sent = time.time()
                    cur.execute(
                        f"SELECT UNIX_TIMESTAMP(NOW(6)) AS server_now, seq, UNIX_TIMESTAMP(ts) AS ts FROM {META_SCHEMA}.heartbeat WHERE id = 1"
                    )
                    heartbeat = cur.fetchone()
                    now, read_error = read_time(sent, time.time())
                except pymysql.MySQLError as error:
                    if not error.args or error.args[0] not in (1049, 1146):
                        raise
                    heartbeat = None  # not replicated yet
                if heartbeat is None:
                    now, read_error = time.time(), 0.0
                # The replica's status and performance_schema's timestamps at most every STATUS_EVERY
                # and APPLIER_EVERY seconds: they do not need the heartbeat's resolution, and at 10 ms
                # they were most of the recorder's CPU. Samples in between carry the last ones read.
                checked = time.monotonic()
                if checked >= self._status_due:
                    self._status_due = checked + STATUS_EVERY
                    cur.execute(self.dialect.replica_status)
                    self._status = cur.fetchone()
                if checked >= self._applier_due:
                    self._applier_due = checked + APPLIER_EVERY
                    self._applier = None
                    if self.dialect.applier_timestamps:
                        cur.execute(self.dialect.applier_timestamps)
                        self._applier = cur.fetchone()
                status, applier = self._status, self._applier
            written = unapplied_of(int(heartbeat["seq"]) if heartbeat else None)
            sample = make_sample(now, heartbeat, status, applier, source_error, written, self.split, read_error, name)
        except (pymysql.MySQLError, OSError) as error:
            self.conn = _close(self.conn)
            now = time.time()
            sample = LagSample(time=iso(now), epoch=round(now, 6), status="gap", reason=f"{name}: {_describe(error)}")
        sample.replica = name
        return sample

    def close(self) -> None:
        self.conn = _close(self.conn)


class LagRecorder:
    def __init__(self, source: Endpoint, target: Endpoint, interval: float, window_seconds: int, run: Run):
        self.source, self.target = source, target
        self.interval = interval
        self.run = run
        self.samples: collections.deque[LagSample] = collections.deque(maxlen=max(10, int(window_seconds / interval)))
        self.series = run.series("lag.csv", COLUMNS)
        self._unwritable = False  # the live lag.csv refused its last row (a full disk): logged once
        self.feed = Fanout("lag")  # every sample, as it is taken (scenario runs subscribe)
        self._stop = threading.Event()
        self._seq = int(time.time() * 1000)  # increasing across controller restarts
        self._src = None
        self.source_server: Dialect | None = None  # the source as the writer found it
        self.reader = ReplicaReader(target, interval, self.samples.maxlen)
        self._further: dict[str, ReplicaReader] = {}  # further replicas (follow()), by name
        self.source_error: str | None = None
        self.writes = 0
        self._threads: list[threading.Thread] = []
        # (seq, ts) of heartbeats written, oldest first; enough to cover any lag the window can show.
        self._written: collections.deque[tuple[int, float]] = collections.deque(maxlen=self.samples.maxlen * 2)
        self._written_lock = threading.Lock()
        self._writes_paused = threading.Event()

    # --- the heartbeat writer (source) ---
    @property
    def written_seq(self) -> int:
        """The sequence number of the newest heartbeat written (or about to be)."""
        return self._seq

    @contextlib.contextmanager
    def writes_paused(self):
        """No heartbeat is written inside: a hand-over between replicators needs the source's executed
        GTID set to stand still. Samples go on (lag grows as it would)."""
        self._writes_paused.set()
        try:
            yield
        finally:
            self._writes_paused.clear()

    def _write(self) -> None:
        if self._writes_paused.is_set():
            return
        try:
            if self._src is None:
                self._src = connect(self.source, timeout=min(2.0, max(0.5, self.interval * 5)), tls=False)
                self.source_server = server_dialect(self._src)  # what it runs (laglab status says it)
            self._seq += 1
            # One statement a heartbeat (HEARTBEAT_INTERVAL_MS=10 makes it a hundred a second). The
            # row's time is the controller's clock (pt-heartbeat style readers see it); what is
            # remembered is when the write returned (committed: autocommit), on the same clock.
            written = round(time.time(), 6)
            with self._src.cursor() as cur:
                cur.execute(
                    f"REPLACE INTO {META_SCHEMA}.heartbeat (id, seq, ts) VALUES (1, %s, FROM_UNIXTIME(%s))",
                    (self._seq, f"{written:.6f}"),
                )
            returned = time.time()
            with self._written_lock:
                self._written.append((self._seq, returned))
            self.writes += 1
            self.source_error = None
        except (pymysql.MySQLError, OSError) as error:
            self.source_error = _describe(error)
            self._src = _close(self._src)
            self._stop.wait(min(1.0, self.interval * 5))

    def _unapplied(self, target_seq: int | None) -> list[tuple[int, float]]:
        """What frontier() needs of the heartbeats written (lag.unapplied)."""
        with self._written_lock:
            return unapplied(self._written, target_seq)

    # --- the sampler (target, and further replicas) ---
    def _sample(self) -> None:
        sample = self.reader.read(self.source_error, self._unapplied)
        self.samples.append(sample)
        self.feed.publish(sample)  # first: a run in progress gets its lag even when the live CSV cannot be written
        self._keep(sample)
        for reader in list(self._further.values()):  # the same heartbeat, on each further replica
            further = reader.read(self.source_error, self._unapplied)
            reader.samples.append(further)
            self._keep(further)
        if sample.status == "gap" and self.reader.conn is None:
            self._stop.wait(min(1.0, self.interval * 5))

    def _keep(self, sample) -> None:
        """The live lag.csv row; a disk that refuses it (full, read-only) is logged once, not fatal (#54:
        the sampler wrote before it published, so a run silently received no lag)."""
        try:
            self.series.append(sample.as_dict())
            self._unwritable = False
        except OSError as error:
            if not self._unwritable:
                log.error("the live lag.csv cannot be written (the samples go on): %s", error)
            self._unwritable = True

    def follow(self, endpoints: list[Endpoint]) -> None:
        """Read these further replicas of the source too (the pods of a scaled mysql-target StatefulSet
        on Kubernetes), each with its own connection; stop reading the ones no longer listed."""
        wanted = {e.name: e for e in endpoints if e.name != self.target.name}
        readers = dict(self._further)
        for name in [n for n in readers if n not in wanted or readers[n].endpoint != wanted[n]]:
            readers.pop(name).close()
        for name, endpoint in wanted.items():
            if name not in readers:
                readers[name] = ReplicaReader(endpoint, self.interval, self.samples.maxlen)
        self._further = readers  # replaced whole: the sampler iterates over a snapshot

    def replica(self, name: str) -> collections.deque | None:
        """A replica's samples: mysql-target's, or a further one's."""
        if name == self.target.name:
            return self.samples
        reader = self._further.get(name)
        return None if reader is None else reader.samples

    def servers(self) -> dict[str, str]:
        """The version each server said when the recorder connected (`MySQL 9.7.4`, `MariaDB 10.5.23`)."""
        found = {self.source.name: self.source_server, self.target.name: self.reader.dialect}
        return {name: server.describe() for name, server in found.items() if server is not None}

    @property
    def split_unavailable(self) -> str | None:
        """Why mysql-target's lag split is not measured (its server's version), or None."""
        dialect = self.reader.dialect
        return dialect.lag_split_unavailable if dialect else None

    def latest(self) -> dict[str, dict]:
        """Every replica's newest sample, by name."""
        out = {self.target.name: self.samples[-1].as_dict()} if self.samples else {}
        out.update({name: r.samples[-1].as_dict() for name, r in self._further.items() if r.samples})
        return out

    def start(self) -> None:
        for name, fn, offset in (
            ("heartbeat-writer", self._write, 0.0),
            ("lag-sampler", self._sample, self.interval / 2),
        ):
            ticker = Ticker(self.interval, fn, self._stop, offset)
            thread = threading.Thread(target=ticker.run, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self.series.close()

    @property
    def alive(self) -> bool:
        return bool(self._threads) and all(t.is_alive() for t in self._threads)


def window(samples, seconds: float, after: float = 0.0) -> list[LagSample]:
    """The samples of the last `seconds` (counted back from the newest), newer than epoch `after`."""
    listed = list(samples)
    since = (listed[-1].epoch - seconds) if listed else 0
    return [s for s in listed if s.epoch >= since and s.epoch > after]


def _describe(error: BaseException) -> str:
    if isinstance(error, pymysql.MySQLError) and error.args:
        return " ".join(str(a) for a in error.args)
    return f"{type(error).__name__}: {error}"


def _close(conn):
    if conn is not None:
        try:
            conn.close()
        except Exception:  # noqa: S110 - the connection is being dropped anyway
            pass
    return None
