"""What each server version answers to the statements laglab sends: a fake server per version that
refuses what that version refuses, with the error the real one gives, so that the dialect is tested
against the servers customers run (MySQL 5.7 and 8.0 cannot be had on these machines).

Each rule names where it was read. Sources:

- [rn80] MySQL 8.0 Reference Manual, statement pages (dev.mysql.com/doc/refman/8.0/en/): start-slave.html,
  show-slave-status.html, reset-slave.html ("From MySQL 8.0.22, START SLAVE is deprecated and the
  alias START REPLICA should be used instead"; the same words for SHOW ... STATUS and RESET);
  change-master-to.html ("From MySQL 8.0.23, use CHANGE REPLICATION SOURCE TO"); replication-options
  (skip_replica_start, rpl_semi_sync_source from 8.0.26); change-replication-source-to.html
  (SOURCE_COMPRESSION_ALGORITHMS / MASTER_COMPRESSION_ALGORITHMS from 8.0.18, GET_MASTER_PUBLIC_KEY
  from 8.0.4); binlog_transaction_compression (replication-options-binary-log.html, 8.0.20);
  set-variable.html (SET PERSIST, PERSIST_ONLY and RESET PERSIST: 8.0.11 GA).
- [rn84] MySQL 8.4 release notes, "Deprecation and Removal Notes" (8.4.0): CHANGE MASTER TO, START
  SLAVE, STOP SLAVE, SHOW SLAVE STATUS, RESET SLAVE, RESET MASTER and the semisync_master.so /
  semisync_slave.so plugins removed. Checked on the real MySQL 9.7.4 here by
  tests/integration/test_server_versions.py (its answers are these rules' answers).
- [rn82] MySQL 8.2.0 release notes: RESET BINARY LOGS AND GTIDS replaces RESET MASTER.
- [rn83] MySQL 8.3.0 release notes: master_info_repository and relay_log_info_repository removed
  (deprecated since 8.0.23); the real 9.7.4 here answers ER_UNKNOWN_SYSTEM_VARIABLE for both.
- [ps801] MySQL 8.0 Reference Manual, performance-schema-replication-applier-status-by-worker-table.html:
  LAST_APPLIED_TRANSACTION_* timestamps (WL#7374, 8.0.1); the same for replication_connection_status's
  LAST_QUEUED_TRANSACTION_*.
- [semi57] mysql/mysql-server, mysql-test/suite/rpl/r/rpl_semi_sync.result at 0accbd0364e0 (the
  5.x line): INSTALL PLUGIN rpl_semi_sync_master SONAME 'SEMISYNC_MASTER_SO', `set global
  rpl_semi_sync_master_enabled = 1`, status Rpl_semi_sync_master_clients / _status, and
  rpl_semi_sync_slave_enabled on the replica.
- [ssl57] mysql/mysql-server, sql/rpl_slave.cc, show_slave_status() (5.6/5.7 line, read through the
  code index): SHOW SLAVE STATUS's columns Master_Host, Slave_IO_Running, Slave_SQL_Running,
  Seconds_Behind_Master, Last_IO_Error, Last_SQL_Error, Master_Retry_Count, Auto_Position.
- [maria] MariaDB Knowledge Base: CHANGE MASTER TO (MASTER_USE_GTID), SHOW REPLICA STATUS and START
  REPLICA as aliases from 10.5.1, semi-sync built in from 10.3.3 (rpl_semi_sync_master_enabled), no
  SET PERSIST, no CHANGE REPLICATION SOURCE, GTIDs of its own (no gtid_mode, no *_info_repository);
  checked on the real 10.5 and 11.8 here.
"""

from __future__ import annotations

import re

from laglab.replicators.db import parse_version

from .fakes import FakeConnection

PARSE_ERROR = 1064  # ER_PARSE_ERROR: the statement is not of this version's grammar
UNKNOWN_VARIABLE = 1193  # ER_UNKNOWN_SYSTEM_VARIABLE
UNKNOWN_TABLE_COLUMN = 1054  # ER_BAD_FIELD_ERROR
CANT_OPEN_LIBRARY = 1126  # ER_CANT_OPEN_LIBRARY: INSTALL PLUGIN of a library the server does not ship
UNKNOWN_PRIVILEGE = 3619  # ER_UNKNOWN_PRIVILEGE / 5.7's parse error on a dynamic privilege


class ServerError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(code, message)
        self.code = code


def _mysql(version: tuple, sql: str) -> tuple[int, str] | None:
    """MySQL's (and Percona Server's: the same grammar) answer to `sql`: None (accepted) or (code, why)."""
    upper = " ".join(sql.upper().split())
    at_least = version.__ge__
    rules = [
        # [rn80] [rn84]
        (r"^(START|STOP|RESET) REPLICA\b|^SHOW REPLICA STATUS", at_least((8, 0, 22)), "REPLICA keyword: 8.0.22"),
        (r"^(START|STOP|RESET) SLAVE\b|^SHOW SLAVE STATUS", version < (8, 4, 0), "SLAVE forms removed in 8.4"),
        (r"^CHANGE REPLICATION SOURCE TO", at_least((8, 0, 23)), "CHANGE REPLICATION SOURCE: 8.0.23"),
        (r"^CHANGE MASTER TO", version < (8, 4, 0), "CHANGE MASTER removed in 8.4"),
        (r"\b(SOURCE|MASTER)_COMPRESSION_ALGORITHMS\b", at_least((8, 0, 18)), "compression options: 8.0.18"),
        (r"\bGET_(SOURCE|MASTER)_PUBLIC_KEY\b", at_least((8, 0, 4)), "GET_MASTER_PUBLIC_KEY: 8.0.4"),
        (r"\bMASTER_USE_GTID\b", False, "MariaDB's option"),
        # [rn82] [rn84]
        (r"^RESET BINARY LOGS AND GTIDS", at_least((8, 2, 0)), "RESET BINARY LOGS AND GTIDS: 8.2.0"),
        (r"^RESET MASTER", version < (8, 4, 0), "RESET MASTER removed in 8.4"),
        # [rn80] set-variable.html
        (r"^SET PERSIST(_ONLY)? |^RESET PERSIST", at_least((8, 0, 11)), "SET PERSIST: 8.0.11"),
        # dynamic privileges (8.0): 5.7's grammar has no such privilege names
        (r"^GRANT .*\b(BACKUP_ADMIN|CONNECTION_ADMIN)\b", at_least((8, 0, 0)), "dynamic privileges: 8.0"),
    ]
    for pattern, allowed, why in rules:
        if re.search(pattern, upper) and not allowed:
            return PARSE_ERROR, why
    # [semi57] [rn80] [rn84]: the semi-sync plugins' libraries
    if (m := re.search(r"SONAME '(SEMISYNC_\w+)\.SO'", upper)) is not None:
        library = m[1].lower()
        shipped = {"semisync_master", "semisync_slave"} if version < (8, 4, 0) else set()
        if version >= (8, 0, 26):
            shipped |= {"semisync_source", "semisync_replica"}
        if library not in shipped:
            return CANT_OPEN_LIBRARY, f"{library}.so is not shipped with {version}"
    variables = {
        "binlog_transaction_compression": version >= (8, 0, 20),
        "skip_replica_start": version >= (8, 0, 26),
        "rpl_semi_sync_source_enabled": version >= (8, 0, 26),
        "rpl_semi_sync_source_timeout": version >= (8, 0, 26),
        "rpl_semi_sync_replica_enabled": version >= (8, 0, 26),
        "rpl_semi_sync_master_enabled": version < (8, 4, 0),
        "rpl_semi_sync_master_timeout": version < (8, 4, 0),
        "rpl_semi_sync_slave_enabled": version < (8, 4, 0),
        # [rn83] removed in 8.3.0 (FILE repositories gone; 9.7 here refuses the name)
        "master_info_repository": version < (8, 3, 0),
        "relay_log_info_repository": version < (8, 3, 0),
        "gtid_mode": version >= (5, 6, 5),
    }
    for name, known in variables.items():
        if re.search(rf"\b{name}\b", sql, re.IGNORECASE) and not known:
            return UNKNOWN_VARIABLE, f"Unknown system variable '{name}'"
    # [ps801]
    if "LAST_APPLIED_TRANSACTION" in upper and version < (8, 0, 1):
        return UNKNOWN_TABLE_COLUMN, "Unknown column 'LAST_APPLIED_TRANSACTION' (performance_schema, 8.0.1)"
    return None


def _mariadb(version: tuple, sql: str) -> tuple[int, str] | None:
    """MariaDB's answer [maria]."""
    upper = " ".join(sql.upper().split())
    refused = [
        (r"^CHANGE REPLICATION SOURCE|\bSOURCE_[A-Z_]+=|\bMASTER_AUTO_POSITION\b|\bGET_\w+_PUBLIC_KEY\b", True),
        (r"^(START|STOP|RESET) REPLICA\b|^SHOW REPLICA STATUS", version < (10, 5, 1)),
        (r"^SET PERSIST|^RESET PERSIST|^RESET BINARY LOGS AND GTIDS", True),
        (r"\bMASTER_COMPRESSION_ALGORITHMS\b|\bBACKUP_ADMIN\b|\bCONNECTION_ADMIN\b", True),
    ]
    for pattern, refuses in refused:
        if refuses and re.search(pattern, upper):
            return PARSE_ERROR, f"not MariaDB {version}'s grammar"
    if "INSTALL PLUGIN RPL_SEMI_SYNC" in upper:
        return CANT_OPEN_LIBRARY, "semi-sync is built into MariaDB (10.3.3+)"
    for name in ("binlog_transaction_compression", "skip_replica_start", "rpl_semi_sync_source_enabled",
                 "master_info_repository", "relay_log_info_repository", "gtid_mode"):  # fmt: skip
        if re.search(rf"\b{name}\b", sql, re.IGNORECASE):
            return UNKNOWN_VARIABLE, f"Unknown system variable '{name}'"
    if "LAST_APPLIED_TRANSACTION" in upper or "WAIT_FOR_EXECUTED_GTID_SET" in upper:
        return UNKNOWN_TABLE_COLUMN, "MySQL's performance_schema columns / function"
    return None


def answer(version: str, sql: str) -> tuple[int, str] | None:
    """What a server reporting `version` (SELECT VERSION()) answers to `sql`: None when it accepts it."""
    parsed = parse_version(version)
    return _mariadb(parsed, sql) if "mariadb" in version.lower() else _mysql(parsed, sql)


def status_row(version: str) -> dict:
    """One row of the replica status in this version's column names ([ssl57]; renamed in 8.0.22 for
    SHOW REPLICA STATUS; MariaDB keeps the Slave_/Master_ names in both forms)."""
    old = "mariadb" in version.lower() or parse_version(version) < (8, 0, 22)
    row = {
        "Source_Host": "mysql-source",
        "Replica_IO_Running": "Yes",
        "Replica_SQL_Running": "Yes",
        "Seconds_Behind_Source": 0,
        "Source_Retry_Count": 86400,
        "Last_IO_Error": "",
        "Last_SQL_Error": "",
        "Last_Error": "",
    }
    if not old:
        return row
    return {k.replace("Replica", "Slave").replace("Source", "Master"): v for k, v in row.items()}


def versioned_server(version: str, rows=lambda sql, args: [], replicating: bool = True) -> FakeConnection:
    """A PyMySQL connection to a server of one version (the unit tests' FakeConnection): statements it
    refuses raise ServerError with its error code, as PyMySQL raises the real one's; every statement is
    logged. `rows(sql, args)` answers what the test needs beyond VERSION() and the replica status."""

    def answer_as_the_version_does(sql, args):
        refused = answer(version, sql)
        if refused:
            raise ServerError(*refused)
        if sql.strip().upper() == "SELECT VERSION() AS V":
            return [{"v": version}]
        if re.match(r"SHOW (REPLICA|SLAVE) STATUS", sql, re.IGNORECASE):
            return [status_row(version)] if replicating else []
        return list(rows(sql, args))

    return FakeConnection(answer_as_the_version_does)
