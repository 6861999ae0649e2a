"""The lab's own server (Debian's MySQL 9.7 here) against the version rules the versions not here are
tested with (#39): its grammar, the options of its files, the compression options in its words.
MariaDB 10.5, 11.8 and a cross-version pair: test_server_versions.py."""

from __future__ import annotations

import pytest

from laglab.replicators import native
from laglab.replicators.db import Dialect, connect

from .conftest import ROOT, query, wait_until
from .server_probe import grammar_disagreements, option_names, unknown_options

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab


def test_mysql_97_answers_as_the_rules_say_and_knows_every_option_of_its_files(source_ep, target_ep):
    """The lab `make up` leaves runs Debian's MySQL 9.7: the grammar the rules give 8.4 and newer is its
    grammar, config/mysql's options are all its own, and 5.7's extra ones are unknown to it (which is
    why config/mysql-5.7 is a file of its own)."""
    conn = connect(target_ep, timeout=5)
    try:
        version = query(conn, "SELECT VERSION() AS v")[0]["v"]
        assert version.startswith("9.7."), version
        assert grammar_disagreements(conn, version) == []
        for name in ("source.cnf", "target.cnf"):
            assert unknown_options(conn, option_names(ROOT / "config/mysql" / name)) == []
        extra = set(option_names(ROOT / "config/mysql-5.7/target.cnf")) - set(
            option_names(ROOT / "config/mysql/target.cnf")
        )
        assert extra and all("Unknown system variable" in u for u in unknown_options(conn, sorted(extra)))
    finally:
        conn.close()


def test_mysql_97_takes_the_compression_options_in_its_words_and_gives_them_back(source_ep, target_ep):
    """The statements the dialect writes for zstd and binlog compression, run on the real 9.7 pair: the
    server's own configuration tables say they took, and the defaults come back."""
    servers = {"source": connect(source_ep, timeout=5), "target": connect(target_ep, timeout=5, read_timeout=60)}
    dialect = Dialect.from_version(query(servers["target"], "SELECT VERSION() AS v")[0]["v"])

    def apply(wanted):
        for server, sql in native.option_statements(dialect, wanted):
            query(servers[server], sql)

    config = (
        "SELECT COMPRESSION_ALGORITHM AS c, ZSTD_COMPRESSION_LEVEL AS z FROM "
        "performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = ''"
    )
    try:
        apply(("zstd", 7, False, True))
        assert query(servers["target"], config)[0] == {"c": "zstd", "z": 7}
        assert query(servers["source"], "SELECT @@GLOBAL.binlog_transaction_compression AS b")[0]["b"] == 1
    finally:
        apply(native.DEFAULT_NETWORK)
    try:
        assert query(servers["target"], config)[0]["c"] == "uncompressed"
        assert query(servers["source"], "SELECT @@GLOBAL.binlog_transaction_compression AS b")[0]["b"] == 0
        wait_until(lambda: query(servers["target"], dialect.replica_status)[0]["Replica_IO_Running"] == "Yes", 30,
                   message="the replica running again")  # fmt: skip
    finally:
        for conn in servers.values():
            conn.close()
