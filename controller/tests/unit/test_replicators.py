"""DTLE and DM payloads against their documented formats (neither product can run on this project's
machines: no registry, and their images cannot be rebuilt from public packages)."""

import pytest
import yaml

from laglab.replicators import dm, dtle

SOURCE = ("mysql-source", 3306, "root", "pw")
TARGET = ("mysql-target", 3306, "root", "pw")


def test_dtle_job_pins_src_and_dest_to_their_agents():
    body = dtle.job(
        "laglab",
        ["lab"],
        SOURCE,
        TARGET,
        dtle.JobOptions(group_max_size=524288, group_timeout_ms=240, repl_chan_buffer_size=600),
    )
    job = body["Job"]
    assert job["ID"] == "laglab" and job["Datacenters"] == ["dc1"]
    src, dest = job["TaskGroups"]
    assert (src["Name"], dest["Name"]) == ("src", "dest")
    assert src["Constraints"] == [{"LTarget": "${node.unique.name}", "RTarget": "dtle-src", "Operand": "="}]
    assert dest["Constraints"][0]["RTarget"] == "dtle-dst"
    task = src["Tasks"][0]
    assert (task["Name"], task["Driver"]) == ("src", "dtle")
    config = task["Config"]
    assert config["ReplicateDoDb"] == [{"TableSchema": "lab"}]
    assert (config["GroupMaxSize"], config["GroupTimeout"], config["ReplChanBufferSize"], config["ChunkSize"]) == (
        524288,
        240,
        600,
        2000,
    )
    assert config["SrcConnectionConfig"] == {"Host": "mysql-source", "Port": 3306, "User": "root", "Password": "pw"}
    assert config["DestConnectionConfig"]["Host"] == "mysql-target"
    assert config["Gtid"] == ""
    assert dest["Tasks"][0]["Config"] == {"DestType": "mysql"}


def test_dtle_group_timeout_rule():
    assert dtle.group_timeout_for(125) == 240  # 2 x one-way - 10 ms
    assert dtle.group_timeout_for(10) == 100  # never below dtle's default


def test_dtle_agents_listen_on_all_addresses_and_advertise_their_service():
    src, dst = dtle.agent_config("dtle-src", server=True), dtle.agent_config("dtle-dst", server=False)
    assert 'nats_bind       = "0.0.0.0:8193"' in src and 'nats_advertise  = "dtle-src:8193"' in src
    assert 'api_addr        = "0.0.0.0:8190"' in src and "publish_metrics = true" in src
    assert "bootstrap_expect = 1" in src and "enabled          = true" in src
    assert "server {\n  enabled = false\n}" in dst and 'name       = "dtle-dst"' in dst
    assert 'http = "dtle-dst:4646"' in dst


def test_dm_source_and_task_documents():
    source = yaml.safe_load(dm.source_config("mysql-source", "mysql-source", 3306, "root", "pw"))
    assert source == {
        "source-id": "mysql-source",
        "enable-gtid": True,
        "from": {"host": "mysql-source", "port": 3306, "user": "root", "password": "pw"},
    }
    task = yaml.safe_load(
        dm.task_config(
            "laglab",
            "mysql-source",
            ["lab"],
            ("tidb", 4000, "root", ""),
            dm.TaskOptions(task_mode="incremental", syncer_worker_count=32),
        )
    )
    assert task["task-mode"] == "incremental"
    assert task["target-database"] == {"host": "tidb", "port": 4000, "user": "root", "password": ""}
    assert task["block-allow-list"] == {"laglab": {"do-dbs": ["lab"]}}
    assert task["syncers"]["laglab"] == {"worker-count": 32, "batch": 100}
    assert task["loaders"]["laglab"] == {"pool-size": 16}
    (instance,) = task["mysql-instances"]
    assert instance["source-id"] == "mysql-source" and instance["syncer-config-name"] == "laglab"


def test_dm_task_options_are_checked():
    import pytest

    with pytest.raises(ValueError, match="task_mode: 'sync' is not one of all, full, incremental"):
        dm.TaskOptions(task_mode="sync")
    with pytest.raises(ValueError, match="syncer_worker_count: must be at least 1"):
        dm.TaskOptions(syncer_worker_count=0)


def test_committed_agent_configs_are_the_rendered_ones():
    from pathlib import Path

    config = Path(__file__).resolve().parents[3] / "config" / "dtle"
    assert (config / "dtle-src.hcl").read_text() == dtle.agent_config("dtle-src", server=True)
    assert (config / "dtle-dst.hcl").read_text() == dtle.agent_config("dtle-dst", server=False)


@pytest.mark.parametrize(
    ("version", "current", "replicating", "expected"),
    [
        ("9.7.4", 2, True, ["SET PERSIST server_id = 3", "STOP REPLICA IO_THREAD", "START REPLICA IO_THREAD"]),
        ("8.4.6", 2, False, ["SET PERSIST server_id = 3"]),
        ("10.11.18-MariaDB", 2, True, ["SET GLOBAL server_id = 3", "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD"]),
        ("5.7.44-log", 2, True, ["SET GLOBAL server_id = 3", "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD"]),
        ("9.7.4", 3, True, []),
    ],
)
def test_each_replica_of_a_statefulset_gets_its_own_server_id(version, current, replicating, expected):
    """The pods of one StatefulSet share target.cnf (server-id 2): two replicas with one id cut each
    other off from the source, so the set-up Job gives pod k 2+k, and a receiver already connected
    asks again with it."""
    from laglab.replicators import native
    from laglab.replicators.db import Dialect

    from .fakes import FakeConnection

    def answer(sql, args):
        if "@@GLOBAL.server_id" in sql:
            return [{"id": current}]
        if sql in ("SHOW REPLICA STATUS", "SHOW SLAVE STATUS"):  # MariaDB answers both; MySQL 5.7 the second
            return [{"Replica_IO_Running": "Yes"}] if replicating else []
        return []

    conn = FakeConnection(answer)
    native.own_server_id(conn, Dialect.from_version(version), 3)
    assert [s for s in conn.log if not s.startswith(("SELECT", "SHOW"))] == expected
