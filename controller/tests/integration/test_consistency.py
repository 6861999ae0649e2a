"""The no-loss check after real load, and its report when the target was changed behind its back."""

import pytest

from .conftest import query, wait_until

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab


def sysbench(compose, command: str, *extra: str):
    argv = [
        "exec", "-T", "loadgen", "sysbench", "oltp_write_only", "--db-driver=mysql",
        "--mysql-host=mysql-source", "--mysql-user=lab", "--mysql-password=lab", "--mysql-db=lab",
        "--tables=2", "--table-size=2000", *extra, command,
    ]  # fmt: skip
    return compose(*argv, timeout=300)


def test_identical_after_load_then_a_difference_is_reported(api, compose, source, target):
    sysbench(compose, "cleanup")
    sysbench(compose, "prepare")
    run = sysbench(compose, "run", "--time=5", "--threads=4", "--report-interval=0")
    assert "transactions:" in run.stdout

    report = api.get("/api/consistency?timeout=60").json()
    assert report["gtid"]["target_caught_up"] is True
    assert report["identical"] is True, report["differences"]
    tables = {t["table"]: t for t in report["tables"]}
    assert {"lab.sbtest1", "lab.sbtest2"} <= set(tables)
    assert tables["lab.sbtest1"]["source"]["rows"] == 2000
    assert not any(t.startswith("laglab_meta.") for t in tables)

    # Change one row on the target only (not binlogged), as a buggy replicator or a human would.
    row = query(target, "SELECT id, k FROM lab.sbtest2 ORDER BY id LIMIT 1")[0]
    query(target, "SET SESSION sql_log_bin = 0")
    query(target, "UPDATE lab.sbtest2 SET k = k + 1 WHERE id = %s", (row["id"],))
    try:
        report = api.get("/api/consistency?timeout=60").json()
        assert report["identical"] is False
        assert len(report["differences"]) == 1
        assert report["differences"][0].startswith("lab.sbtest2: checksum ")
        assert tables["lab.sbtest1"] == {t["table"]: t for t in report["tables"]}["lab.sbtest1"]
    finally:
        query(target, "UPDATE lab.sbtest2 SET k = %s WHERE id = %s", (row["k"], row["id"]))
    wait_until(lambda: api.get("/api/consistency").json()["identical"], 30, 1, "identical again")
    sysbench(compose, "cleanup")
