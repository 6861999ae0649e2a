"""#41.1 on the lab: `laglab profile` on a binlog the lab's source wrote (MySQL 9.7, decoded by its own
mysqlbinlog), for a workload the test knows: 30 single-row transactions and two batches of 6000 rows
(each over 1 MiB), into a table of its own; the profile's figures for that table are what was written.
And the decoder's refusals, through the command, for a text file and a truncated binlog."""

import json
import subprocess

import pytest

from .conftest import ROOT

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab

SMALL, BATCHES, BATCH_ROWS = 30, 2, 6000


def laglab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "laglab"), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_a_profile_of_the_sources_binlog_has_the_workload_written(source, compose, settings, tmp_path):
    table = f"{settings.LAB_DATABASE}.profile_probe"
    with source.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(64), pad CHAR(200))")
        cur.execute("FLUSH BINARY LOGS")  # the workload alone (and the heartbeat's writes) in the next file
        cur.execute("SELECT @@log_bin_basename")
        basename = cur.fetchone()
        for n in range(SMALL):
            cur.execute(f"INSERT INTO {table} (v, pad) VALUES (%s, 'p')", (f"small {n}",))
        cur.execute("SET SESSION cte_max_recursion_depth = 100000")
        for _ in range(BATCHES):
            cur.execute(f"INSERT INTO {table} (v, pad) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                        f"FROM s WHERE n < {BATCH_ROWS}) SELECT CONCAT('batch ', n), REPEAT('z', 200) FROM s")  # fmt: skip
        cur.execute("SHOW BINARY LOGS")
        written = [row for row in cur.fetchall()][-1]
        cur.execute("FLUSH BINARY LOGS")
        cur.execute(f"DROP TABLE {table}")
    name = written["Log_name"] if isinstance(written, dict) else written[0]
    folder = (basename["@@log_bin_basename"] if isinstance(basename, dict) else basename[0]).rsplit("/", 1)[0]
    container = compose("ps", "-q", "mysql-source").stdout.strip()
    subprocess.run(["docker", "cp", f"{container}:{folder}/{name}", str(tmp_path / name)], check=True, timeout=60)

    done = laglab("profile", str(tmp_path / name), "-o", str(tmp_path / "profile.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout)
    made = json.loads((tmp_path / "profile.json").read_text())
    (probe,) = [t for t in made["tables"] if t["name"] == table]
    assert probe["rows"] == SMALL + BATCHES * BATCH_ROWS and probe["kinds"] == {"insert": SMALL + BATCHES * BATCH_ROWS}
    assert probe["columns"] == 3 and 200 <= probe["row_bytes"] <= 300, probe  # CHAR(200) + a short VARCHAR + INT
    assert made["large"]["count"] == BATCHES and made["format"] == "row", made["large"]
    assert made["transaction_bytes"]["max"] >= BATCH_ROWS * 200 and made["transaction_rows"]["max"] == BATCH_ROWS
    assert made["transactions"] >= SMALL + BATCHES + 1  # the heartbeat writes beside them
    assert any(v.startswith("9.") for v in made["servers"]), made["servers"]
    assert "batch" not in (tmp_path / "profile.json").read_text()  # no row value left the binlog

    hidden = laglab("profile", str(tmp_path / name), "--anonymize", "--json", "-o", str(tmp_path / "hidden.json"))
    assert hidden.returncode == 0 and "profile_probe" not in hidden.stdout, hidden.stdout[-500:]


def test_a_text_file_and_a_truncated_binlog_are_named_with_the_offset(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a binlog\n")
    done = laglab("profile", str(text))
    assert done.returncode == 2 and f"file: {text}: not a binary log file" in done.stderr, done.stderr
    head = (ROOT / "controller/tests/unit/fixtures/binlog/mysql-9.7.4-head.bin").read_bytes()  # a real header, cut
    cut = tmp_path / "binlog.000009"
    cut.write_bytes(head)
    done = laglab("profile", str(cut))
    assert done.returncode == 2 and f"file: {cut}: damaged or truncated at offset 4" in done.stderr, done.stderr
