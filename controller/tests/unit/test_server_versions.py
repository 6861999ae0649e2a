"""The dialect against what each server version answers (tests/unit/server_versions.py: the rules, each
with the source it was read from; the ones for MySQL 9.7 and MariaDB 10.5/10.11/11.8 are also checked
against the real servers by tests/integration/test_server_versions.py)."""

import subprocess
from pathlib import Path

import pytest

from laglab.replicators import handover, native
from laglab.replicators.db import Dialect, Endpoint, VersionUnsupported, parse_version
from laglab.replicators.group_replication import recovery_statements

from .server_versions import PARSE_ERROR, ServerError, answer, versioned_server

MYSQL = ["5.7.44-log", "5.7.44-48", "8.0.21", "8.0.22", "8.0.25", "8.0.36-28", "8.4.6", "9.7.4"]
MARIADB = ["10.5.29-MariaDB-0+deb11u1", "10.6.21-MariaDB", "10.11.14-MariaDB-0+deb12u1", "11.8.3-MariaDB-1"]
ROOT = Path(__file__).resolve().parents[3]
SOURCE = Endpoint("mysql-source", 3306, "root", "pw", "mysql-source")


@pytest.mark.parametrize(
    ("version", "parsed"),
    [("5.7.44-log", (5, 7, 44)), ("8.0.36-28", (8, 0, 36)), ("10.11.14-MariaDB-0+deb12u1", (10, 11, 14)), ("8.4", (8, 4, 0))],
)  # fmt: skip
def test_versions_are_read_as_servers_report_them(version, parsed):
    assert parse_version(version) == parsed
    with pytest.raises(ValueError, match="not a server version"):
        parse_version("MySQL")


def test_the_fake_servers_refuse_what_their_version_does_not_know():
    """The rules can fail: the newest server's statements on 5.7, 5.7's on 8.4."""
    newest = Dialect("mysql")
    assert answer("5.7.44-log", newest.start_replica) == (PARSE_ERROR, "REPLICA keyword: 8.0.22")
    assert answer("5.7.44-log", newest.change_source("h", 1, "u", "p")[0])[0] == PARSE_ERROR
    assert answer("8.4.6", "CHANGE MASTER TO MASTER_HOST='x'")[0] == PARSE_ERROR
    assert answer("8.4.6", "INSTALL PLUGIN rpl_semi_sync_master SONAME 'semisync_master.so'")[0] == 1126
    assert answer("10.11.14-MariaDB", newest.change_source("h", 1, "u", "p")[0])[0] == PARSE_ERROR
    assert answer("8.0.19", "SET GLOBAL binlog_transaction_compression = OFF")[0] == 1193


@pytest.mark.parametrize("version", MYSQL + MARIADB)
def test_a_replica_is_set_up_in_its_servers_words(version):
    """The set-up job's statements on an unconfigured replica, then on a healthy one with the old
    retry count (MySQL), then the server id: each accepted by that version."""
    dialect = Dialect.from_version(version)
    fresh = versioned_server(version, replicating=False)
    assert native.configure_target(fresh, dialect, SOURCE, "repl", "pw") == "configured"
    assert fresh.log[-1] == dialect.start_replica
    assert ("SLAVE" in dialect.start_replica) == ("MariaDB" in version or parse_version(version) < (8, 0, 22))

    def retries(sql, args):
        return []

    healthy = versioned_server(version, retries)
    healthy_status = native.replica_state(healthy, dialect)
    assert native.is_healthy(healthy_status, "mysql-source")
    native.own_server_id(versioned_server(version, lambda sql, args: [{"id": 2}]), dialect, 3)


@pytest.mark.parametrize("version", MYSQL + MARIADB)
def test_semi_sync_is_turned_on_with_this_versions_plugin_and_names(version):
    dialect = Dialect.from_version(version)
    for role in ("source", "replica"):
        server = versioned_server(version)
        for sql in native.semi_sync_statements(dialect, role, True, 10000, installed=False):
            with server.cursor() as cur:
                cur.execute(sql)
        if "MariaDB" not in version and parse_version(version) < (8, 0, 26):
            assert any("rpl_semi_sync_master" in s or "rpl_semi_sync_slave" in s for s in server.log)  # [semi57]


@pytest.mark.parametrize("version", MYSQL + MARIADB)
def test_the_replica_connections_options_run_or_are_refused_with_the_version_that_brings_them(version):
    dialect = Dialect.from_version(version)
    server = versioned_server(version)

    def run(wanted):
        for _, sql in native.option_statements(dialect, wanted):
            with server.cursor() as cur:
                cur.execute(sql)

    run(native.DEFAULT_NETWORK)  # the defaults: every version
    mysql = "MariaDB" not in version
    run(("zlib", 3, False, False))  # zlib: every version (slave_compressed_protocol before 8.0.18)
    for wanted, needs in ((("zstd", 3, False, False), (8, 0, 18)), (("uncompressed", 3, False, True), (8, 0, 20))):
        if mysql and parse_version(version) >= needs:
            run(wanted)
        else:
            with pytest.raises(VersionUnsupported, match=r"needs MySQL 8\.0\.(18|20) or newer; the server is "):
                run(wanted)
    run(("uncompressed", 3, True, False))  # TLS: every version (MASTER_SSL)


@pytest.mark.parametrize("version", MYSQL + MARIADB)
def test_the_lag_split_is_read_where_the_server_has_it_and_said_unavailable_elsewhere(version):
    dialect = Dialect.from_version(version)
    if dialect.applier_timestamps is None:
        assert "has no per-transaction applier timestamps" in dialect.lag_split_unavailable
        assert "MariaDB" in version or parse_version(version) < (8, 0, 1)
        return
    assert dialect.lag_split_unavailable is None
    with versioned_server(version).cursor() as cur:
        cur.execute(dialect.applier_timestamps)
        cur.execute(dialect.wait_for_gtids(), ("uuid:1", 1))


@pytest.mark.parametrize("version", MYSQL)
def test_the_dtle_hand_over_holds_and_resumes_where_the_server_can_persist(version):
    dialect = Dialect.from_version(version)
    executed = "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"

    def rows(sql, args):
        return [{"g": executed, "same": 1}] if "gtid_executed AS g" in sql else []

    server = versioned_server(version, rows)
    if parse_version(version) < (8, 0, 11):
        with pytest.raises(VersionUnsupported, match=r"SET PERSIST_ONLY\) needs MySQL 8\.0\.11 or newer"):
            handover.hold(server, dialect)
        return
    handover.hold(server, dialect)
    handover.resume(server, executed, dialect)
    assert server.log[-2:] == [dialect.start_replica, handover.release_statement(dialect)]
    assert ("RESET MASTER" in server.log) == (parse_version(version) < (8, 2, 0))


@pytest.mark.parametrize("version", MYSQL)
def test_group_replications_recovery_account_in_this_versions_words(version):
    dialect = Dialect.from_version(version)
    server = versioned_server(version)
    for sql, args in recovery_statements("repl", "pw", dialect):
        with server.cursor() as cur:
            cur.execute(sql, args)
    assert server.log[-1].endswith("FOR CHANNEL 'group_replication_recovery'")


def test_a_statement_the_server_refuses_is_its_error_not_a_silent_pass():
    server = versioned_server("5.7.44-log")
    with pytest.raises(ServerError) as refused, server.cursor() as cur:
        cur.execute("SET PERSIST server_id = 3")
    assert refused.value.code == PARSE_ERROR


# MySQL 5.7's server variables that laglab's 5.7 option files set, as the MySQL 5.7 Reference Manual's
# "Server Option, System Variable, and Status Variable Reference" (5.1.3) lists them, and Group
# Replication's requirements (17.7.1: binlog_checksum=NONE, log_slave_updates, master_info_repository
# and relay_log_info_repository=TABLE, transaction_write_set_extraction=XXHASH64). The 8.0-and-newer
# files may not need them: 9.7 refuses master_info_repository (tests/integration/test_server_versions.py).
MYSQL_57_VARIABLES = {
    "server_id", "log_bin", "gtid_mode", "enforce_gtid_consistency", "binlog_format", "binlog_row_image",
    "relay_log", "relay_log_recovery", "master_info_repository", "relay_log_info_repository",
    "skip_name_resolve", "max_connections", "log_slave_updates", "binlog_checksum",
    "transaction_write_set_extraction", "innodb_buffer_pool_size", "character_set_server", "collation_server",
}  # fmt: skip
# Named in 8.0 and newer only (the 8.0 manual's "Added in" notes): a 5.7 server refuses to start on them.
MYSQL_80_ONLY = {
    "binlog_transaction_compression",
    "replica_parallel_workers",
    "log_replica_updates",
    "skip_replica_start",
}


def option_names(path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        key = line.split("=", 1)[0].strip()
        if "=" in line and not line.lstrip().startswith("#") and not key.startswith(("loose-", "plugin-load")):
            names.add(key.replace("-", "_"))
    return names


@pytest.mark.parametrize("path", ["mysql-5.7/source.cnf", "mysql-5.7/target.cnf", "group-replication-5.7/node.cnf"])
def test_the_57_option_files_name_only_what_57_knows(path):
    names = option_names(ROOT / "config" / path)
    assert names and names <= MYSQL_57_VARIABLES, names - MYSQL_57_VARIABLES
    assert not names & MYSQL_80_ONLY


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("mysql:5.7", "none none mysql-5.7"),  # never 9.7 in 5.7's place
        ("mysql:8.0.21", "none none mysql"),
        ("percona/percona-server:5.7", "none none mysql-5.7"),
        ("percona/percona-server:8.4", "none none mysql"),
        ("mysql:8.4", "laglab/mysql:9.7-debian sid mysql"),
        ("mysql:9", "laglab/mysql:9.7-debian sid mysql"),
        ("mariadb:10.5", "laglab/mariadb:10.5-debian bullseye mariadb"),
        ("mariadb:11.4", "laglab/mariadb:10.11-debian bookworm mariadb"),
        ("mariadb:11.8", "laglab/mariadb:11.8-debian trixie mariadb"),
    ],
)
def test_what_stands_in_for_an_image_that_cannot_be_pulled(image, expected):
    done = subprocess.run(
        [str(ROOT / "scripts/images"), "--standin", image], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
