"""The no-loss check: wait until the target has executed the source's GTID set, then compare every
table of the lab's schemas (row count and CHECKSUM TABLE ... EXTENDED) on both servers, and name the
errant transactions: what the target executed that the source never did.

Meant for a quiet lab (load stopped): writes that land on the source after its GTID set is read
are not waited for and show up as differences. The heartbeat schema is left out (it changes 10
times a second by design), and so are the replicators' own schemas (REPLICATOR_SCHEMAS).
"""

from __future__ import annotations

import contextlib
import itertools
import time

from laglab.deadline import TimedOut, poll
from laglab.replicators.db import (
    META_SCHEMA,
    SYSTEM_SCHEMAS,
    connect,
    executed_gtids,
    quote_identifier,
    server_dialect,
    wait_executed,
)

# The replicators' own bookkeeping exists on one side only by design: DTLE's applied-GTID table
# (schema dtle, e.g. dtle.gtid_executed_v4) and DM's checkpoints (dm_meta) are not lab data.
REPLICATOR_SCHEMAS = ("dtle", "dm_meta")
EXCLUDED = (*SYSTEM_SCHEMAS, META_SCHEMA, *REPLICATOR_SCHEMAS)


def lab_tables(conn) -> set[str]:
    placeholders = ", ".join(["%s"] * len(EXCLUDED))
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA AS s, TABLE_NAME AS t FROM information_schema.TABLES "
            f"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({placeholders})",
            EXCLUDED,
        )
        return {f"{row['s']}.{row['t']}" for row in cur.fetchall()}


def qualified(table: str) -> str:
    """'schema.table' as a quoted SQL identifier (names come from the servers, never trusted)."""
    schema, name = table.split(".", 1)
    return f"{quote_identifier(schema)}.{quote_identifier(name)}"


def row_count(conn, table: str) -> int:
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) AS n FROM {qualified(table)}")
        return int(cur.fetchone()["n"])


def table_summary(conn, table: str) -> dict:
    rows = row_count(conn, table)
    with conn.cursor() as cur:
        cur.execute(f"CHECKSUM TABLE {qualified(table)} EXTENDED")
        checksum = cur.fetchone()["Checksum"]
    return {"rows": rows, "checksum": None if checksum is None else int(checksum)}


def check(source_endpoint, target_endpoint, timeout: float = 30.0, sleep=None) -> dict:
    """Returns {"identical", "gtid": {...}, "tables": [...], "differences": [...]}. With `sleep` (a run's),
    the wait for the target is one-second waits a cancelled run leaves."""
    started = time.monotonic()
    src = connect(source_endpoint, timeout=5)
    dst = connect(target_endpoint, timeout=5, read_timeout=(30 if sleep else timeout + 30))
    try:
        dialect = server_dialect(src)
        gtids = executed_gtids(src, dialect)
        caught_up = wait_executed(dst, dialect, gtids, timeout, sleep=sleep)
        waited = round(time.monotonic() - started, 3)
        target_executed = executed_gtids(dst, dialect)
        # The source's set read again *after* the target's: the heartbeat writer goes on, and what the
        # target applied since the first read is no errant transaction. Even so a replica can hold a
        # transaction the source has sent but not yet marked executed (binlog synced, commit stage not
        # over: seen once in CI, the newest heartbeat's GTID): the source is read again until the
        # answer stands, for at most a second. A real errant transaction never goes away.
        errant = errant_gtids(dst, dialect, executed_gtids(src, dialect), target_executed)
        answers, calls = [errant], itertools.count()

        def stands() -> bool:  # from the second call on (poll slept 50 ms), read again: until two agree
            if next(calls):
                answers.append(errant_gtids(dst, dialect, executed_gtids(src, dialect), target_executed))
                if answers[-1] == answers[-2]:
                    return True
            return not answers[-1]

        with contextlib.suppress(TimedOut):
            poll(stands, 1.0, 0.05)
        errant = answers[-1]
        present = {"source": (src, lab_tables(src)), "target": (dst, lab_tables(dst))}
        report, differences = [], []
        for table in sorted(present["source"][1] | present["target"][1]):
            entry = {"table": table}
            for side, (conn, tables) in present.items():
                entry[side] = table_summary(conn, table) if table in tables else None
            entry["identical"] = entry["source"] == entry["target"]
            if not entry["identical"]:
                differences.append(_difference(entry))
            report.append(entry)
        if errant:
            differences.insert(0, ERRANT.format(errant=errant))
        return {
            "identical": caught_up and not differences,
            "flavor": dialect.flavor,
            "gtid": {
                "source_executed": gtids,
                "target_executed": target_executed,
                "errant": errant,
                "target_caught_up": caught_up,
                "waited_seconds": waited,
            },
            "tables": report,
            "differences": differences
            if caught_up
            else [f"target did not execute the source's GTID set within {timeout:g}s", *differences],
        }
    finally:
        src.close()
        dst.close()


ERRANT = (
    "errant transactions on the target: {errant} (executed there, never on the source: written on the replica "
    "directly, or applied twice by a replicator that writes under the target's own GTIDs)"
)


def errant_gtids(target_conn, dialect, source_executed: str, target_executed: str) -> str:
    """What the target executed that the source never did ("" = nothing). Checksums cannot see a
    transaction applied twice when its row events happen to be idempotent; its second GTID can."""
    if dialect.is_mariadb:
        return mariadb_errant(source_executed, target_executed)
    with target_conn.cursor() as cur:
        cur.execute("SELECT GTID_SUBTRACT(%s, %s) AS errant", (target_executed, source_executed))
        return str(cur.fetchone()["errant"] or "")


def mariadb_errant(source_pos: str, target_pos: str) -> str:
    """MariaDB's gtid_binlog_pos keeps the last GTID per (domain, server id): a target entry is errant
    when the source has no entry for its (domain, server id), or an older one."""

    def parse(pos: str) -> dict[tuple[int, int], int]:
        out = {}
        for part in filter(None, (p.strip() for p in (pos or "").split(","))):
            domain, server, seq = (int(x) for x in part.split("-"))
            out[(domain, server)] = seq
        return out

    source = parse(source_pos)
    return ",".join(
        f"{d}-{s}-{seq}" for (d, s), seq in sorted(parse(target_pos).items()) if seq > source.get((d, s), 0)
    )


def _difference(entry: dict) -> str:
    table, src, dst = entry["table"], entry["source"], entry["target"]
    if src is None:
        return f"{table}: only on the target"
    if dst is None:
        return f"{table}: missing on the target"
    parts = []
    if src["rows"] != dst["rows"]:
        parts.append(f"rows {src['rows']} on the source, {dst['rows']} on the target")
    if src["checksum"] != dst["checksum"]:
        parts.append(f"checksum {src['checksum']} on the source, {dst['checksum']} on the target")
    return f"{table}: " + "; ".join(parts)
