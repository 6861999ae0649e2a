"""Probes of a running server against the version rules of tests/unit/server_versions.py: its parser
(PREPARE parses a statement and never runs it), its variables, and the options an option file sets."""

from __future__ import annotations

import re

import pymysql

from laglab.replicators.db import Dialect

from ..unit.server_versions import PARSE_ERROR, UNKNOWN_VARIABLE, answer

# Statements whose grammar differs between versions: every form the dialect writes for any version,
# and the forms of the others. Probed with PREPARE, which parses a statement and never runs it.
GRAMMAR = [
    "START REPLICA", "START SLAVE", "STOP REPLICA IO_THREAD", "STOP SLAVE IO_THREAD", "SHOW REPLICA STATUS",
    "SHOW SLAVE STATUS", "RESET REPLICA ALL", "RESET SLAVE ALL", "RESET MASTER", "RESET BINARY LOGS AND GTIDS",
    "SET PERSIST server_id = 2", "SET PERSIST_ONLY skip_replica_start = ON", "RESET PERSIST IF EXISTS skip_replica_start",
    "GRANT REPLICATION SLAVE, BACKUP_ADMIN, CONNECTION_ADMIN ON *.* TO laglab_probe",
    "CHANGE MASTER TO MASTER_USE_GTID=slave_pos",
    *(
        Dialect.from_version(v).change_source("h", 3306, "u", "p")[0] % ("'h'", 3306, "'u'", "'p'")
        for v in ("5.7.44", "8.0.21", "9.7.4", "10.11.6-MariaDB")
    ),
    "CHANGE REPLICATION SOURCE TO SOURCE_COMPRESSION_ALGORITHMS='zstd', SOURCE_ZSTD_COMPRESSION_LEVEL=3, SOURCE_SSL=0",
    "CHANGE MASTER TO MASTER_SSL=1",
]  # fmt: skip
VARIABLES = ["binlog_transaction_compression", "skip_replica_start", "master_info_repository", "gtid_mode"]


def grammar_disagreements(conn, version: str) -> list[str]:
    """Where the real server's parser and the rules disagree: (statement, real, rules)."""
    out = []
    with conn.cursor() as cur:
        for sql in GRAMMAR:
            try:
                cur.execute("PREPARE laglab_probe FROM %s", (sql,))
                cur.execute("DEALLOCATE PREPARE laglab_probe")
                real = None
            except pymysql.MySQLError as error:
                real = error.args[0]
            rules = answer(version, sql)
            if (real == PARSE_ERROR) != (rules is not None and rules[0] == PARSE_ERROR):
                out.append(f"{sql!r}: the server answers {real}, the rules {rules}")
        for name in VARIABLES:
            try:
                cur.execute(f"SELECT @@GLOBAL.{name} AS v")
                real = None
            except pymysql.MySQLError as error:
                real = error.args[0]
            rules = answer(version, f"SET GLOBAL {name} = 0")
            if (real == UNKNOWN_VARIABLE) != (rules is not None and rules[0] == UNKNOWN_VARIABLE):
                out.append(f"@@{name}: the server answers {real}, the rules {rules}")
    return out


def option_names(path) -> list[str]:
    """The variables an option file sets (its `loose-` and plugin-loading lines aside)."""
    names = []
    for line in path.read_text().splitlines():
        m = re.match(r"^([a-z][a-z0-9-]*)\s*=", line.strip())
        if m and not m[1].startswith("loose-") and m[1] not in ("plugin-load-add",):
            names.append(m[1].replace("-", "_"))
    return names


def unknown_options(conn, names) -> list[str]:
    out = []
    with conn.cursor() as cur:
        for name in names:
            try:
                cur.execute(f"SELECT @@GLOBAL.{name} AS v")
            except pymysql.MySQLError as error:
                out.append(f"{name}: {error.args[1]}")
    return out
