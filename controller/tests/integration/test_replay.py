"""#41.2-3 on the lab: a write profile replayed comes back with its shape.

A known mixed workload is written on the lab's source (small transactions of 1 to 4 rows of 100-300
bytes, 40 a second, from one connection; a batch of 6000 rows, over 1 MiB, every 10 s from another);
`laglab profile` reads the binlog it wrote (the lab's own heartbeat left out); `laglab load start
--profile` replays that profile on the same server into a binlog of its own (the test flushes the
logs between the two, so the replay's binlog holds nothing of the original); `laglab profile` reads
that one from where the replay began (`laglab load status` says where). The two profiles, read by the
server's own mysqlbinlog, agree: bytes per second and the p50, p99 and largest transaction within
10 %, and the large transactions in bursts at the same period.
"""

import json
import random
import subprocess
import threading
import time

import pytest

from tests.polling import wait_until

from .conftest import ROOT

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab

SECONDS, SMALL_PER_SECOND, BATCH_EVERY, BATCH_ROWS = 30, 40, 10, 6000
EXCLUDE = ["--exclude-table", "laglab_meta.*"]


def laglab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "laglab"), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def binlog_files(cur) -> list[str]:
    cur.execute("SHOW BINARY LOGS")
    return [row["Log_name"] for row in cur.fetchall()]


def copy_out(compose, cur, names: list[str], into) -> list:
    cur.execute("SELECT @@log_bin_basename AS b")
    folder = cur.fetchone()["b"].rsplit("/", 1)[0]
    container = compose("ps", "-q", "mysql-source").stdout.strip()
    paths = []
    for name in names:
        subprocess.run(["docker", "cp", f"{container}:{folder}/{name}", str(into / name)], check=True, timeout=60)
        paths.append(into / name)
    return paths


def write_workload(connect, table: str) -> None:
    """Small transactions on one connection, at their pace; a batch every BATCH_EVERY s on another."""
    rng = random.Random(41)
    start = time.monotonic()
    errors = []

    def batches():
        try:
            with connect() as conn, conn.cursor() as cur:
                cur.execute("SET SESSION cte_max_recursion_depth = 100000")
                for n in range(SECONDS // BATCH_EVERY):
                    time.sleep(max(0.0, start + 2 + n * BATCH_EVERY - time.monotonic()))  # the batch's moment
                    cur.execute(
                        f"INSERT INTO {table} (v, pad) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                        f"FROM s WHERE n < {BATCH_ROWS}) SELECT CONCAT('batch ', n), REPEAT('z', 200) FROM s"
                    )
        except Exception as error:
            errors.append(error)

    batch = threading.Thread(target=batches)
    batch.start()
    with connect() as conn, conn.cursor() as cur:
        for k in range(SECONDS * SMALL_PER_SECOND):
            time.sleep(max(0.0, start + k / SMALL_PER_SECOND - time.monotonic()))  # the transaction's moment
            rows = rng.randint(1, 4)
            values = ",".join(["(%s, %s)"] * rows)
            args = [x for _ in range(rows) for x in ("small", "p" * rng.randint(100, 300))]
            cur.execute(f"INSERT INTO {table} (v, pad) VALUES {values}", args)
    batch.join()
    assert not errors, errors


def within(replayed: float, original: float, share: float = 0.10) -> bool:
    return abs(replayed - original) <= share * original


def test_a_replayed_profile_has_the_original_shape(source_ep, compose, api, tmp_path):
    import pymysql

    from laglab.replicators.db import connect

    table = "lab.replay_probe"

    def conn():
        return connect(source_ep, timeout=5.0, read_timeout=120.0)

    with conn() as c, c.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(64), pad VARCHAR(400))")
        cur.execute("FLUSH BINARY LOGS")
        first = binlog_files(cur)[-1]
    write_workload(conn, table)
    with conn() as c, c.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")  # the original alone in its files
        names = binlog_files(cur)
        written = copy_out(compose, cur, names[names.index(first) : -1], tmp_path)
        cur.execute(f"DROP TABLE {table}")
    made = laglab("profile", *map(str, written), *EXCLUDE, "-o", str(tmp_path / "original.json"))
    assert made.returncode == 0, made.stdout + made.stderr
    print(made.stdout)
    original = json.loads((tmp_path / "original.json").read_text())
    assert original["large"]["count"] == SECONDS // BATCH_EVERY, original["large"]
    # A batch commits once it has run (a few hundred ms, longer on a busy host): its period is BATCH_EVERY
    # give or take that time's variation.
    assert abs(original["large"]["period_seconds"] - BATCH_EVERY) <= 1.0, original["large"]

    started = laglab("load", "start", "--profile", str(tmp_path / "original.json"), "--seconds",
                     str(original["span_seconds"]), "--json")  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    begun = json.loads(started.stdout)["profile"]["replay"]["binlog_start"]
    try:
        wait_until(lambda: not api.get("/api/load").json()["running"], SECONDS * 3, 0.5, "the replay's end")
    finally:
        laglab("load", "stop")
    status = api.get("/api/load").json()
    assert status["error"] is None, status
    try:
        with conn() as c, c.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
            names = binlog_files(cur)
            (tmp_path / "replay").mkdir()
            replay_files = copy_out(compose, cur, names[names.index(begun["file"]) : -1], tmp_path / "replay")
    except pymysql.MySQLError as error:
        raise AssertionError(f"reading the replay's binlog: {error}") from None
    again = laglab("profile", *map(str, replay_files), *EXCLUDE, "--start-position", str(begun["position"]),
                   "-o", str(tmp_path / "replayed.json"))  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    print(again.stdout)
    replayed = json.loads((tmp_path / "replayed.json").read_text())

    o, r = original["transaction_bytes"], replayed["transaction_bytes"]
    assert within(replayed["bytes_per_second"], original["bytes_per_second"]), (original, replayed)
    for q in ("p50", "p99", "max"):
        assert within(r[q], o[q]), (q, o, r)
    assert replayed["large"]["count"] == original["large"]["count"], replayed["large"]
    assert within(replayed["large"]["period_seconds"], original["large"]["period_seconds"]), replayed["large"]
    assert within(replayed["transactions"], original["transactions"]), (
        original["transactions"],
        replayed["transactions"],
    )
