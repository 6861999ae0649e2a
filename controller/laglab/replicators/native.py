"""Native GTID replication mysql-source -> mysql-target: the set-up job, semi-sync, the options a
scenario point sets (connection compression, zstd level, TLS, binlog transaction compression,
semi-sync), and the hand-over other replicators (DTLE) need.

The set-up job (`python -m laglab setup native`, the `replication-setup` service) creates the
replication account and the heartbeat schema on the source, then points the target at the source
with GTID auto-positioning and starts it. A replica already replicating from the right source is left
alone; a broken one (threads stopped with an error) is reset and re-pointed, which is safe with
auto-positioning.
"""

from __future__ import annotations

import logging
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from laglab.deadline import TimedOut, poll
from laglab.replicators import consistency, handover
from laglab.replicators.base import Parts, ReplicatorPlan, Sleep, SourceToTarget
from laglab.replicators.db import (
    META_SCHEMA,
    Dialect,
    Endpoint,
    connect,
    lab_endpoints,
    replica_field,
    server_dialect,
    wait_executed,
)

log = logging.getLogger("laglab.replicators.native")

HEARTBEAT_DDL = (
    f"CREATE TABLE IF NOT EXISTS {META_SCHEMA}.heartbeat ("
    " id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
    " seq BIGINT UNSIGNED NOT NULL,"
    " ts DATETIME(6) NOT NULL)"
)
# The lab's defaults for the options a point may change (compression, zstd level, TLS, binlog compression).
DEFAULT_NETWORK = ("uncompressed", 3, False, False)


def say(message: str) -> None:
    print(f"replication-setup: {message}", flush=True)


# --- the set-up job ------------------------------------------------------------------------------


def prepare_source(conn, repl_user: str, repl_password: str) -> None:
    with conn.cursor() as cur:
        cur.execute("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (repl_user, repl_password))
        cur.execute("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO %s@'%%'", (repl_user,))
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {META_SCHEMA}")
        cur.execute(HEARTBEAT_DDL)


def replica_state(conn, dialect: Dialect | None = None) -> dict | None:
    """SHOW REPLICA STATUS (SHOW SLAVE STATUS before MySQL 8.0.22) as one row, or None."""
    with conn.cursor() as cur:
        cur.execute((dialect or server_dialect(conn)).replica_status)
        return cur.fetchone()


def is_healthy(status: dict | None, source_host: str) -> bool:
    if not status:
        return False
    return (
        replica_field(status, "Source_Host") == source_host
        and replica_field(status, "Replica_IO_Running") in ("Yes", "Connecting")
        and replica_field(status, "Replica_SQL_Running") == "Yes"
    )


def configure_target(
    conn,
    dialect: Dialect,
    source: Endpoint,
    repl_user: str,
    repl_password: str,
    source_executed: str | None = None,
    dtle_job=None,
) -> str:
    """Returns what it did: 'kept', 'updated' (reconnect settings), 'configured', 'repaired', 'resumed
    from DTLE's record' or 'left to DTLE'. `source_executed` (MySQL): the source's executed set, for
    the hand-over check; `dtle_job`: () -> 'running' | 'stopped' | None (no DTLE), stops a job not running."""
    status = replica_state(conn, dialect)
    if source_executed is not None and not dialect.is_mariadb:
        resumed = _resume_after_hand_over(
            conn, dialect, status, source, repl_user, repl_password, source_executed, dtle_job
        )
        if resumed:
            return resumed
    if is_healthy(status, source.host):
        retries = replica_field(status, "Source_Retry_Count")
        if dialect.retry_settings and retries is not None and int(retries) < dialect.RETRY_COUNT:
            # A lab made before the receiver retried for a day: it gave up after 10 s without its source.
            with conn.cursor() as cur:
                cur.execute(dialect.io_thread("STOP"))
                cur.execute(dialect.retry_settings)
                cur.execute(dialect.io_thread("START"))
            return "updated"
        return "kept"
    with conn.cursor() as cur:
        if status:
            say(
                "replica is not healthy (IO {}, SQL {}, last error {!r}); resetting and re-pointing it".format(
                    replica_field(status, "Replica_IO_Running"),
                    replica_field(status, "Replica_SQL_Running"),
                    replica_field(status, "Last_Error") or replica_field(status, "Last_IO_Error"),
                )
            )
            cur.execute(dialect.stop_replica)
            cur.execute(dialect.reset_replica)
        sql, args = dialect.change_source(source.host, source.port, repl_user, repl_password)
        cur.execute(sql, args)
        cur.execute(dialect.start_replica)
    return "repaired" if status else "configured"


def _resume_after_hand_over(conn, dialect, status, source, repl_user, repl_password, source_executed, dtle_job):
    """A replica handed to DTLE whose hand-back did not finish (or whose position does not cover what
    DTLE recorded as applied) is never kept: native resumes from DTLE's record (handover.verdict)."""
    verdict = handover.verdict(conn, source_executed)
    if verdict.resume_from is None:
        if verdict.errant:
            say(
                f"WARNING: the target executed {verdict.errant}, which the source never did (errant transactions: "
                "written on the replica, or applied twice); `make consistency` reports them, "
                "`make clean && make up` rebuilds the lab"
            )
        return None
    if dtle_job is not None and dtle_job() == "running":
        say("replication is handed to DTLE and its job is running (a run in progress?): left to DTLE")
        return "left to DTLE"
    if status and replica_field(status, "Replica_SQL_Running") == "Yes":
        # Read again once it is stopped: a running replica applies more between the reading and the
        # resume, and a set read before would leave a hole that auto-positioning never fills.
        with conn.cursor() as cur:
            cur.execute(dialect.stop_replica)
        verdict = handover.verdict(conn, source_executed)
        if verdict.resume_from is None:
            with conn.cursor() as cur:
                cur.execute(dialect.start_replica)
            return None
    say(f"replica resumes from DTLE's record of what it applied: {verdict.reason}")
    if not status:  # no channel (a target that was reset meanwhile): point it at the source first
        sql, args = dialect.change_source(source.host, source.port, repl_user, repl_password)
        with conn.cursor() as cur:
            cur.execute(sql, args)
    handover.resume(conn, verdict.resume_from, dialect)
    return "resumed from DTLE's record"


def wait_running(conn, seconds: float, sleep=time.sleep) -> dict:
    last: dict = {}
    dialect = server_dialect(conn)

    def running() -> dict | None:
        last.clear()
        last.update(replica_state(conn, dialect) or {})
        both = (replica_field(last, "Replica_IO_Running"), replica_field(last, "Replica_SQL_Running"))
        return dict(last) if both == ("Yes", "Yes") else None

    def failed() -> Exception:
        return RuntimeError(
            f"replication did not start within {seconds:.0f}s: IO {replica_field(last, 'Replica_IO_Running')}, "
            f"SQL {replica_field(last, 'Replica_SQL_Running')}, IO error {replica_field(last, 'Last_IO_Error')!r}, "
            f"SQL error {replica_field(last, 'Last_SQL_Error')!r}"
        )

    return poll(running, seconds, 0.5, sleep=sleep, timed_out=failed)


def own_server_id(conn, dialect: Dialect, server_id: int) -> None:
    """Each replica its own server_id (two with one id cut each other off from the source). Persisted
    where the server can (SET PERSIST, MySQL 8.0.11+); elsewhere (MariaDB, MySQL 5.7) the job sets it
    again after a restart (a Kubernetes Job re-run, as after any scaling)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.server_id AS id")
        if int(cur.fetchone()["id"]) == server_id:
            return
        cur.execute(dialect.set_lasting("server_id", int(server_id)))
        if replica_state(conn, dialect):  # a receiver already connected asked with the old id: ask again
            cur.execute(dialect.io_thread("STOP"))
            cur.execute(dialect.io_thread("START"))
    say(f"server_id {server_id}")


# --- semi-sync -----------------------------------------------------------------------------------


def _plugin_active(conn, plugin: str) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT PLUGIN_STATUS AS s FROM information_schema.PLUGINS WHERE PLUGIN_NAME = %s", (plugin,))
        row = cur.fetchone()
        return bool(row) and row["s"] == "ACTIVE"


def semi_sync_statements(dialect: Dialect, role: str, enabled: bool, timeout_ms: int, installed: bool) -> list[str]:
    """What turns semi-sync on or off on one server (the replica's IO thread restarts to take it)."""
    plugin, library, prefix = dialect.semi_sync_names(role)
    out = []
    if enabled and plugin and not installed:
        out.append(f"INSTALL PLUGIN {plugin} SONAME '{library}'")
    if not enabled and plugin and not installed:
        return []  # never installed: nothing is on
    out.append(f"SET GLOBAL {prefix}_enabled = {1 if enabled else 0}")
    if role == "source" and enabled:
        out.append(f"SET GLOBAL {prefix}_timeout = {int(timeout_ms)}")
    if role == "replica":
        out += [dialect.io_thread("STOP"), dialect.io_thread("START")]
    return out


def set_semi_sync(source: Endpoint, target: Endpoint, enabled: bool, timeout_ms: int) -> dict:
    """Semi-sync on or off on both servers; returns the source's view afterwards."""
    src, dst = connect(source, timeout=5), connect(target, timeout=5, read_timeout=60)
    try:
        for conn, role in ((src, "source"), (dst, "replica")):
            dialect = server_dialect(conn)  # each its own: a cross-version pair names them differently
            plugin = dialect.semi_sync_names(role)[0]
            installed = plugin is None or _plugin_active(conn, plugin)
            with conn.cursor() as cur:
                for sql in semi_sync_statements(dialect, role, enabled, timeout_ms, installed):
                    cur.execute(sql)
        return semi_sync_state(src, server_dialect(src), wait_for_clients=enabled)
    finally:
        src.close()
        dst.close()


def semi_sync_state(src, dialect: Dialect, wait_for_clients: bool = False) -> dict:
    """The source's semi-sync status: enabled, active (status ON) and connected semi-sync replicas."""
    plugin, _, prefix = dialect.semi_sync_names("source")
    if plugin and not _plugin_active(src, plugin):
        return {"enabled": False, "active": False, "clients": 0, "timeout_ms": None}
    status = prefix.capitalize()

    def read() -> dict:
        with src.cursor() as cur:
            cur.execute(f"SELECT @@GLOBAL.{prefix}_enabled AS enabled, @@GLOBAL.{prefix}_timeout AS timeout_ms")
            row = cur.fetchone()
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (%s, %s)", (f"{status}_status", f"{status}_clients"))
            values = {r["Variable_name"]: r["Value"] for r in cur.fetchall()}
        return {
            "enabled": bool(int(row["enabled"])),
            "active": values.get(f"{status}_status") == "ON",
            "clients": int(values.get(f"{status}_clients") or 0),
            "timeout_ms": int(row["timeout_ms"]),
        }

    if not wait_for_clients:
        return read()
    last: dict = {}

    def with_clients() -> dict | None:
        last["state"] = read()
        return last["state"] if last["state"]["clients"] else None

    try:  # a replica's semi-sync connection takes a moment; after 30 s, the state as it is
        return poll(with_clients, 30, 0.2)
    except TimedOut:
        return last["state"]


def semi_sync_command(settings, environ, on: bool) -> int:
    """`python -m laglab semi-sync on|off` (the semi-sync profile's job)."""
    source, target = lab_endpoints(settings, environ)
    state = set_semi_sync(source, target, on, settings.SEMI_SYNC_TIMEOUT_MS)
    say(f"semi-sync {'on' if on else 'off'}: {state}")
    if on and not (state["active"] and state["clients"]):
        say("error: the source reports no semi-sync replica connected")
        return 1
    return 0


# --- a scenario point's options ------------------------------------------------------------------


def option_statements(dialect: Dialect, wanted: tuple) -> list[tuple[str, str]]:
    """(server, sql) that give the replica connection the wanted (compression, zstd level, TLS,
    binlog transaction compression), in the server's own words (Dialect.network_options: zlib by
    slave_compressed_protocol before MySQL 8.0.18 and on MariaDB). A server without an option (binlog
    compression before 8.0.20 and on MariaDB, zstd before 8.0.18) runs with its default, and asking
    for another value is refused with the version that brings it (VersionUnsupported)."""
    compression, level, ssl, binlog_compression = wanted
    out: list[tuple[str, str]] = []
    if binlog_compression != DEFAULT_NETWORK[3] or dialect.mysql_at_least(8, 0, 20):
        out.append(("source", dialect.binlog_compression(binlog_compression)))
    network = [("target", sql) for sql in dialect.network_options(compression, level, ssl)]
    return [*out, ("target", dialect.stop_replica), *network, ("target", dialect.start_replica)]


class NativeOptions(BaseModel):
    """The replica connection's options a point sets, in each server's words (what a version lacks is
    refused with the version that brings it)."""

    model_config = ConfigDict(extra="forbid")
    compression: Literal["uncompressed", "zlib", "zstd"] = Field("uncompressed", description="native: the replica connection's protocol compression (SOURCE_COMPRESSION_ALGORITHMS; zlib only, by slave_compressed_protocol, on MariaDB and MySQL before 8.0.18)")  # fmt: skip
    zstd_level: int = Field(3, ge=1, le=22, description="native: with zstd")
    binlog_transaction_compression: bool = Field(False, description="native: the source compresses transactions in the binlog (MySQL 8.0.20+)")  # fmt: skip
    ssl: bool = Field(False, description="native: the replica connects over TLS")
    semi_sync: bool = Field(False, description="native: semi-synchronous replication (the source waits for one replica)")  # fmt: skip


class ReplicaHeld(RuntimeError):
    """Native replication was asked to start a replica held for a hand-back (handover.hold): only that
    hand-back's repair may start it. `problem`, `repair` and `repaired` put it on /api/health."""

    problem = "replica-held"

    def __init__(self, message: str, repaired=None):
        super().__init__(message)
        self.repair, self.repaired = handover.REPAIR, repaired


class Native(SourceToTarget):
    kind = "native"
    label = "native"
    Options = NativeOptions
    sweepable = ("compression", "binlog_transaction_compression", "ssl", "semi_sync")

    @classmethod
    def describe(cls, options: dict) -> str:
        """`native, uncompressed`; `native, zstd level 3, binlog compression, TLS, semi-sync`."""
        compression = str(options.get("compression", "uncompressed"))
        if compression == "zstd" and "zstd_level" in options:
            compression += f" level {options['zstd_level']}"
        said = [compression]
        said += [words for key, words in (("binlog_transaction_compression", "binlog compression"), ("ssl", "TLS"),
                                          ("semi_sync", "semi-sync")) if options.get(key)]  # fmt: skip
        return ", ".join(["native", *said])

    def __init__(self, parts: Parts):
        super().__init__(parts)
        self._semi_sync_before: bool | None = None  # what the lab had before a point first asked for it

    def apply(self, plan: ReplicatorPlan, sleep: Sleep = time.sleep) -> None:
        r = plan.options
        self._semi_sync(r.semi_sync)
        self._network((r.compression, r.zstd_level, r.ssl, r.binlog_transaction_compression))

    def wait_caught_up(self, timeout: float, sleep: Sleep = time.sleep) -> None:
        if not self.source_caught_up(timeout, sleep=sleep):
            raise RuntimeError(f"the replica did not catch up within {timeout:g}s")

    def consistency(self, sleep: Sleep = time.sleep) -> dict:
        return consistency.check(self.parts.source, self.parts.target, timeout=120, sleep=sleep)

    def restore(self) -> None:
        if not self._held():  # semi-sync's own restore restarts the receiver: never a held one's
            self._semi_sync(None)
        self._network(DEFAULT_NETWORK)

    def _network(self, wanted: tuple) -> None:
        """The replica connection's options, with the replica stopped and started again, unless it is
        held for a hand-back that did not finish (handover.hold): then the options are set and it stays
        stopped, and ReplicaHeld says so (#55: a run's cleanup restarted a held replica 70 ms after the
        failed hand-back, and it fetched and applied DTLE's transactions a second time)."""
        servers = {"source": connect(self.parts.source, timeout=5), "target": connect(self.parts.target, timeout=5)}
        try:
            dialect = server_dialect(servers["target"])
            statements = option_statements(dialect, wanted)
            is_held = dialect.mysql_at_least(8, 0, 11) and handover.held(servers["target"], dialect)
            if is_held:
                statements = [(server, sql) for server, sql in statements if sql != dialect.start_replica]
            for server, sql in statements:
                with servers[server].cursor() as cur:
                    cur.execute(sql)
        finally:
            for conn in servers.values():
                conn.close()
        if is_held:
            raise ReplicaHeld(
                "mysql-target's replica is held for a hand-back that did not finish: its options are set and it "
                f"stays stopped (starting it would apply again what the other replicator applied); `{handover.REPAIR}` "
                "resumes it from that replicator's record",
                self._released,
            )

    def _held(self) -> bool:
        """The target's replica is held for a hand-back (MySQL 8.0.11+ only can be: SET PERSIST_ONLY)."""
        conn = connect(self.parts.target, timeout=3)
        try:
            dialect = server_dialect(conn)
            return dialect.mysql_at_least(8, 0, 11) and handover.held(conn, dialect)
        finally:
            conn.close()

    def _released(self) -> bool:
        """The hold is gone (the repair ran): /api/health drops the problem."""
        return not self._held()

    def _semi_sync(self, wanted: bool | None) -> None:
        """Semi-sync as the point asks; None: back to what the lab had before the run."""
        if self._semi_sync_before is None:
            if not wanted:
                return  # never touched
            conn = connect(self.parts.source, timeout=5)
            try:
                self._semi_sync_before = semi_sync_state(conn, server_dialect(conn))["enabled"]
            finally:
                conn.close()
        target = self._semi_sync_before if wanted is None else wanted
        set_semi_sync(self.parts.source, self.parts.target, target, self.parts.settings.SEMI_SYNC_TIMEOUT_MS)


# --- hand-overs (DTLE takes the replica's place for a while) --------------------------------------


class NativeLink:
    """Native replication mysql-source -> mysql-target as the hand-overs to and from DTLE need it."""

    def __init__(self, source, target):
        self.source, self.target = source, target

    def _query(self, endpoint, sql: str, args=None, read_timeout: float | None = None) -> dict | None:
        conn = connect(endpoint, timeout=5, read_timeout=read_timeout)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchone()
        finally:
            conn.close()

    def _dialect(self):
        conn = connect(self.source, timeout=5)
        try:
            dialect = server_dialect(conn)
        finally:
            conn.close()
        if dialect.is_mariadb:
            raise RuntimeError("DTLE replicates MySQL only (gtid_mode=ON); the MariaDB flavour cannot hand over to it")
        return dialect

    def source_executed(self) -> str:
        return str(self._query(self.source, "SELECT @@GLOBAL.gtid_executed AS g")["g"])

    def target_executed(self) -> str:
        return str(self._query(self.target, "SELECT @@GLOBAL.gtid_executed AS g")["g"])

    def subset(self, part: str, whole: str) -> bool:
        return bool(self._query(self.source, "SELECT GTID_SUBSET(%s, %s) AS s", (part, whole))["s"])

    def wait_target_executed(self, gtids: str, timeout: float) -> bool:
        dialect = self._dialect()
        conn = connect(self.target, timeout=5, read_timeout=timeout + 30)
        try:
            return wait_executed(conn, dialect, gtids, timeout)
        finally:
            conn.close()

    def stop(self) -> None:
        self._query(self.target, self._dialect().stop_replica)

    def hold(self) -> None:
        """The target's replica stays stopped across its restarts until the hand-back (handover.hold)."""
        conn = connect(self.target, timeout=5)
        try:
            handover.hold(conn, server_dialect(conn))
        finally:
            conn.close()

    def own_transactions(self, gtids: str) -> str:
        """What of `gtids` (a target's set) the source never executed: errant transactions."""
        return str(self._query(self.source, "SELECT GTID_SUBTRACT(%s, @@GLOBAL.gtid_executed) AS g", (gtids,))["g"])

    def resume_from(self, applied: str) -> None:
        """Native replication goes on after what was applied by others (DTLE), checked to be exactly
        that set, and the hold is released (handover.resume)."""
        conn = connect(self.target, timeout=5, read_timeout=60)
        try:
            handover.resume(conn, applied, server_dialect(conn))
        finally:
            conn.close()
