"""Who applies the source's transactions on mysql-target while native replication is handed to another
replicator (DTLE), kept on the target itself so that it survives a failed hand-back and restarts.

Seen against a real DTLE agent: a hand-back that failed (dtle-dst down) left the replica stopped at
native's old position; `make down && make up` restarted mysqld, which started the replica by itself,
and auto-positioning fetched again 2,016 transactions DTLE had already applied, silently. Two things
stop that here:

- the hand-over **holds** the replica: `skip_replica_start` is persisted on the target (PERSIST_ONLY,
  in force from its next start), so a restarted mysqld leaves the receiver stopped; a successful
  hand-back releases it (RESET PERSIST);
- the set-up job (`make up`) reads the hold and DTLE's own record of what it applied
  (`dtle.gtid_executed_v4`, written in the same transaction as the rows it applied) and resumes native
  replication from that record, never keeping a replica whose position disagrees with it.

MySQL only: DTLE does not replicate MariaDB.
"""

from __future__ import annotations

from dataclasses import dataclass

from laglab.replicators.db import NEWEST_MYSQL, Dialect


def hold_statement(dialect: Dialect) -> str:
    """Persisted for the next start only (PERSIST_ONLY, MySQL 8.0.11+): the hold needs no restart."""
    dialect.require("the hand-over's hold of the replica (SET PERSIST_ONLY)", 8, 0, 11)
    return f"SET PERSIST_ONLY {dialect.skip_replica_start} = ON"


def release_statement(dialect: Dialect) -> str:
    return f"RESET PERSIST IF EXISTS {dialect.skip_replica_start}"


def held_query(dialect: Dialect) -> str:
    return (
        "SELECT VARIABLE_VALUE AS v FROM performance_schema.persisted_variables "
        f"WHERE VARIABLE_NAME = '{dialect.skip_replica_start}'"
    )


HOLD, RELEASE, HELD = hold_statement(NEWEST_MYSQL), release_statement(NEWEST_MYSQL), held_query(NEWEST_MYSQL)
REPAIR = "make up PROFILE=dtle"  # the set-up job resumes native from DTLE's record and releases the hold
DTLE_TABLE = ("dtle", "gtid_executed_v4")  # DTLE 4.x: (job_name, source_uuid BINARY(16), gtid, gtid_set)
DTLE_JOB = "laglab"


def _one(conn, sql: str, args=None) -> dict | None:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()


def hold(conn, dialect: Dialect = NEWEST_MYSQL) -> None:
    """From the target's next start on, its replica stays stopped until the lab starts it."""
    _one(conn, hold_statement(dialect))


def release(conn, dialect: Dialect = NEWEST_MYSQL) -> None:
    _one(conn, release_statement(dialect))


def held(conn, dialect: Dialect = NEWEST_MYSQL) -> bool:
    row = _one(conn, held_query(dialect))
    return bool(row) and str(row["v"]).upper() in ("ON", "1", "TRUE")


def format_record(rows: list[dict]) -> str:
    """DTLE's rows as one GTID set text. A row is one transaction (`gtid` > 0, `gtid_set` NULL) or, after
    DTLE compacts them, `gtid` = 0 and `gtid_set` = 'a-b:c' (its intervals, colon-separated)."""
    by_uuid: dict[str, list[str]] = {}
    for row in rows:
        raw = str(row["uuid"]).lower().replace("-", "")
        if len(raw) != 32 or any(c not in "0123456789abcdef" for c in raw):
            raise ValueError(f"dtle.gtid_executed_v4: source_uuid {row['uuid']!r} is not a UUID")
        uuid = f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"
        gno = int(row["gtid"])
        parts = [str(gno)] if gno > 0 else [p for p in str(row.get("gtid_set") or "").split(":") if p]
        by_uuid.setdefault(uuid, []).extend(parts)
    return ",".join(f"{uuid}:{':'.join(parts)}" for uuid, parts in sorted(by_uuid.items()) if parts)


def dtle_record(conn, job: str = DTLE_JOB) -> str | None:
    """What DTLE recorded as applied for `job` on this server, normalised by the server (None: no table)."""
    schema, table = DTLE_TABLE
    if not _one(
        conn, "SELECT 1 AS x FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s", (schema, table)
    ):
        return None
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT HEX(source_uuid) AS uuid, gtid, gtid_set FROM {schema}.{table} WHERE job_name = %s", (job,)
        )
        text = format_record(list(cur.fetchall()))
    return normalise(conn, text)


def normalise(conn, gtids: str) -> str:
    """The server's canonical text of a set given as 'a,b' (merges, sorts, removes overlaps)."""
    return str(_one(conn, "SELECT GTID_SUBTRACT(%s, '') AS g", (gtids,))["g"])


def subtract(conn, a: str, b: str) -> str:
    return str(_one(conn, "SELECT GTID_SUBTRACT(%s, %s) AS g", (a, b))["g"])


def subset(conn, a: str, b: str) -> bool:
    return bool(_one(conn, "SELECT GTID_SUBSET(%s, %s) AS s", (a, b))["s"])


@dataclass(frozen=True)
class Verdict:
    """What the set-up job does with the target's replica: `resume_from` set = resume native from it."""

    held: bool
    record: str | None  # DTLE's record of what it applied ("" = none; None = no DTLE table)
    target_executed: str
    errant: str  # executed on the target, never on the source
    resume_from: str | None
    reason: str


def verdict(conn, source_executed: str) -> Verdict:
    """Reads the target (`conn`): the hold, DTLE's record, its executed set and what of it the source
    never executed. Native must resume from the record when the replica is held or its position does not
    cover the record (auto-positioning would fetch those transactions again)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.gtid_executed AS g")
        executed = str(cur.fetchone()["g"])
    is_held, record = held(conn), dtle_record(conn)
    errant = subtract(conn, executed, source_executed)
    uncovered = subtract(conn, record, executed) if record else ""
    if not is_held and not uncovered:
        return Verdict(False, record, executed, errant, None, "no hand-over pending")
    from_source = subtract(conn, executed, errant)
    resume_from = normalise(conn, ",".join(s for s in (from_source, record or "") if s))
    why = []
    if is_held:
        why.append("the replica is held for another replicator (a hand-back did not finish)")
    if uncovered:
        why.append(f"DTLE applied {uncovered} beyond the replica's position")
    if errant:
        why.append(f"the target's own transactions {errant} (DTLE's writes) are replaced by the source's GTIDs")
    return Verdict(is_held, record, executed, errant, resume_from, "; ".join(why))


def resume_statements(gtids: str, dialect: Dialect = NEWEST_MYSQL) -> list[tuple[str, tuple | None]]:
    """Native replication goes on after `gtids` (what others applied): it becomes the target's executed
    set (its binary logs are dropped: it is a replica in this lab), then auto-positioning asks the
    source for everything else. The check between the two is the hand-over's own: the set native resumes
    from must equal what was applied, no more (a gap) and no less (applied twice)."""
    return [
        (dialect.stop_replica, None),
        (dialect.reset_binary_logs, None),
        ("SET GLOBAL gtid_purged = %s", (gtids,)),
    ]


def resume(conn, gtids: str, dialect: Dialect = NEWEST_MYSQL) -> None:
    """Runs resume_statements, checks the target's executed set is exactly `gtids`, starts the replica
    and releases the hold. Raises HandOverError when the set differs (the replica stays stopped)."""
    with conn.cursor() as cur:
        for sql, args in resume_statements(gtids, dialect):
            cur.execute(sql, args)
        cur.execute("SELECT @@GLOBAL.gtid_executed AS g, GTID_SUBSET(@@GLOBAL.gtid_executed, %s) AND "
                    "GTID_SUBSET(%s, @@GLOBAL.gtid_executed) AS same", (gtids, gtids))  # fmt: skip
        row = cur.fetchone()
        if not int(row["same"]):
            raise HandOverError(f"after the hand-back the target's executed set is {row['g']!r}, not {gtids!r}")
        cur.execute(dialect.start_replica)
        cur.execute(release_statement(dialect))


class HandOverError(RuntimeError):
    pass
