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


def main(argv: list[str]) -> int:
    if argv[1:] != ["setup"]:
        print("usage: python -m laglab.replication setup", file=sys.stderr)
        return 2
    try:
        setup(config.load(os.environ), os.environ)
    except (RuntimeError, pymysql.MySQLError, config.ConfigError) as error:
        log(f"error: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
