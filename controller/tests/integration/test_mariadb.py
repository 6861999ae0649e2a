"""The MariaDB flavour end to end: a second lab (project laglab-mariadb, its own ports) brought up
by the same `scripts/up` with DB_FLAVOR=mariadb, replicating with MASTER_USE_GTID=slave_pos."""

import os
import subprocess

import pytest

from laglab.cli.client import Client
from laglab.replicators.db import Endpoint, connect

from .conftest import ROOT, query, wait_until

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab

PORTS = {"CONTROLLER_PORT": 18080, "SOURCE_PORT": 23306, "TARGET_PORT": 23307}


@pytest.fixture(scope="module")
def mariadb_env(tmp_path_factory):
    env_file = tmp_path_factory.mktemp("mariadb") / "mariadb.env"
    env_file.write_text(
        "COMPOSE_PROJECT_NAME=laglab-mariadb\nDB_FLAVOR=mariadb\n" + "".join(f"{k}={v}\n" for k, v in PORTS.items())
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DB_FLAVOR", "COMPOSE_PROJECT_NAME", "PROFILE", *PORTS)}
    env["LAGLAB_ENV_FILE"] = str(env_file)
    return env


@pytest.fixture(scope="module")
def mariadb_lab(mariadb_env):
    env = mariadb_env
    up = subprocess.run([str(ROOT / "scripts/up")], env=env, capture_output=True, text=True, timeout=1200)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield up
    finally:
        subprocess.run([str(ROOT / "scripts/down"), "--volumes"], env=env, capture_output=True, timeout=300)


def test_mariadb_lab_replicates_and_records_lag(mariadb_lab, mariadb_env):
    assert "lab up in " in mariadb_lab.stderr
    source = connect(Endpoint("127.0.0.1", PORTS["SOURCE_PORT"], "root", "laglab", "mysql-source"), timeout=5)
    target = connect(Endpoint("127.0.0.1", PORTS["TARGET_PORT"], "root", "laglab", "mysql-target"), timeout=5)
    try:
        assert "MariaDB" in query(target, "SELECT VERSION() AS v")[0]["v"]
        status = query(target, "SHOW REPLICA STATUS")[0]
        assert status["Using_Gtid"] == "Slave_Pos"
        query(source, "CREATE TABLE lab.it_maria (id INT PRIMARY KEY)")
        query(source, "INSERT INTO lab.it_maria VALUES (1), (2), (3)")
        wait_until(
            lambda: (
                query(target, "SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_NAME='it_maria'")[0]["n"]
                and query(target, "SELECT COUNT(*) AS n FROM lab.it_maria")[0]["n"] == 3
            ),
            20,
            message="rows on the MariaDB replica",
        )
    finally:
        source.close()
        target.close()
    api = Client.from_env(mariadb_env)  # its env file's address and the token make up wrote there (#35)
    assert api.base.endswith(f":{PORTS['CONTROLLER_PORT']}") and api.token
    samples = api.get("/api/lag?seconds=2", timeout=10).json()["samples"]
    assert samples and all(s["status"] == "ok" for s in samples)
    assert max(s["lag_seconds"] for s in samples) < 0.5
    assert all(s["applier_lag_seconds"] is None for s in samples)  # no performance_schema applier timestamps
    report = api.get("/api/consistency?timeout=30", timeout=60).json()
    assert report["flavor"] == "mariadb"
    assert report["identical"] is True, report["differences"]
    assert [t["table"] for t in report["tables"]] == ["lab.it_maria"]


def test_mariadb_semi_sync_profile(mariadb_lab, mariadb_env):
    """MariaDB's built-in semi-sync (rpl_semi_sync_master/slave) through the same profile."""
    up = subprocess.run(
        [str(ROOT / "scripts/up")],
        env={**mariadb_env, "PROFILE": "semi-sync"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert up.returncode == 0, up.stderr[-3000:]
    source = connect(Endpoint("127.0.0.1", PORTS["SOURCE_PORT"], "root", "laglab", "mysql-source"), timeout=5)
    try:
        status = {
            r["Variable_name"]: r["Value"] for r in query(source, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_%'")
        }
        assert status["Rpl_semi_sync_master_status"] == "ON"
        assert status["Rpl_semi_sync_master_clients"] == "1"
        before = int(status["Rpl_semi_sync_master_yes_tx"])
        query(source, "CREATE TABLE IF NOT EXISTS lab.it_semi (id INT PRIMARY KEY)")
        query(source, "INSERT INTO lab.it_semi VALUES (1)")
        after = {
            r["Variable_name"]: r["Value"]
            for r in query(source, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_yes_tx'")
        }
        assert int(after["Rpl_semi_sync_master_yes_tx"]) >= before + 2  # both transactions acknowledged
    finally:
        source.close()
