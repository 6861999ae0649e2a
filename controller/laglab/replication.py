"""Sets up GTID replication mysql-source -> mysql-target, idempotently (the `replication-setup` job).

Creates the replication account and the heartbeat schema on the source, then points the target at
the source with GTID auto-positioning and starts it. A replica that is already replicating from the
right source is left alone; one that is broken (threads stopped with an error) is reset and
re-pointed, which is safe with auto-positioning. Run: `python -m laglab.replication setup`.
"""

from __future__ import annotations

import os
import sys
import time

import pymysql

from . import config
from .db import META_SCHEMA, Dialect, Endpoint, connect, lab_endpoints, replica_field, server_dialect

HEARTBEAT_DDL = (
    f"CREATE TABLE IF NOT EXISTS {META_SCHEMA}.heartbeat ("
    " id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
    " seq BIGINT UNSIGNED NOT NULL,"
    " ts DATETIME(6) NOT NULL)"
)


def log(message: str) -> None:
    print(f"replication-setup: {message}", flush=True)


def wait_for(endpoint: Endpoint, seconds: float) -> pymysql.connections.Connection:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return connect(endpoint, timeout=2)
        except pymysql.MySQLError as error:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{endpoint.name} did not accept connections within {seconds:.0f}s: {error}"
                ) from None
            time.sleep(1)


def prepare_source(conn, repl_user: str, repl_password: str) -> None:
    with conn.cursor() as cur:
        cur.execute("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (repl_user, repl_password))
        cur.execute("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO %s@'%%'", (repl_user,))
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {META_SCHEMA}")
        cur.execute(HEARTBEAT_DDL)


def replica_state(conn) -> dict | None:
    with conn.cursor() as cur:
        cur.execute("SHOW REPLICA STATUS")
        return cur.fetchone()


def is_healthy(status: dict | None, source_host: str) -> bool:
    if not status:
        return False
    return (
        replica_field(status, "Source_Host") == source_host
        and replica_field(status, "Replica_IO_Running") in ("Yes", "Connecting")
        and replica_field(status, "Replica_SQL_Running") == "Yes"
    )


def configure_target(conn, dialect: Dialect, source: Endpoint, repl_user: str, repl_password: str) -> str:
    """Returns what it did: 'kept', 'configured' or 'repaired'."""
    status = replica_state(conn)
    if is_healthy(status, source.host):
        return "kept"
    with conn.cursor() as cur:
        if status:
            log(
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


def wait_running(conn, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        status = replica_state(conn) or {}
        io = replica_field(status, "Replica_IO_Running")
        sql = replica_field(status, "Replica_SQL_Running")
        if io == "Yes" and sql == "Yes":
            return status
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"replication did not start within {seconds:.0f}s: IO {io}, SQL {sql}, "
                f"IO error {replica_field(status, 'Last_IO_Error')!r}, SQL error {replica_field(status, 'Last_SQL_Error')!r}"
            )
        time.sleep(0.5)


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
        io = "SLAVE IO_THREAD" if dialect.is_mariadb else "REPLICA IO_THREAD"
        out += [f"STOP {io}", f"START {io}"]
    return out


def set_semi_sync(source: Endpoint, target: Endpoint, enabled: bool, timeout_ms: int) -> dict:
    """Semi-sync on or off on both servers; returns the source's view afterwards."""
    src, dst = connect(source, timeout=5), connect(target, timeout=5, read_timeout=60)
    try:
        dialect = server_dialect(src)
        for conn, role in ((src, "source"), (dst, "replica")):
            plugin = dialect.semi_sync_names(role)[0]
            installed = plugin is None or _plugin_active(conn, plugin)
            with conn.cursor() as cur:
                for sql in semi_sync_statements(dialect, role, enabled, timeout_ms, installed):
                    cur.execute(sql)
        return semi_sync_state(src, dialect, wait_for_clients=enabled)
    finally:
        src.close()
        dst.close()


def semi_sync_state(src, dialect: Dialect, wait_for_clients: bool = False) -> dict:
    """The source's semi-sync status: enabled, active (status ON) and connected semi-sync replicas."""
    plugin, _, prefix = dialect.semi_sync_names("source")
    if plugin and not _plugin_active(src, plugin):
        return {"enabled": False, "active": False, "clients": 0, "timeout_ms": None}
    status = prefix.capitalize()
    deadline = time.monotonic() + (30 if wait_for_clients else 0)
    while True:
        with src.cursor() as cur:
            cur.execute(f"SELECT @@GLOBAL.{prefix}_enabled AS enabled, @@GLOBAL.{prefix}_timeout AS timeout_ms")
            row = cur.fetchone()
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (%s, %s)", (f"{status}_status", f"{status}_clients"))
            values = {r["Variable_name"]: r["Value"] for r in cur.fetchall()}
        state = {
            "enabled": bool(int(row["enabled"])),
            "active": values.get(f"{status}_status") == "ON",
            "clients": int(values.get(f"{status}_clients") or 0),
            "timeout_ms": int(row["timeout_ms"]),
        }
        if state["clients"] or time.monotonic() > deadline:
            return state
        time.sleep(0.2)


def setup(settings: config.Settings, environ) -> None:
    source, target = lab_endpoints(settings, environ)
    src = wait_for(source, 180)
    dst = wait_for(target, 180)
    dialect = server_dialect(src)
    target_dialect = server_dialect(dst)
    if dialect != target_dialect:
        raise RuntimeError(f"source is {dialect.flavor} but target is {target_dialect.flavor}")
    log(f"{dialect.flavor} on both servers")
    prepare_source(src, str(settings.REPL_USER), str(settings.REPL_PASSWORD))
    # Inside the lab the replica reaches the source by service name on 3306.
    inside = Endpoint("mysql-source", 3306, "", "", "mysql-source")
    action = configure_target(dst, dialect, inside, str(settings.REPL_USER), str(settings.REPL_PASSWORD))
    wait_running(dst, 60)
    log(f"replica {action}; IO and SQL threads running")
    # Asynchronous unless the semi-sync profile's job turns semi-sync on after this one.
    if set_semi_sync(source, target, False, int(settings.SEMI_SYNC_TIMEOUT_MS))["enabled"] is False:
        log("semi-sync off")


def main(argv: list[str]) -> int:
    if argv[1:] not in (["setup"], ["semi-sync", "on"], ["semi-sync", "off"]):
        print("usage: python -m laglab.replication setup | semi-sync on|off", file=sys.stderr)
        return 2
    try:
        settings = config.load(os.environ)
        if argv[1] == "setup":
            setup(settings, os.environ)
        else:
            source, target = lab_endpoints(settings, os.environ)
            state = set_semi_sync(source, target, argv[2] == "on", int(settings.SEMI_SYNC_TIMEOUT_MS))
            log(f"semi-sync {argv[2]}: {state}")
            if argv[2] == "on" and not (state["active"] and state["clients"]):
                log("error: the source reports no semi-sync replica connected")
                return 1
    except (RuntimeError, pymysql.MySQLError, config.ConfigError) as error:
        log(f"error: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
