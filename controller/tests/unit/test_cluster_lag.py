"""Per-node cluster lag against fake connections: the heartbeat goes to the writer only, each other
member is read on the controller's clock (its own clock only shown), its queue figures travel with the
sample, a lost member is a gap."""

import collections

import pymysql

from laglab.measurement import cluster_lag
from laglab.replicators.db import Endpoint


class FakeCursor:
    def __init__(self, conn):
        self.conn, self.row = conn, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.conn.log.append(sql.split(" ")[0])
        if self.conn.down:
            raise pymysql.err.OperationalError(2013, "Lost connection")
        if sql.startswith("SELECT UNIX_TIMESTAMP(ts)"):
            self.row = {"ts": self.conn.world["written_ts"]}
        elif sql.startswith("SELECT UNIX_TIMESTAMP(NOW(6)) AS server_now"):
            # As a server answers: its own clock (off by its skew), and the row it holds.
            skew = self.conn.world.get("skew", {}).get(self.conn.name, 0.0)
            self.row = {"server_now": self.conn.world["now"] + skew, **self.conn.world["on"][self.conn.name]}
        elif sql.startswith("REPLACE"):
            self.conn.world["seq"] = args[0]

    def fetchone(self):
        return self.row


class FakeConn:
    def __init__(self, name, world):
        self.name, self.world, self.log, self.down = name, world, [], False

    def cursor(self):
        return FakeCursor(self)

    def close(self):
        pass


class FakeKind:
    kind = "galera"

    asked = 0

    @classmethod
    def writer(cls, nodes, conn_of=None):
        cls.asked += 1
        return nodes[0]

    read = 0

    @classmethod
    def queues(cls, conn):
        cls.read += 1
        return {"applier_queue": 7, "flow_control": 0.25}


def test_each_member_is_read_against_the_writers_heartbeats(monkeypatch):
    world = {"now": 1000.0, "written_ts": 999.9, "on": {}}
    conns = {}
    monkeypatch.setattr(cluster_lag, "connect", lambda e, timeout: conns.setdefault(e.name, FakeConn(e.name, world)))
    nodes = [Endpoint(f"galera-node{n}", 3306, "root", "x", f"galera-node{n}") for n in (1, 2, 3)]
    recorder = cluster_lag.ClusterLagRecorder(FakeKind, nodes, 0.1, 60, clock=lambda: world["now"])
    recorder._seq = 10
    # node 2 holds the heartbeat just written, node 3 one written 0.5 s earlier (two behind)
    recorder._written = collections.deque([(9, 999.4), (10, 999.6)])
    world["on"] = {"galera-node2": {"seq": 11, "ts": 999.9}, "galera-node3": {"seq": 9, "ts": 999.4}}
    recorder.tick()
    assert "REPLACE" in conns["galera-node1"].log and "REPLACE" not in conns["galera-node2"].log
    latest = recorder.latest()
    assert set(latest) == {"galera-node2", "galera-node3"}, "the writer's own lag is not a reading"
    assert latest["galera-node2"]["lag_seconds"] == 0.0
    # node 3's frontier: between its newest (999.4) and the oldest it lacks (999.6): now - 999.5
    assert latest["galera-node3"]["lag_seconds"] == 0.5
    assert (latest["galera-node3"]["applier_queue"], latest["galera-node3"]["flow_control"]) == (7, 0.25)
    assert latest["galera-node3"]["replica"] == "galera-node3"
    assert latest["galera-node3"]["lag_error_seconds"] == 0.1  # half the frontier's gap; the read took no time


def test_a_member_whose_clock_is_off_reads_the_same_lag(monkeypatch):
    """Issue #23: only the controller's clock enters a figure; a member 5 s ahead (or 3 s behind) of it
    shows the same lag, and its offset beside it."""
    lags = {}
    for skew in (0.0, 5.0, -3.0):
        world = {"now": 1000.0, "skew": {"galera-node3": skew}, "on": {"galera-node3": {"seq": 9, "ts": 999.4}}}
        conns = {}
        monkeypatch.setattr(
            cluster_lag, "connect", lambda e, timeout, w=world, c=conns: c.setdefault(e.name, FakeConn(e.name, w))
        )
        nodes = [Endpoint(f"galera-node{n}", 3306, "root", "x", f"galera-node{n}") for n in (1, 3)]
        recorder = cluster_lag.ClusterLagRecorder(FakeKind, nodes, 0.1, 60, clock=lambda w=world: w["now"])
        recorder._seq = 10
        recorder._written = collections.deque([(9, 999.4), (10, 999.6)])
        recorder.tick()
        sample = recorder.latest()["galera-node3"]
        lags[skew] = sample["lag_seconds"]
        assert sample["clock_offset_seconds"] == skew
    assert lags == {0.0: 0.5, 5.0: 0.5, -3.0: 0.5}


def test_a_member_that_goes_away_is_a_gap_and_comes_back(monkeypatch):
    world = {"now": 1000.0, "written_ts": 999.9, "on": {"galera-node2": {"seq": 11, "ts": 999.9}}}
    conns = {}
    monkeypatch.setattr(cluster_lag, "connect", lambda e, timeout: conns.setdefault(e.name, FakeConn(e.name, world)))
    nodes = [Endpoint(f"galera-node{n}", 3306, "root", "x", f"galera-node{n}") for n in (1, 2)]
    recorder = cluster_lag.ClusterLagRecorder(FakeKind, nodes, 0.1, 60, clock=lambda: world["now"])
    recorder.tick()
    conns["galera-node2"].down = True
    recorder.tick()
    gap = recorder.latest()["galera-node2"]
    assert gap["status"] == "gap" and "Lost connection" in gap["reason"]
    conns.pop("galera-node2")  # a new connection once it is back
    recorder.tick()
    assert recorder.latest()["galera-node2"]["status"] == "ok"


def test_which_node_writes_is_asked_once_a_second_on_the_recorders_own_connections(monkeypatch):
    """Group Replication's primary was found by a new connection to every node at every reading (ten a
    second): most of the controller's CPU with the cluster profiles up."""
    world = {"now": 1000.0, "written_ts": 999.9, "on": {"galera-node2": {"seq": 11, "ts": 999.9}}}
    opened = []
    monkeypatch.setattr(cluster_lag, "connect", lambda e, timeout: opened.append(e.name) or FakeConn(e.name, world))
    nodes = [Endpoint(f"galera-node{n}", 3306, "root", "x", f"galera-node{n}") for n in (1, 2)]
    recorder = cluster_lag.ClusterLagRecorder(FakeKind, nodes, 0.1, 60, clock=lambda: world["now"])
    FakeKind.asked = 0
    for _ in range(10):
        recorder.tick()
    assert FakeKind.asked == 1 and sorted(opened) == ["galera-node1", "galera-node2"]
    recorder._writer_at -= recorder.WRITER_CHECK  # a second later
    recorder.tick()
    assert FakeKind.asked == 2 and len(opened) == 2


def test_queue_figures_are_read_once_a_second_and_travel_with_every_sample(monkeypatch):
    world = {"now": 1000.0, "written_ts": 999.9, "on": {"galera-node2": {"seq": 11, "ts": 999.9}}}
    monkeypatch.setattr(cluster_lag, "connect", lambda e, timeout: FakeConn(e.name, world))
    nodes = [Endpoint(f"galera-node{n}", 3306, "root", "x", f"galera-node{n}") for n in (1, 2)]
    recorder = cluster_lag.ClusterLagRecorder(FakeKind, nodes, 0.1, 60, clock=lambda: world["now"])
    FakeKind.read = 0
    for _ in range(10):
        recorder.tick()
    assert FakeKind.read == 1
    assert all(s.applier_queue == 7 and s.flow_control == 0.25 for s in recorder.samples["galera-node2"])
    recorder._queues_read["galera-node2"] = (recorder._queues_read["galera-node2"][0] - 1.0, {})
    recorder.tick()
    assert FakeKind.read == 2


def test_the_watch_tells_the_recorder_which_further_replicas_run():
    """On Kubernetes a scaled mysql-target's pods k > 0 are services mysql-target-k: the watch hands
    their endpoints (by the headless Service) to the main recorder at each check; none on Docker."""
    from laglab.platforms.base import LabContainer

    class Platform:
        services = ("mysql-source", "mysql-target", "mysql-target-2", "mysql-target-1", "loadgen", "mysql-target-x")

        def list(self, max_age=0.0):
            return {
                s: LabContainer(s, s, s, 0, "10.0.0.1", s != "mysql-target-2", entered=False) for s in self.services
            }

    class Settings:
        MYSQL_ROOT_PASSWORD = "pw"

    followed = []
    watch = cluster_lag.ClusterWatch(Platform(), Settings, None, {}, 0.1, 60, follow=followed.append)
    watch.check()
    assert followed == [[Endpoint("mysql-target-1.mysql-target", 3306, "root", "pw", "mysql-target-1")]]
    Platform.services = ("mysql-source", "mysql-target")
    watch.check()
    assert followed[-1] == []
