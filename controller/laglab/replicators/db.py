"""Connections to the lab's servers and the SQL that differs between MySQL and MariaDB.

The flavour is read from the server itself (`SELECT VERSION()`), so the right dialect is used
whatever image runs. Every statement that differs lives in `Dialect`; callers never branch on flavour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Self

import pymysql
import pymysql.constants.CLIENT
import pymysql.cursors

from laglab.deadline import TimedOut, poll
from laglab.errors import Kind, LabError

SYSTEM_SCHEMAS = ("mysql", "sys", "information_schema", "performance_schema")
META_SCHEMA = "laglab_meta"


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    user: str
    password: str
    name: str  # the service name, for messages


def connect(
    endpoint: Endpoint, timeout: float = 2.0, read_timeout: float | None = None, tls: bool = True
) -> pymysql.connections.Connection:
    """`timeout` bounds connecting; `read_timeout` (default: max(timeout, 5 s)) bounds each query, so
    a statement that waits on purpose (WAIT_FOR_EXECUTED_GTID_SET) needs it raised. `tls=False`: the
    lag recorder's two connections inside the lab's bridge (hundreds of statements a second at a
    10 ms heartbeat; the password still goes RSA-encrypted, caching_sha2_password's way)."""
    return pymysql.connect(
        ssl_disabled=not tls,
        host=endpoint.host,
        port=endpoint.port,
        user=endpoint.user,
        password=endpoint.password,
        connect_timeout=timeout,
        read_timeout=read_timeout or max(timeout, 5.0),
        write_timeout=max(timeout, 5.0),
        autocommit=True,
        cursorclass=pymysql.cursors.DictCursor,
    )


def run_sql(endpoint: Endpoint, database: str, text: str, timeout: float = 30.0) -> None:
    """Statements (several, separated by ';') executed by the server itself: no client program reads
    the text, so nothing in it runs on a machine (the mysql client would run `\\! cmd` or `system cmd`)."""
    conn = pymysql.connect(
        host=endpoint.host, port=endpoint.port, user=endpoint.user, password=endpoint.password, database=database,
        connect_timeout=5, read_timeout=timeout, write_timeout=timeout, autocommit=True,
        client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS,
    )  # fmt: skip
    try:
        with conn.cursor() as cursor:
            cursor.execute(text)
            while cursor.nextset():
                pass
    finally:
        conn.close()


def wait_connect(endpoint: Endpoint, seconds: float, read_timeout: float | None = None):
    """connect(), retried every second for up to `seconds` (a server that is still starting)."""
    last: list[Exception] = []

    def connected():
        try:
            return connect(endpoint, timeout=2, read_timeout=read_timeout)
        except pymysql.MySQLError as error:
            last[:] = [error]
            return None

    return poll(
        connected, seconds, interval=1,
        timed_out=lambda: RuntimeError(f"{endpoint.name} did not accept connections within {seconds:.0f}s: {last[0]}"),
    )  # fmt: skip


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


NEWEST = (99, 0, 0)  # a Dialect made without a version: the newest server's statements
PLACEHOLDER = "%s"  # an option's value given as a statement argument


class VersionUnsupported(LabError):
    """What the server's version cannot do, said with the version that brings it (never faked)."""

    def __init__(self, what: str, needs: str, dialect: Server):
        super().__init__(Kind.INVALID, f"{what} needs {needs}; the server is {dialect.describe()}")
        self.what, self.needs = what, needs


def parse_version(text: str) -> tuple[int, int, int]:
    """`5.7.44-log` -> (5, 7, 44); `10.11.18-MariaDB-0+deb12u1` -> (10, 11, 18); `8.4` -> (8, 4, 0)."""
    match = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        raise ValueError(f"not a server version: {text!r}")
    return int(match[1]), int(match[2]), int(match[3] or 0)


@dataclass(frozen=True)
class Server:
    """A server as its version says it is: its flavour, the version it reports, and what that version
    can do (what it cannot raises VersionUnsupported, naming the version that brings it)."""

    flavor: str
    version: tuple[int, int, int] = NEWEST

    @classmethod
    def from_version(cls, version: str) -> Self:
        return cls("mariadb" if "mariadb" in version.lower() else "mysql", parse_version(version))

    @property
    def is_mariadb(self) -> bool:
        return self.flavor == "mariadb"

    def describe(self) -> str:
        if self.version == NEWEST:
            return f"{'MariaDB' if self.is_mariadb else 'MySQL'} (newest)"
        return f"{'MariaDB' if self.is_mariadb else 'MySQL'} {'.'.join(map(str, self.version))}"

    def mysql_at_least(self, *version: int) -> bool:
        return not self.is_mariadb and self.version >= version

    def require(self, what: str, *version: int) -> None:
        """MySQL `version` or newer for `what` (MariaDB has none of MySQL's replica options)."""
        needs = "MySQL " + ".".join(map(str, version)) + " or newer"
        if not self.mysql_at_least(*version):
            raise VersionUnsupported(what, needs, self)

    @property
    def persists(self) -> bool:
        """SET PERSIST (MySQL 8.0.11+): a setting that outlives a restart. Elsewhere the lab's jobs set
        it again after each start."""
        return self.mysql_at_least(8, 0, 11)

    @property
    def lag_split_unavailable(self) -> str | None:
        """Why the lag split (transit, queue, apply) cannot be had on this server, or None."""
        if not self.mysql_at_least(8, 0, 1):
            return f"{self.describe()} has no per-transaction applier timestamps (performance_schema, MySQL 8.0.1+)"
        return None


@dataclass(frozen=True)
class Dialect(Server):
    """The statements whose text differs between the servers laglab meets: MySQL (and Percona Server)
    5.7, 8.0, 8.4 and 9.x, and MariaDB 10.5 to 11.x. Every statement that differs lives here, chosen
    by the server's own version (`SELECT VERSION()`); callers never branch on flavour or version.

    MySQL's renames, as its manual dates them: START/STOP/RESET REPLICA and SHOW REPLICA STATUS
    8.0.22 (the old forms removed in 8.4); CHANGE REPLICATION SOURCE TO and the SOURCE_* options
    8.0.23; semisync_source.so / semisync_replica.so 8.0.26 (semisync_master.so removed in 8.4);
    skip_replica_start 8.0.26. What a version lacks raises VersionUnsupported naming the version that
    brings it: zstd protocol compression 8.0.18 (zlib before it: slave_compressed_protocol), binlog
    transaction compression 8.0.20, the applier
    timestamps of the lag split 8.0.1, SET PERSIST 8.0.11. The fixtures that check this against what
    each server answers: tests/unit/server_versions.py."""

    # --- the replica's statements ---

    @property
    def _replica(self) -> str:
        """REPLICA from MySQL 8.0.22; SLAVE before it and on MariaDB (where both are accepted from 10.5)."""
        return "REPLICA" if self.mysql_at_least(8, 0, 22) else "SLAVE"

    @property
    def _source_words(self) -> bool:
        """CHANGE REPLICATION SOURCE TO and SOURCE_* options: MySQL 8.0.23+."""
        return self.mysql_at_least(8, 0, 23)

    def change(self, public_key: bool = False, **options: str) -> str:
        """CHANGE ... TO with the options named by their SOURCE_ word, in this server's words;
        `public_key`: and GET_SOURCE_PUBLIC_KEY=1 where the server has caching_sha2_password (8.0.4+)."""
        word = "SOURCE" if self._source_words else "MASTER"
        said = [f"{word}_{key}={value}" for key, value in options.items()]
        if public_key and self.mysql_at_least(8, 0, 4):
            said.append(f"GET_{word}_PUBLIC_KEY=1")
        head = "CHANGE REPLICATION SOURCE TO " if self._source_words else "CHANGE MASTER TO "
        return head + ", ".join(said)

    def change_source(self, host: str, port: int, user: str, password: str) -> tuple[str, tuple]:
        """The replica's CHANGE statement with GTID auto-positioning, as (sql, args).

        It retries a lost source every second for a day: with MySQL's retry count of 10 and the
        1 s interval, a source down for more than 10 s (a crash under load, found by
        source-crash-under-load) left the receiver stopped for good. MariaDB retries 86400 times
        by default (master_retry_count). TLS is the `ssl` option's to ask for, off by default as on
        MySQL: MariaDB 11.x's replica asks for it unless told (an 11.8 replica of a 10.5 source, which
        has no certificate, failed to connect: "SSL is required, but the server does not support it")."""
        if self.is_mariadb:
            sql = (
                "CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
                "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_SSL=0"
            )
        else:
            sql = self.change(
                public_key=True, HOST=PLACEHOLDER, PORT=PLACEHOLDER, USER=PLACEHOLDER, PASSWORD=PLACEHOLDER, AUTO_POSITION="1",
                CONNECT_RETRY="1", RETRY_COUNT=str(self.RETRY_COUNT),
            )  # fmt: skip
        return sql, (host, port, user, password)

    RETRY_COUNT = 86400

    @property
    def retry_settings(self) -> str | None:
        """The reconnect settings alone, for a replica configured before they were (MySQL; run with the
        receiver stopped). MariaDB keeps them in master_retry_count, 86400 by default."""
        if self.is_mariadb:
            return None
        return self.change(CONNECT_RETRY="1", RETRY_COUNT=str(self.RETRY_COUNT))

    def set_source_delay(self, seconds: int) -> str:
        if self.is_mariadb:
            return f"CHANGE MASTER TO MASTER_DELAY={int(seconds)}"
        return self.change(DELAY=str(int(seconds)))

    def network_options(self, compression: str, zstd_level: int, ssl: bool) -> list[str]:
        """The replica connection's compression and TLS (run with the replica stopped). MySQL 8.0.18+
        names the algorithm (SOURCE_COMPRESSION_ALGORITHMS: zlib, zstd); before it, and on MariaDB,
        zlib is the only one, turned on by slave_compressed_protocol; zstd is refused there."""
        if compression not in ("uncompressed", "zlib", "zstd"):
            raise ValueError(f"unknown compression {compression!r}")
        if self.mysql_at_least(8, 0, 18):
            return [
                self.change(
                    COMPRESSION_ALGORITHMS=f"'{compression}'", ZSTD_COMPRESSION_LEVEL=str(int(zstd_level)),
                    SSL=str(int(ssl)),
                )
            ]  # fmt: skip
        if compression == "zstd":
            self.require("zstd compression of the replica connection (SOURCE_COMPRESSION_ALGORITHMS)", 8, 0, 18)
        return [
            f"SET GLOBAL slave_compressed_protocol = {int(compression == 'zlib')}",
            self.change(SSL=str(int(ssl))) if not self.is_mariadb else f"CHANGE MASTER TO MASTER_SSL={int(ssl)}",
        ]

    def binlog_compression(self, on: bool) -> str:
        """MySQL 8.0.20+: the source compresses each transaction's events in the binlog (zstd)."""
        self.require("binlog transaction compression (binlog_transaction_compression)", 8, 0, 20)
        return f"SET GLOBAL binlog_transaction_compression = {'ON' if on else 'OFF'}"

    def semi_sync_names(self, role: str) -> tuple[str | None, str | None, str]:
        """(plugin, library, variable prefix) of semi-sync for role 'source' or 'replica'.
        MySQL 8.0.26+ loads semisync_source.so / semisync_replica.so, older MySQL semisync_master.so /
        semisync_slave.so; MariaDB 10.3+ has it built in."""
        if role not in ("source", "replica"):
            raise ValueError(f"role {role!r} is not source or replica")
        old = "master" if role == "source" else "slave"
        if self.is_mariadb:
            return None, None, f"rpl_semi_sync_{old}"
        if not self.mysql_at_least(8, 0, 26):
            return f"rpl_semi_sync_{old}", f"semisync_{old}.so", f"rpl_semi_sync_{old}"
        return f"rpl_semi_sync_{role}", f"semisync_{role}.so", f"rpl_semi_sync_{role}"

    @property
    def start_replica(self) -> str:
        return f"START {self._replica}"

    @property
    def stop_replica(self) -> str:
        return f"STOP {self._replica}"

    def io_thread(self, verb: str) -> str:
        """START or STOP the receiver (I/O) thread only."""
        if verb not in ("START", "STOP"):
            raise ValueError(f"verb {verb!r} is not START or STOP")
        return f"{verb} {self._replica} IO_THREAD"

    @property
    def replica_status(self) -> str:
        return f"SHOW {self._replica} STATUS"

    @property
    def reset_replica(self) -> str:
        return f"RESET {self._replica} ALL"

    @property
    def reset_binary_logs(self) -> str:
        """Drops the binary logs and the executed set (RESET MASTER before MySQL 8.2, removed in 8.4)."""
        return "RESET BINARY LOGS AND GTIDS" if self.mysql_at_least(8, 2, 0) else "RESET MASTER"

    def set_lasting(self, variable: str, value: int | str) -> str:
        """SET PERSIST where the server has it, else SET GLOBAL."""
        return f"SET {'PERSIST' if self.persists else 'GLOBAL'} {variable} = {value}"

    @property
    def skip_replica_start(self) -> str:
        """The option that keeps the replica threads stopped at server start (renamed in 8.0.26)."""
        return "skip_replica_start" if self.mysql_at_least(8, 0, 26) else "skip_slave_start"

    @property
    def executed_gtids(self) -> str:
        """The source's executed GTID set, in the form the replica's wait function takes."""
        return (
            "SELECT @@GLOBAL.gtid_binlog_pos AS gtids" if self.is_mariadb else "SELECT @@GLOBAL.gtid_executed AS gtids"
        )

    def wait_for_gtids(self) -> str:
        """(gtids, timeout) -> `done`: 1 when executed, 0 on timeout."""
        if self.is_mariadb:
            return "SELECT MASTER_GTID_WAIT(%s, %s) = 0 AS done"
        return "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s) = 0 AS done"

    @property
    def applier_timestamps(self) -> str | None:
        """MySQL 8.0.1+ only, one row: the newest applied transaction (original commit, start and end of
        its apply, by the worker that applied last) and the last one the receiver queued (original
        commit, end of queueing), as epoch seconds, each with its GTID: what the lag split is made of."""
        if self.lag_split_unavailable:
            return None
        return (
            "SELECT w.gtid AS applied_gtid, w.committed, w.started, w.applied, "
            "c.gtid AS queued_gtid, c.committed AS queued_committed, c.queued FROM "
            "(SELECT LAST_APPLIED_TRANSACTION AS gtid, "
            "UNIX_TIMESTAMP(LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP) AS committed, "
            "UNIX_TIMESTAMP(LAST_APPLIED_TRANSACTION_START_APPLY_TIMESTAMP) AS started, "
            "UNIX_TIMESTAMP(LAST_APPLIED_TRANSACTION_END_APPLY_TIMESTAMP) AS applied "
            "FROM performance_schema.replication_applier_status_by_worker WHERE CHANNEL_NAME = '' "
            "ORDER BY LAST_APPLIED_TRANSACTION_END_APPLY_TIMESTAMP DESC LIMIT 1) w "
            "LEFT JOIN (SELECT LAST_QUEUED_TRANSACTION AS gtid, "
            "UNIX_TIMESTAMP(LAST_QUEUED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP) AS committed, "
            "UNIX_TIMESTAMP(LAST_QUEUED_TRANSACTION_END_QUEUE_TIMESTAMP) AS queued "
            "FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = '') c ON TRUE"
        )


NEWEST_MYSQL = Dialect("mysql")  # the newest MySQL's statements: the default where no server was asked


def replica_field(status: dict, name: str) -> object:
    """Read SHOW REPLICA STATUS by its MySQL 8.0.22+ name, falling back to the Master/Slave name."""
    if name in status:
        return status[name]
    legacy = name.replace("Replica", "Slave").replace("Source", "Master")
    return status.get(legacy)


def executed_gtids(conn: pymysql.connections.Connection, dialect: Dialect) -> str:
    """The server's executed GTID set, in the form the replica's wait function takes."""
    with conn.cursor() as cur:
        cur.execute(dialect.executed_gtids)
        return cur.fetchone()["gtids"]


def wait_executed(
    conn: pymysql.connections.Connection, dialect: Dialect, gtids: str, timeout: float, sleep=None
) -> bool:
    """Waits (at most `timeout` s, at least 1) until the server of `conn` has executed `gtids`: the one
    GTID wait of the lab. `conn` needs a read timeout longer than the wait (connect(read_timeout=)).

    With `sleep` (a scenario run's: it raises once the run is cancelled), the wait is one-second waits
    on the server with a call of sleep(0) between them, so a cancelled run is out of it within a second
    (#52.3: one WAIT_FOR_EXECUTED_GTID_SET of up to 600 s held a deleted run)."""

    def once(seconds: int) -> bool:
        with conn.cursor() as cur:
            cur.execute(dialect.wait_for_gtids(), (gtids, seconds))
            return bool(cur.fetchone()["done"])

    if sleep is None:
        return once(max(1, int(timeout)))
    try:
        return poll(lambda: once(1), max(1.0, timeout), interval=0.0, what="the GTID set", sleep=sleep)
    except TimedOut:
        return False


def server_version(endpoint: Endpoint) -> str:
    conn = connect(endpoint, timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION() AS v")
            return cur.fetchone()["v"]
    finally:
        conn.close()


def server_dialect(conn: pymysql.connections.Connection) -> Dialect:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION() AS v")
        return Dialect.from_version(cur.fetchone()["v"])


FURTHER_REPLICA = re.compile(r"^mysql-target-([1-9][0-9]{0,3})$")


def further_replicas(services, settings) -> list[Endpoint]:
    """The replicas of the source besides mysql-target among these running services: on Kubernetes
    the pods k > 0 of a scaled mysql-target StatefulSet (the platform names them mysql-target-k),
    reached through its headless Service as mysql-target-k.mysql-target. None on Docker."""
    found = sorted((int(m[1]), s) for s in services if (m := FURTHER_REPLICA.match(s)))
    return [Endpoint(f"{name}.mysql-target", 3306, "root", settings.MYSQL_ROOT_PASSWORD, name) for _, name in found]


def lab_endpoints(settings, environ) -> tuple[Endpoint, Endpoint]:
    """(source, target) as root. Inside the lab: the compose services; LAGLAB_SOURCE / LAGLAB_TARGET
    (host:port) override that, e.g. to run the controller on the host against the published ports."""

    def parse(var: str, default: str, name: str) -> Endpoint:
        host, _, port = environ.get(var, default).rpartition(":")
        return Endpoint(host, int(port), "root", settings.MYSQL_ROOT_PASSWORD, name)

    return (
        parse("LAGLAB_SOURCE", "mysql-source:3306", "mysql-source"),
        parse("LAGLAB_TARGET", "mysql-target:3306", "mysql-target"),
    )
