"""The semi-sync profile as a user starts it (`scripts/up` with PROFILE=semi-sync): the plugins are
on and the replica acknowledges, so a commit on the source waits for the replica's ack (measured
with 100 ms of delay on everything mysql-target sends); `scripts/up` without the profile turns it off."""

import os
import statistics
import subprocess
import time

import pytest

from laglab.replicators.db import connect

from .conftest import ROOT, query


def up(profile: str = "") -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(ROOT / "scripts/up")], env={**os.environ, "PROFILE": profile}, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def source_status(source_ep) -> dict:
    conn = connect(source_ep, timeout=5)
    try:
        rows = query(conn, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_%'")
        return {r["Variable_name"]: r["Value"] for r in rows}
    finally:
        conn.close()


def commit_ms(source_ep, api, delay: str) -> float:
    """Median time of a one-row autocommit INSERT on the source while mysql-target's packets wait `delay`."""
    assert api.put("/api/shaping/mysql-target", json={"delay": delay}, timeout=60).status_code == 200
    conn = connect(source_ep, timeout=5, read_timeout=30)
    try:
        query(conn, "CREATE TABLE IF NOT EXISTS lab.semi_sync_probe (id BIGINT AUTO_INCREMENT PRIMARY KEY)")
        times = []
        for _ in range(7):
            start = time.perf_counter()
            query(conn, "INSERT INTO lab.semi_sync_probe VALUES ()")
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)
    finally:
        conn.close()
        api.delete("/api/shaping/mysql-target", timeout=60)


@pytest.fixture(scope="module")
def semi_sync_lab():
    done = up("semi-sync")
    yield done
    up()  # back to the default, asynchronous lab whatever the tests did


def test_profile_turns_semi_sync_on_and_the_replica_acknowledges(semi_sync_lab, source_ep):
    assert "semi-sync on" in semi_sync_lab.stderr
    status = source_status(source_ep)
    assert status["Rpl_semi_sync_source_status"] == "ON"
    assert status["Rpl_semi_sync_source_clients"] == "1"


def test_commit_waits_for_the_replica_ack(semi_sync_lab, source_ep, api):
    acked_before = int(source_status(source_ep)["Rpl_semi_sync_source_yes_tx"])
    waited = commit_ms(source_ep, api, "100ms")
    assert waited >= 95, f"a semi-sync commit took {waited:.1f} ms with a 100 ms delay on the replica's acks"
    assert waited < 1000, "the ack arrived (no fallback to async after the 10 s timeout)"
    assert int(source_status(source_ep)["Rpl_semi_sync_source_yes_tx"]) >= acked_before + 7


def test_without_the_profile_replication_is_asynchronous_again(semi_sync_lab, source_ep, api):
    up()
    assert source_status(source_ep)["Rpl_semi_sync_source_status"] == "OFF"
    assert commit_ms(source_ep, api, "100ms") < 50


SEMI_SYNC_SCENARIO = """
name: semi-sync-option
data: {tables: 1, rows: 100}
link: {between: [mysql-source, mysql-target], rtt: 100ms}
load: {tool: sysbench, script: oltp_insert, threads: 1, rate: 0, duration: 5s, target: mysql-source}
warmup: 1s
sweep:
  replicator.semi_sync: [false, true]
"""


def test_scenario_option_semi_sync_slows_commits_and_is_restored(api, source_ep):
    assert source_status(source_ep)["Rpl_semi_sync_source_status"] == "OFF"
    started = api.post("/api/runs", json={"scenario": SEMI_SYNC_SCENARIO}, timeout=30)
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    deadline = time.monotonic() + 300
    while (run := api.get(f"/api/runs/{run_id}").json())["step"] != "done":
        assert time.monotonic() < deadline, run
        time.sleep(1)
    assert run["status"] == "completed", run
    async_point, semi_point = run["summary"]
    assert async_point["params"] == {"replicator.semi_sync": False}
    # oltp_insert, 1 client: a semi-sync commit waits one 100 ms round trip for the replica's ack.
    assert semi_point["tps"] < 11, semi_point
    assert async_point["tps"] > 5 * semi_point["tps"], (async_point["tps"], semi_point["tps"])
    assert source_status(source_ep)["Rpl_semi_sync_source_status"] == "OFF", "restored after the run"
