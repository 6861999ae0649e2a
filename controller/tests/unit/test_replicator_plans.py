"""Each replicator kind's plan without servers, and the runner driving kinds only through their one
interface: native's exact statements for its options and its restore, a point resolved completely by
the spec, the kinds registry as the scenario schema sees it, the order of a point's steps, and a
change of kind restoring the previous kind first."""

import pytest

import laglab.scenarios.run.runner as runner
from laglab.replicators import KINDS, handover, native
from laglab.replicators.base import ClusterPlan
from laglab.replicators.db import Dialect, VersionUnsupported
from laglab.replicators.galera import Galera
from laglab.scenarios.plan import BuffersPlan, load_text
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping.params import Impairment, Request

from .fakes import FakeConnection, Spy, kind_parts, run_parts, shaping_manager


def test_native_options_are_exact_statements_on_each_server():
    assert native.option_statements(Dialect("mysql"), ("zstd", 7, True, True)) == [
        ("source", "SET GLOBAL binlog_transaction_compression = ON"),
        ("target", "STOP REPLICA"),
        (
            "target",
            "CHANGE REPLICATION SOURCE TO SOURCE_COMPRESSION_ALGORITHMS='zstd', "
            "SOURCE_ZSTD_COMPRESSION_LEVEL=7, SOURCE_SSL=1",
        ),
        ("target", "START REPLICA"),
    ]
    # MariaDB (and MySQL before 8.0.18): zlib is slave_compressed_protocol, TLS MASTER_SSL; the defaults
    # are said too, so that a point's zlib does not outlive it.
    assert native.option_statements(Dialect("mariadb"), native.DEFAULT_NETWORK) == [
        ("target", "STOP SLAVE"), ("target", "SET GLOBAL slave_compressed_protocol = 0"),
        ("target", "CHANGE MASTER TO MASTER_SSL=0"), ("target", "START SLAVE"),
    ]  # fmt: skip
    assert native.option_statements(Dialect.from_version("5.7.44-log"), ("zlib", 3, True, False)) == [
        ("target", "STOP SLAVE"), ("target", "SET GLOBAL slave_compressed_protocol = 1"),
        ("target", "CHANGE MASTER TO MASTER_SSL=1"), ("target", "START SLAVE"),
    ]  # fmt: skip
    with pytest.raises(VersionUnsupported, match=r"zstd .* needs MySQL 8.0.18 or newer; the server is MariaDB"):
        native.option_statements(Dialect("mariadb"), ("zstd", 3, False, False))
    with pytest.raises(VersionUnsupported, match=r"binlog .* needs MySQL 8.0.20 or newer; the server is MySQL 8.0.19"):
        native.option_statements(Dialect.from_version("8.0.19"), ("uncompressed", 3, False, True))


def server(name, log, version="9.7.4") -> FakeConnection:
    """A server as PyMySQL shows it: answers VERSION() and records every other statement in `log`."""

    def answer(sql, args):
        if sql == "SELECT VERSION() AS v":
            return [{"v": version}]
        log.append((name, sql))
        return []

    return FakeConnection(answer)


def test_native_restore_puts_the_labs_defaults_back_and_leaves_semi_sync_alone(monkeypatch):
    log = []
    monkeypatch.setattr(native, "connect", lambda endpoint, **kw: server(endpoint.name, log))
    native.Native(kind_parts()).restore()
    held = handover.held_query(Dialect.from_version("9.7.4"))  # asked first (#55); no row: not held
    assert log[:2] == [("mysql-target", held)] * 2, log
    assert log[2:] == [
        ("mysql-source", "SET GLOBAL binlog_transaction_compression = OFF"),
        ("mysql-target", "STOP REPLICA"),
        (
            "mysql-target",
            "CHANGE REPLICATION SOURCE TO SOURCE_COMPRESSION_ALGORITHMS='uncompressed', "
            "SOURCE_ZSTD_COMPRESSION_LEVEL=3, SOURCE_SSL=0",
        ),
        ("mysql-target", "START REPLICA"),
    ]  # semi-sync was never asked for in this run: not one statement about it


def test_the_schema_is_read_from_the_kinds():
    assert list(KINDS) == ["native", "group-replication", "galera", "dtle", "dm"]
    with pytest.raises(ScenarioError, match=r"replicator\.kind: must be one of 'native', 'group-replication'"):
        load_text("name: x\nreplicator: {kind: ndb}\n")
    with pytest.raises(ScenarioError, match=r"replicator\.group_max_size: an option of kind dtle, not native"):
        load_text("name: x\nreplicator: {group_max_size: 512}\n")
    assert load_text("name: x\nreplicator: {kind: dm}\n").scenario.link.between == KINDS["dm"].default_link


def test_a_link_point_is_resolved_completely():
    plan = (
        load_text("name: x\nlink: {rtt: 100ms, rate: 2mbit}\nload: {rate: 50, duration: 30s}\nwarmup: 5s\n")
        .points[0]
        .plan()
    )
    assert plan.shaping == (
        ("mysql-source", Request(Impairment(delay=0.05, rate=2e6), peer="mysql-target")),
        ("mysql-target", Request(Impairment(delay=0.05, rate=2e6), peer="mysql-source")),
    )
    assert (plan.verify.source, plan.verify.to, plan.verify.rtt_ms, plan.verify.rate_bits) == (
        "mysql-source", "mysql-target", 100.0, 2e6,
    )  # fmt: skip
    assert (plan.load.tool, plan.load.target, plan.load.warmup, plan.load.seconds) == (
        "sysbench",
        "mysql-source",
        5.0,
        35,
    )
    assert plan.load.profile.rate == 50 and plan.links == (
        ("mysql-source", "mysql-target"),
        ("mysql-target", "mysql-source"),
    )
    # What the replicator, the buffers and the summary get: the kind's options and the round trip, the
    # data set, the services read back, the settings recorded (#37: nothing reads the scenario again).
    assert (plan.replicator.kind, plan.replicator.rtt, plan.replicator.cluster) == ("native", 0.1, None)
    assert plan.replicator.options == native.NativeOptions() and (plan.data.tables, plan.data.rows) == (4, 10000)
    assert plan.buffers == BuffersPlan((), {}, ("mysql-source", "mysql-target", "loadgen"))
    assert (plan.number, plan.params, plan.duration, plan.timeline, plan.nodes) == (1, {}, 30.0, (), ())
    assert plan.settings["link"]["rtt"] == "100ms" and plan.settings["load"]["rate_tps"] == 50


def test_a_cluster_point_delays_one_node_and_loads_the_writer():
    plan = (
        load_text(
            "name: x\nreplicator: {kind: galera}\ncluster: {write_node: 1, delayed_node: 3, delay: 100ms}\n"
            "load: {tool: mysqlslap, threads: 8}\n"
        )
        .points[0]
        .plan()
    )
    writer, _, delayed = Galera.services()
    assert plan.shaping == ((delayed, Request(Impairment(delay=0.1))),)
    assert (plan.verify.source, plan.verify.to, plan.verify.rtt_ms) == (writer, delayed, 100.0)
    assert (plan.load.target, plan.load.warmup, plan.load.threads) == (writer, 0.0, 8)
    assert plan.replicator.cluster == ClusterPlan(writer, delayed, 100.0, None)
    assert plan.nodes == tuple(Galera.services())


class FakeReplicator:
    consistency_scope = "mysql-source -> mysql-target"
    records_lag = False  # no lag feed to wait for at the end of a window
    checks_unshaped = False

    def __init__(self, kind, calls):
        self.kind, self.calls = kind, calls

    def __getattr__(self, name):
        answers = {"window_bytes": 1000, "sample": {"delay_seconds": 1.0}, "summary": {"replicator_metrics": {}},
                   "consistency": {"identical": True, "differences": [], "gtid": None}}  # fmt: skip

        def step(*args, **kwargs):
            self.calls.append(f"{self.kind}.{name}")
            return answers.get(name)

        return step


def run_scenario(tmp_path, monkeypatch, text):
    calls = []
    made = {}
    shaping = Spy(shaping_manager(tmp_path), calls, "shaping", lambda method, args, _kw: (
        f"{args[0]} peer={args[1].peer}" if method == "put" else ""))  # fmt: skip
    parts = run_parts(
        shaping,
        verify=lambda plan: calls.append("verify") or {"ok": True},
        kinds=lambda kind: made.setdefault(kind, FakeReplicator(kind, calls)),
    )
    run = runner.ScenarioRun(parts, load_text(text), tmp_path, text)
    run.start()
    run.wait(30)
    assert run.status == "completed", run.reason
    return run, calls


def test_the_runner_drives_a_kind_through_the_interface_in_order(tmp_path, monkeypatch):
    run, calls = run_scenario(
        tmp_path, monkeypatch, "name: x\nlink: {rtt: 20ms}\nload: {tool: none, duration: 1s}\nwarmup: 0s\n"
    )
    assert calls[:8] == [
        "shaping.seed", "native.prepare", "shaping.clear", "native.apply", "native.wait_caught_up",
        "shaping.put mysql-source peer=mysql-target", "shaping.put mysql-target peer=mysql-source", "verify",
    ]  # fmt: skip
    measured = calls[8 : calls.index("native.summary")]
    assert measured[0] == "native.window_bytes" and measured[-1] == "native.window_bytes"
    assert set(measured[1:-1]) == {"native.sample"}  # sampled while the load ran (1 s)
    assert calls[calls.index("native.summary") + 1 :] == [
        "native.consistency", "shaping.clear", "shaping.seed", "native.restore",
    ]  # fmt: skip
    assert run.parts.shaping.desired.entries == {}  # the real manager's state: cleared at the end
    point = run.summary[0]
    assert point.tcp_buffers["mysql-source"] == {"wmem": "4096 16384 4194304", "rmem": "4096 131072 6291456"}
    assert point.binlog_mbit == 0.0 and point.replicator_metrics == {} and point.passed is True


def test_a_kind_that_checks_on_an_unshaped_network_gets_it_from_the_runner(tmp_path, monkeypatch):
    """DTLE and DM wait for a catch-up a shaped link would hold: the runner clears it, not the kind."""
    monkeypatch.setattr(FakeReplicator, "checks_unshaped", True)
    _, calls = run_scenario(
        tmp_path, monkeypatch, "name: x\nlink: {rtt: 20ms}\nload: {tool: none, duration: 1s}\nwarmup: 0s\n"
    )
    assert calls[calls.index("native.summary") + 1 :] == [
        "shaping.clear", "native.consistency", "shaping.clear", "shaping.seed", "native.restore",
    ]  # fmt: skip


def test_a_change_of_kind_restores_the_previous_kind_first(tmp_path, monkeypatch):
    _, calls = run_scenario(
        tmp_path,
        monkeypatch,
        "name: x\nlink: {between: [mysql-source, mysql-target]}\nload: {tool: none, duration: 1s}\nwarmup: 0s\n"
        "sweep: {replicator.kind: [native, dtle, native]}\n",
    )
    kinds = [c for c in calls if c.partition(".")[2] in ("prepare", "apply", "restore", "consistency")]
    assert kinds == [
        "native.prepare", "native.apply",
        "native.restore", "dtle.prepare", "dtle.apply",
        "dtle.restore", "native.apply",
        "native.consistency",  # dtle checks the same servers: once, by the kind in use at the end
        "native.restore", "dtle.restore",  # cleanup: every kind used, the current one first
    ]  # fmt: skip


def held_target(log, held: bool = True) -> FakeConnection:
    """A MySQL 9.7 server whose replica a failed hand-back holds: SET PERSIST_ONLY skip_replica_start = ON
    wrote it into performance_schema.persisted_variables (MySQL 8.0 Reference Manual, "The
    persisted_variables Table": VARIABLE_NAME, VARIABLE_VALUE 'ON'), which the server answers as such."""
    from laglab.replicators import handover

    def answer(sql, args):
        if sql == "SELECT VERSION() AS v":
            return [{"v": "9.7.4"}]
        if sql == handover.held_query(Dialect.from_version("9.7.4")):
            return [{"v": "ON"}] if held else []
        log.append(sql)
        return []

    return FakeConnection(answer)


def test_native_restore_never_starts_a_held_replica_and_names_the_repair(monkeypatch):
    """#55: with real DTLE agents, a run whose hand-back failed ran native's restore in its cleanup
    (STOP REPLICA; CHANGE REPLICATION SOURCE TO ...; START REPLICA) 70 ms later: the held replica
    fetched and applied DTLE's transactions 66802-68470 a second time, and /api/health said nothing.
    Now its options are set, it stays stopped, and the error carries the repair for /api/health."""
    log: list[str] = []
    monkeypatch.setattr(native, "connect", lambda endpoint, **kw: held_target(log))
    with pytest.raises(native.ReplicaHeld) as caught:
        native.Native(kind_parts()).restore()
    assert "START REPLICA" not in log and "STOP REPLICA" in log, log
    assert any(sql.startswith("CHANGE REPLICATION SOURCE TO SOURCE_COMPRESSION") for sql in log), log
    assert (caught.value.problem, caught.value.repair) == ("replica-held", "make up PROFILE=dtle")
    assert caught.value.repaired() is False  # still held: /api/health keeps the problem
    log.clear()
    monkeypatch.setattr(native, "connect", lambda endpoint, **kw: held_target(log, held=False))
    native.Native(kind_parts()).restore()  # once repaired, restore is as before
    assert log[-1] == "START REPLICA", log
