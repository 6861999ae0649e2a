"""Profiles' replication set-ups without servers: semi-sync statements, Group Replication recovery
statements and bootstrap choice, cluster endpoints and membership rules, profile variables, the
cluster scenario's expansion and its report, the clusters API's refusals."""

import json
import shutil
import socket
from pathlib import Path

import pytest

from laglab import config
from laglab.replicators import CLUSTERS
from laglab.replicators.db import Dialect
from laglab.replicators.galera import Galera
from laglab.replicators.group_replication import GroupReplication, gtid_count, recovery_statements
from laglab.replicators.native import semi_sync_statements
from laglab.scenarios.plan import load_file
from laglab.scenarios.report import markdown as report
from laglab.scenarios.report import table

from .fakes import FakeConnection

FIXTURES = Path(__file__).parent / "fixtures"
SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def test_semi_sync_on_mysql_installs_the_plugins_then_enables():
    mysql = Dialect("mysql")
    assert semi_sync_statements(mysql, "source", True, 2500, installed=False) == [
        "INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so'",
        "SET GLOBAL rpl_semi_sync_source_enabled = 1",
        "SET GLOBAL rpl_semi_sync_source_timeout = 2500",
    ]
    assert semi_sync_statements(mysql, "replica", True, 2500, installed=True) == [
        "SET GLOBAL rpl_semi_sync_replica_enabled = 1",
        "STOP REPLICA IO_THREAD",
        "START REPLICA IO_THREAD",
    ]


def test_semi_sync_off_touches_nothing_that_was_never_installed():
    assert semi_sync_statements(Dialect("mysql"), "source", False, 10000, installed=False) == []
    assert semi_sync_statements(Dialect("mysql"), "source", False, 10000, installed=True) == [
        "SET GLOBAL rpl_semi_sync_source_enabled = 0"
    ]


def test_semi_sync_on_mariadb_is_built_in():
    mariadb = Dialect("mariadb")
    assert semi_sync_statements(mariadb, "source", True, 10000, installed=True) == [
        "SET GLOBAL rpl_semi_sync_master_enabled = 1",
        "SET GLOBAL rpl_semi_sync_master_timeout = 10000",
    ]
    assert semi_sync_statements(mariadb, "replica", False, 10000, installed=True) == [
        "SET GLOBAL rpl_semi_sync_slave_enabled = 0",
        "STOP SLAVE IO_THREAD",
        "START SLAVE IO_THREAD",
    ]
    with pytest.raises(ValueError, match="role 'primary' is not source or replica"):
        mariadb.semi_sync_names("primary")


def test_group_replication_recovery_account_is_kept_out_of_the_binary_log():
    statements = recovery_statements("repl", "pw")
    assert statements[0] == ("SET SQL_LOG_BIN = 0", None)
    assert statements[3] == ("SET SQL_LOG_BIN = 1", None)
    assert statements[1] == ("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", ("repl", "pw"))
    assert statements[4] == (
        "CHANGE REPLICATION SOURCE TO SOURCE_USER=%s, SOURCE_PASSWORD=%s FOR CHANNEL 'group_replication_recovery'",
        ("repl", "pw"),
    )


@pytest.mark.parametrize(
    ("gtids", "count"),
    [
        ("", 0),
        ("6f1a4c2e-6d1b-4b8e-9d1e-1a2b3c4d5e6f:1-5", 5),
        ("6f1a4c2e-6d1b-4b8e-9d1e-1a2b3c4d5e6f:1-5:7:9-10,\n0b7e2c1a-0000-0000-0000-000000000001:1-3", 11),
    ],
)
def test_bootstrap_choice_counts_executed_transactions(gtids, count):
    conn = FakeConnection(lambda sql, args: [{"g": gtids}])
    assert gtid_count(conn) == count
    assert conn.log == ["SELECT @@GLOBAL.gtid_executed AS g"]


def test_endpoints_inside_the_lab_and_on_published_ports():
    settings = config.load({"GALERA_NODE2_PORT": "24002"})
    inside = Galera.endpoints(settings)
    assert [(e.host, e.port) for e in inside] == [
        ("galera-node1", 3306),
        ("galera-node2", 3306),
        ("galera-node3", 3306),
    ]
    published = Galera.endpoints(settings, published=True)
    assert [(e.host, e.port, e.name) for e in published][1] == ("127.0.0.1", 24002, "galera-node2")
    assert [e.port for e in GroupReplication.endpoints(settings, published=True)] == [
        13311,
        13312,
        13313,
    ]


def test_membership_rules():
    assert GroupReplication.node_ok({"state": "ONLINE"})
    assert not GroupReplication.node_ok({"state": "RECOVERING"})
    assert Galera.node_ok({"state": "Synced", "component": "Primary", "ready": True})
    assert not Galera.node_ok({"state": "Synced", "component": "non-Primary", "ready": True})
    assert not Galera.node_ok({"state": "Donor/Desynced", "component": "Primary", "ready": True})
    assert list(CLUSTERS) == ["group-replication", "galera"]


def test_unreachable_nodes_are_reported_not_raised():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    settings = config.load({"GR_NODE1_PORT": str(port), "GR_NODE2_PORT": str(port), "GR_NODE3_PORT": str(port)})
    state = GroupReplication.status(GroupReplication.endpoints(settings, published=True), timeout=0.5)
    assert state["formed"] is False
    assert [n["reachable"] for n in state["nodes"]] == [False, False, False]
    assert all("error" in n for n in state["nodes"])


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("GALERA_SEGMENTS", "0,1", "GALERA_SEGMENTS: '0,1' must be three segment numbers 0..255, one per node, e.g. 0,0,1"),
        ("GALERA_SUSPECT_TIMEOUT", "5s", "GALERA_SUSPECT_TIMEOUT: '5s' is not an ISO 8601 duration like PT5S or PT1M30S"),
        ("GR_GROUP_NAME", "laglab", "GR_GROUP_NAME: 'laglab' is not a lower-case UUID"),
        ("GR_CONSISTENCY", "STRONG", "GR_CONSISTENCY: 'STRONG' is not one of EVENTUAL, BEFORE_ON_PRIMARY_FAILOVER, BEFORE, AFTER, BEFORE_AND_AFTER"),
        ("GALERA_SST_METHOD", "xtrabackup", "GALERA_SST_METHOD: 'xtrabackup' is not one of mariabackup, rsync"),
    ],
)  # fmt: skip
def test_profile_variables_are_validated(name, value, message):
    with pytest.raises(config.ConfigError) as caught:
        config.load({name: value})
    assert str(caught.value) == message


def test_profile_ports_count_only_when_the_profile_runs():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        settings = config.load({"GALERA_NODE3_PORT": str(port)})
        # every other published port counts as the lab's own (the lab may be running on this host)
        own = {settings.values[v.name] for v in config.VARIABLES if v.port and v.name != "GALERA_NODE3_PORT"}
        assert config.port_conflicts(settings, own_ports=own) == []
        errors = config.port_conflicts(settings, own_ports=own, profiles=("galera",))
        assert [str(e) for e in errors] == [f"GALERA_NODE3_PORT: port {port} is in use by another program"]


def test_wan_sync_cluster_expands_per_cluster_type_delay_and_threads():
    plan = load_file(SCENARIOS / "wan-sync-cluster.yaml")
    assert len(plan.points) == 2 * 3 * 6
    first = plan.points[0].scenario
    assert (first.replicator.kind, first.cluster.delay, first.load.threads) == ("galera", 0.0, 1)
    last = plan.points[-1].scenario
    assert (last.replicator.kind, last.cluster.delay, last.load.threads) == ("group-replication", 0.1, 64)
    assert last.load.queries == 500 and "char(5)" in last.load.setup.lower()
    quick = load_file(SCENARIOS / "wan-sync-cluster.yaml", quick=True)
    assert sorted({p.scenario.replicator.kind for p in quick.points}) == ["galera", "group-replication"]
    assert {p.scenario.cluster.delay for p in quick.points} == {0.1}


def test_cluster_report_from_a_stored_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "cluster-run", run)
    summary = json.loads((run / "summary.json").read_text())
    tables = table.cluster_tables(summary)
    assert sorted(tables) == ["galera", "group-replication"]
    assert tables["galera"]["threads"] == [1, 16] and tables["galera"]["delays"] == [100.0]
    text = report.render(run).read_text()
    assert "## galera: seconds per run (rows: concurrency; columns: extra delay on one node)" in text
    assert "| threads | +100 ms |" in text
    seconds = tables["group-replication"]["seconds"]
    assert f"| 16 | {table.fmt(seconds[(16, 100.0)], 2)} |" in text
    assert "same checksum on all three nodes" in text
    assert (run / "cluster.png").stat().st_size > 1000
    assert not (run / "sweep.png").exists()


def test_clusters_api_refuses_unknown_cluster(client):
    response = client.get("/api/clusters/ndb")
    assert response.status_code == 404
    assert response.json == {
        "error": "cluster: 'ndb' is not a cluster of this lab (known: group-replication, galera)",
        "status": 404,
    }
