"""Per-node lag of the profiles' clusters: a heartbeat written on the cluster's writer (the Group
Replication primary, Galera's node 1) into laglab_meta.cluster_heartbeat, read back on every other
member with its own clock (all containers share the host's), the same frontier reading as the main
recorder (laglab/measurement/lag.py). Each sample also carries the kind's own queue figures (`Cluster.queues`:
GR's certifier and applier queues and flow-control throttling, Galera's receive queue and the share
of time flow control paused replication).

`ClusterWatch` starts a recorder for a cluster whose three containers are running and stops it when
they are gone, so `make up PROFILE=galera` is all a user does. Samples go to the live lag.csv (with
their `replica`), to /api/lag?replica=<node>, /metrics and the dashboard.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

import pymysql

from laglab.measurement.lag import LagSample, Ticker, frontier, heartbeat_age, read_time, unapplied
from laglab.measurement.results import Fanout, iso
from laglab.replicators.db import META_SCHEMA, connect, further_replicas

log = logging.getLogger("laglab.measurement.cluster_lag")
TABLE = f"{META_SCHEMA}.cluster_heartbeat"


class ClusterLagRecorder:
    def __init__(
        self, kind, endpoints, interval: float, window_seconds: float, series=None, feed=None, clock=time.time
    ):
        """`clock`: the controller's clock (epoch seconds), the only one any figure is read with."""
        self.kind, self.endpoints, self.interval, self.clock = kind, endpoints, interval, clock
        self.series = series
        keep = max(10, int(window_seconds / interval))
        self.samples: dict[str, collections.deque[LagSample]] = {
            e.name: collections.deque(maxlen=keep) for e in endpoints
        }
        self.writer_name: str | None = None
        self.feed = feed if feed is not None else Fanout(f"{kind.kind} lag")
        self._written: collections.deque[tuple[int, float]] = collections.deque(maxlen=keep * 2)
        self._seq = int(time.time() * 1000)
        self._conns: dict[str, object] = {}
        self._writer_endpoint = None  # which node writes, asked once a second (Group Replication's primary)
        self._writer_at: float | None = None
        self._queues_read: dict[str, tuple[float, dict]] = {}  # member -> (when, its queue figures)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def _conn(self, endpoint):
        conn = self._conns.get(endpoint.name)
        if conn is None:
            conn = self._conns[endpoint.name] = connect(endpoint, timeout=2)
        return conn

    def _drop(self, name: str) -> None:
        self._queues_read.pop(name, None)  # read again with the next connection
        conn = self._conns.pop(name, None)
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: S110 - dropped anyway
                pass

    WRITER_CHECK = 1.0  # seconds between asking the cluster which node writes (and after any failure)

    def _writer(self):
        now = time.monotonic()
        if self._writer_at is None or now - self._writer_at >= self.WRITER_CHECK or self.writer_name is None:
            self._writer_endpoint = self.kind.writer(self.endpoints, conn_of=self._conn)
            self._writer_at = now
        return self._writer_endpoint

    def _write(self) -> None:
        writer = self._writer()
        if writer.name != self.writer_name:
            conn = self._conn(writer)
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {META_SCHEMA}")
                cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id INT PRIMARY KEY, seq BIGINT, ts DATETIME(6))")
            self.writer_name = writer.name
        with self._conn(writer).cursor() as cur:
            self._seq += 1
            # The controller's clock, as the main recorder's (lag.py): no member's clock enters a figure.
            written = round(time.time(), 6)
            cur.execute(
                f"REPLACE INTO {TABLE} (id, seq, ts) VALUES (1, %s, FROM_UNIXTIME(%s))", (self._seq, f"{written:.6f}")
            )
            self._written.append((self._seq, time.time()))

    QUEUES_EVERY = 1.0  # seconds between two readings of a member's queue figures

    def _queues(self, name: str, conn) -> dict:
        """A member's queue figures, read once a second and carried in the samples between: two status
        queries per member at every reading were most of what is left of the controller's CPU with both
        cluster profiles up (the heartbeat itself is one query)."""
        now = time.monotonic()
        last = self._queues_read.get(name)
        if last is None or now - last[0] >= self.QUEUES_EVERY:
            last = self._queues_read[name] = (now, self.kind.queues(conn))
        return last[1]

    def _read(self, endpoint) -> LagSample:
        conn = self._conn(endpoint)
        with conn.cursor() as cur:
            sent = self.clock()
            cur.execute(
                f"SELECT UNIX_TIMESTAMP(NOW(6)) AS server_now, seq, UNIX_TIMESTAMP(ts) AS ts FROM {TABLE} WHERE id = 1"
            )
            row = cur.fetchone()
            now, read_error = read_time(sent, self.clock())
        queues = self._queues(endpoint.name, conn)
        if row is None:
            return LagSample(iso(now), round(now, 6), "gap", reason=f"{endpoint.name}: no heartbeat yet", **queues)
        sample = LagSample(iso(now), round(now, 6), "ok", heartbeat_seq=int(row["seq"]), **queues)
        sample.clock_offset_seconds = round(float(row["server_now"]) - now, 6)
        sample.heartbeat_age_seconds = heartbeat_age(now, float(row["ts"]))
        lag, half_gap = frontier(now, int(row["seq"]), float(row["ts"]), unapplied(self._written, int(row["seq"])))
        sample.lag_seconds = sample.heartbeat_age_seconds if lag is None else lag
        sample.lag_error_seconds = round(read_error + half_gap, 6)
        return sample

    def tick(self) -> None:
        try:
            self._write()
            self.error = None
        except (pymysql.MySQLError, OSError, RuntimeError) as error:
            self.error = f"writer: {error}"
            if self.writer_name:
                self._drop(self.writer_name)
            self.writer_name, self._writer_at = None, None  # ask again at the next tick
        for endpoint in self.endpoints:
            if endpoint.name == self.writer_name:
                self.samples[endpoint.name].clear()  # the writer's own lag is no reading (it was once a member)
                continue
            try:
                sample = self._read(endpoint)
            except (pymysql.MySQLError, OSError) as error:
                self._drop(endpoint.name)
                now = time.time()
                sample = LagSample(iso(now), round(now, 6), "gap", reason=f"{endpoint.name}: {error}")
            if self.error and sample.status == "ok":
                sample.status, sample.reason = "gap", self.error
            sample.replica = endpoint.name
            self.samples[endpoint.name].append(sample)
            if self.series is not None:
                self.series.append(sample.as_dict())
            self.feed.publish(sample)

    def start(self) -> None:
        ticker = Ticker(self.interval, self.tick, self._stop)
        self._thread = threading.Thread(target=ticker.run, name=f"{self.kind.kind}-lag", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for name in list(self._conns):
            self._drop(name)

    def latest(self) -> dict[str, dict]:
        return {name: samples[-1].as_dict() for name, samples in self.samples.items() if samples}


class ClusterWatch:
    """Starts and stops a recorder per cluster profile as its containers come and go, and tells the
    main recorder which further replicas of the source run (a scaled mysql-target on Kubernetes)."""

    def __init__(
        self, platform, settings, series, kinds: dict, interval: float, window_seconds: float,
        check_every: float = 5.0, follow=None,
    ):  # fmt: skip
        """`series`: where the samples are written (the live run's CSVs), or None. `follow`: called at
        each check with the endpoints of the further replicas running (db.further_replicas), or None."""
        self.platform, self.settings, self.series, self.kinds = platform, settings, series, kinds
        self.follow = follow
        self.interval = max(interval, 0.1)  # three nodes: ten readings a second each is plenty
        self.window_seconds, self.check_every = window_seconds, check_every
        self.recorders: dict[str, ClusterLagRecorder] = {}
        self.feed = Fanout("cluster lag")  # every node's samples (scenario runs subscribe)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> None:
        running = {name for name, c in self.platform.list(max_age=2.0).items() if c.running}
        if self.follow is not None:
            self.follow(further_replicas(running, self.settings))
        for name, kind in self.kinds.items():
            up = all(service in running for service in kind.services())
            if up and name not in self.recorders:
                recorder = ClusterLagRecorder(kind, kind.endpoints(self.settings), self.interval,
                                              self.window_seconds, self.series, self.feed)  # fmt: skip
                recorder.start()
                self.recorders[name] = recorder
                log.info("recording per-node lag of %s", name)
            elif not up and name in self.recorders:
                self.recorders.pop(name).stop()

    def replica(self, name: str) -> collections.deque | None:
        for recorder in self.recorders.values():
            if name in recorder.samples:
                return recorder.samples[name]
        return None

    def _main(self) -> None:
        while not self._stop.is_set():
            try:
                self.check()
            except Exception as error:  # the Docker API may be slow or gone for a moment
                log.warning("cluster watch: %s", error)
            self._stop.wait(self.check_every)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="cluster-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for recorder in self.recorders.values():
            recorder.stop()
