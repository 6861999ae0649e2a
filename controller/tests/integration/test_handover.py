"""Hand-overs on the real lab (issue #21): a transaction the target executed that the source never did
is a difference, and a DTLE hand-back that failed is repaired by `make up` without applying anything
twice. DTLE's part is played with SQL on the real target, as its applier writes there: each source
transaction applied under the target's own GTID, and recorded in dtle.gtid_executed_v4 in the same
transaction (job_name, source_uuid BINARY(16), gtid, gtid_set)."""

import contextlib
import uuid

import pytest

from laglab.replicators import handover
from laglab.replicators.db import connect
from laglab.replicators.native import NativeLink

from ..polling import wait_until
from .conftest import query

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = [pytest.mark.integration, pytest.mark.second_lab]

DTLE_DDL = (
    "CREATE TABLE IF NOT EXISTS dtle.gtid_executed_v4 (job_name VARCHAR(64) NOT NULL, source_uuid BINARY(16) NOT NULL,"
    " gtid BIGINT NOT NULL, gtid_set LONGTEXT, PRIMARY KEY (job_name, source_uuid, gtid))"
)


def one(conn, sql, args=None):
    rows = query(conn, sql, args)
    return rows[0] if rows else None


def replica(conn) -> dict:
    return one(conn, "SHOW REPLICA STATUS") or {}


def put_native_back(target_ep, source_ep):
    """Whatever a test left: native replication from the source's part of the target's set, no errant
    transaction, no hold, no DTLE schema."""
    dst = connect(target_ep, timeout=5, read_timeout=60)
    try:
        status = replica(dst)
        with dst.cursor() as cur:  # stopped before its set is read: a running replica would leave a hole
            cur.execute("STOP REPLICA")
        executed = one(dst, "SELECT @@GLOBAL.gtid_executed AS g")["g"]
        src = connect(source_ep, timeout=5)
        try:
            mine = one(src, "SELECT GTID_SUBTRACT(%s, @@GLOBAL.gtid_executed) AS g", (executed,))["g"]
        finally:
            src.close()
        if mine or handover.held(dst) or status.get("Replica_SQL_Running") != "Yes":
            handover.resume(dst, handover.subtract(dst, executed, mine))
        else:
            with dst.cursor() as cur:
                cur.execute("START REPLICA")
        with dst.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("DROP DATABASE IF EXISTS dtle")
    finally:
        dst.close()


def test_an_errant_transaction_on_the_target_is_a_difference(api, source_ep, target_ep, settings):
    """Checksums cannot see it (a statement that changes no row); its GTID, under the target's own
    server UUID, can. Today's check said identical: true."""
    put_native_back(target_ep, source_ep)  # an earlier test's leftovers are not this test's finding
    dst = connect(target_ep, timeout=5)
    try:
        target_uuid = one(dst, "SELECT @@server_uuid AS u")["u"]
        before = one(dst, "SELECT @@GLOBAL.gtid_executed AS g")["g"]
        with dst.cursor() as cur:  # binary-logged on the target, under its own UUID; no table changes
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{settings.LAB_DATABASE}`")
        grown = handover.subtract(dst, one(dst, "SELECT @@GLOBAL.gtid_executed AS g")["g"], before)
    finally:
        dst.close()
    # A heartbeat replicated between the two reads is in `grown` too, under the source's UUID: only the
    # target's own part is errant.
    errant = ",".join(p.strip() for p in grown.split(",") if p.strip().startswith(target_uuid + ":"))
    try:
        assert errant.startswith(target_uuid + ":")
        report = api.get("/api/consistency?timeout=60", timeout=120).json()
        assert report["identical"] is False
        assert report["gtid"]["errant"] == errant
        assert report["differences"][0].startswith(f"errant transactions on the target: {errant} (")
        assert all(t["identical"] for t in report["tables"])  # the tables alone would have said identical
    finally:
        put_native_back(target_ep, source_ep)
    after = api.get("/api/consistency?timeout=60", timeout=120).json()
    assert after["identical"] is True and after["gtid"]["errant"] == "", after["differences"]


def test_a_failed_dtle_hand_back_is_repaired_by_make_up_and_nothing_is_applied_twice(
    api, compose, source_ep, target_ep, settings
):
    """Seen with a real agent: dtle-dst killed, the hand-back failed, `make down && make up` restarted
    mysqld, which started the replica by itself; auto-positioning fetched again what DTLE had applied
    (2,016 transactions twice, silently, with idempotent row events). Here the probe's rows have a
    primary key, so a second apply is a duplicate-key error on the replica."""
    table = f"`{settings.LAB_DATABASE}`.handover_probe"
    link = NativeLink(source_ep, target_ep)
    src = connect(source_ep, timeout=5)
    dst = connect(target_ep, timeout=5, read_timeout=60)
    batch = str(uuid.uuid4())  # the probe's own source UUID: GTIDs the test knows, apart from the heartbeats
    put_native_back(target_ep, source_ep)
    try:
        with src.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL)")
        assert link.wait_target_executed(link.source_executed(), 60)

        link.stop()  # the hand-over to DTLE, as the driver does it
        link.hold()
        with src.cursor() as cur:
            for i in range(1, 21):
                cur.execute(f"SET SESSION gtid_next = '{batch}:{i}'")
                cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (i, i))
                cur.execute("SET SESSION gtid_next = 'AUTOMATIC'")
        with dst.cursor() as cur:  # DTLE applies 1-12 under the target's GTIDs, recording each
            cur.execute("CREATE DATABASE IF NOT EXISTS dtle")
            cur.execute(DTLE_DDL)
            for i in range(1, 13):
                cur.execute("BEGIN")
                cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (i, i))
                cur.execute(
                    "REPLACE INTO dtle.gtid_executed_v4 VALUES ('laglab', UNHEX(REPLACE(%s, '-', '')), %s, NULL)",
                    (batch, i),
                )
                cur.execute("COMMIT")
        dst.close()

        # The hand-back fails (dtle-dst is down); `make down && make up` restarts mysql-target.
        compose("restart", "-t", "10", "mysql-target")
        dst = wait_until(lambda: _connect(target_ep), 120, 0.5, "mysql-target back")
        status = replica(dst)
        assert (status.get("Replica_IO_Running"), status.get("Replica_SQL_Running")) == ("No", "No"), status
        assert one(dst, f"SELECT COUNT(*) AS n FROM {table}")["n"] == 12  # nothing fetched again
        assert handover.held(dst)

        setup = compose("run", "--rm", "--no-deps", "replication-setup", timeout=300)
        assert "replica resumed from DTLE's record; IO and SQL threads running" in setup.stdout, setup.stdout
        assert f"DTLE applied {batch}:1-12 beyond the replica's position" in setup.stdout, setup.stdout
        assert link.wait_target_executed(link.source_executed(), 60)
        status = replica(dst)
        assert status["Last_SQL_Errno"] == 0 and status["Replica_SQL_Running"] == "Yes", status["Last_SQL_Error"]
        rows = query(dst, f"SELECT id, v FROM {table} ORDER BY id")
        assert [(r["id"], r["v"]) for r in rows] == [(i, i) for i in range(1, 21)]
        assert not handover.held(dst)
        report = api.get("/api/consistency?timeout=60", timeout=120).json()
        assert report["identical"] is True, report["differences"]
        assert report["gtid"]["errant"] == ""  # DTLE's own GTIDs were replaced by the source's
    finally:
        for conn in (src, dst):
            with contextlib.suppress(Exception):  # dst was closed for the restart
                conn.close()
        put_native_back(target_ep, source_ep)
        cleanup = connect(source_ep, timeout=5)
        try:
            with cleanup.cursor() as cur:
                cur.execute(f"DROP TABLE IF EXISTS {table}")
        finally:
            cleanup.close()


def _connect(endpoint):
    try:
        return connect(endpoint, timeout=2, read_timeout=60)
    except Exception:
        return None
