import pytest

from laglab.replicators.db import Dialect, quote_identifier, replica_field


@pytest.mark.parametrize(
    ("version", "flavor"),
    [
        ("9.7.4-2", "mysql"),
        ("8.4.6", "mysql"),
        ("10.11.18-MariaDB-0+deb12u1-log", "mariadb"),
        ("11.4.3-MariaDB", "mariadb"),
    ],
)
def test_flavour_from_server_version(version, flavor):
    assert Dialect.from_version(version).flavor == flavor


def test_mysql_change_source_uses_auto_position_and_public_key():
    sql, args = Dialect("mysql").change_source("mysql-source", 3306, "repl", "pw")
    assert sql.startswith("CHANGE REPLICATION SOURCE TO SOURCE_HOST=%s, SOURCE_PORT=%s")
    assert "SOURCE_AUTO_POSITION=1" in sql
    assert "GET_SOURCE_PUBLIC_KEY=1" in sql
    assert "MASTER" not in sql
    assert args == ("mysql-source", 3306, "repl", "pw")


def test_mariadb_change_master_uses_slave_pos():
    sql, args = Dialect("mariadb").change_source("mysql-source", 3306, "repl", "pw")
    assert sql.startswith("CHANGE MASTER TO MASTER_HOST=%s")
    assert "MASTER_USE_GTID=slave_pos" in sql
    assert "SOURCE_" not in sql
    assert args == ("mysql-source", 3306, "repl", "pw")


def test_source_delay_statement():
    assert Dialect("mysql").set_source_delay(3) == "CHANGE REPLICATION SOURCE TO SOURCE_DELAY=3"
    assert Dialect("mariadb").set_source_delay(3) == "CHANGE MASTER TO MASTER_DELAY=3"


def test_gtid_statements_per_flavour():
    assert "gtid_executed" in Dialect("mysql").executed_gtids
    assert "WAIT_FOR_EXECUTED_GTID_SET" in Dialect("mysql").wait_for_gtids()
    assert "gtid_binlog_pos" in Dialect("mariadb").executed_gtids
    assert "MASTER_GTID_WAIT" in Dialect("mariadb").wait_for_gtids()
    assert Dialect("mysql").reset_replica == "RESET REPLICA ALL"
    assert Dialect("mariadb").reset_replica == "RESET SLAVE ALL"


def test_applier_timestamps_only_on_mysql():
    assert "replication_applier_status_by_worker" in Dialect("mysql").applier_timestamps
    assert Dialect("mariadb").applier_timestamps is None


def test_replica_field_reads_both_namings():
    assert replica_field({"Replica_IO_Running": "Yes"}, "Replica_IO_Running") == "Yes"
    assert replica_field({"Slave_IO_Running": "No"}, "Replica_IO_Running") == "No"
    assert replica_field({"Seconds_Behind_Master": 4}, "Seconds_Behind_Source") == 4
    assert replica_field({}, "Seconds_Behind_Source") is None


def test_identifier_quoting():
    assert quote_identifier("sbtest1") == "`sbtest1`"
    assert quote_identifier("a`b") == "`a``b`"


def test_the_one_gtid_wait():
    from laglab.replicators.db import Dialect, wait_executed

    class Cursor:
        def __init__(self, done):
            self.done, self.ran = done, []

        def execute(self, sql, args):
            self.ran.append((sql, args))

        def fetchone(self):
            return {"done": self.done}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cursor = Cursor(1)
    conn = type("Conn", (), {"cursor": lambda self: cursor})()
    assert wait_executed(conn, Dialect.from_version("9.7.4"), "uuid:1-5", 0.2) is True
    assert cursor.ran == [("SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s) = 0 AS done", ("uuid:1-5", 1))]
    cursor.done, cursor.ran = 0, []
    assert wait_executed(conn, Dialect.from_version("10.11.6-MariaDB"), "0-1-5", 30) is False
    assert cursor.ran == [("SELECT MASTER_GTID_WAIT(%s, %s) = 0 AS done", ("0-1-5", 30))]


def test_a_runs_gtid_wait_is_one_second_waits_that_a_cancel_ends():
    """#52.3: with a run's sleep, the wait is WAIT_FOR_EXECUTED_GTID_SET(gtids, 1) again and again, the
    sleep called between (it raises once the run is cancelled). The server's answers as the MySQL 8.4
    Reference Manual gives them (14.18.2 "Functions Used with GTIDs", WAIT_FOR_EXECUTED_GTID_SET: 0
    once the set is executed, 1 when the timeout passed first; MariaDB's MASTER_GTID_WAIT: 0 or -1),
    and the SQL's `= 0` makes them `done`."""
    from laglab.replicators.db import Dialect, wait_executed

    class Server:
        def __init__(self, executed_after: int):
            self.calls, self.executed_after = [], executed_after

        def cursor(self):
            return self

        def execute(self, sql, args):
            self.calls.append(args)

        def fetchone(self):
            return {"done": int(len(self.calls) > self.executed_after)}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class Cancelled(Exception):
        pass

    slept = []

    def cancelled_at_the_third(seconds):
        slept.append(seconds)
        if len(slept) == 3:
            raise Cancelled

    server = Server(executed_after=10**6)
    with pytest.raises(Cancelled):
        wait_executed(server, Dialect.from_version("9.7.4"), "uuid:1-5", 600, sleep=cancelled_at_the_third)
    assert server.calls == [("uuid:1-5", 1)] * 3 and slept == [0.0, 0.0, 0.0]
    server, slept[:] = Server(executed_after=1), []
    assert wait_executed(server, Dialect.from_version("9.7.4"), "uuid:1-5", 600, sleep=lambda s: None) is True
    assert server.calls == [("uuid:1-5", 1)] * 2


def test_the_replica_retries_a_lost_source_for_a_day():
    """Found by source-crash-under-load: MySQL's retry count (10) at the lab's 1 s interval stopped the
    receiver for good after a source was down for more than 10 s."""
    sql, _ = Dialect("mysql").change_source("mysql-source", 3306, "repl", "x")
    assert "SOURCE_CONNECT_RETRY=1" in sql and "SOURCE_RETRY_COUNT=86400" in sql


def test_a_healthy_replica_of_an_older_lab_gets_the_retry_settings():
    from laglab.replicators.db import Endpoint
    from laglab.replicators.native import configure_target

    from .fakes import FakeConnection

    status = {"Source_Host": "mysql-source", "Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes",
              "Source_Retry_Count": 10}  # fmt: skip
    conn = FakeConnection(lambda sql, args: [status] if sql == "SHOW REPLICA STATUS" else [])
    ran = conn.log
    source = Endpoint("mysql-source", 3306, "root", "x", "mysql-source")
    assert configure_target(conn, Dialect("mysql"), source, "repl", "x") == "updated"
    assert ran[1:] == ["STOP REPLICA IO_THREAD", Dialect("mysql").retry_settings, "START REPLICA IO_THREAD"]
    status["Source_Retry_Count"] = 86400
    ran.clear()
    assert configure_target(conn, Dialect("mysql"), source, "repl", "x") == "kept"
    assert ran == ["SHOW REPLICA STATUS"]
