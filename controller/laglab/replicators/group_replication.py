"""MySQL Group Replication, single-primary (profile `group-replication`: gr-node1..3).

The set-up job (`python -m laglab setup group-replication`) is idempotent, so every `make up` runs it
again: every node that is not ONLINE gets the recovery account (not binlogged) and the recovery
channel's credentials; if no node is ONLINE the node with the most transactions bootstraps the group,
then the others join one at a time. A joined node gets `group_replication_start_on_boot` persisted, so
a restarted node rejoins by itself. Then the lab schema and account are written on the primary.
"""

from __future__ import annotations

import contextlib
import itertools
import time

import pymysql

from laglab.deadline import TimedOut, poll
from laglab.replicators.cluster import Cluster, ClusterError, ensure_lab_account, rows, say, status_var
from laglab.replicators.db import NEWEST_MYSQL, PLACEHOLDER, Dialect, Endpoint, connect, server_dialect, wait_connect

STABLE = ("ONLINE",)
TRANSIENT = ("RECOVERING",)


def recovery_statements(user: str, password: str, dialect: Dialect = NEWEST_MYSQL) -> list[tuple[str, tuple | None]]:
    """Recovery account on a node before it joins, kept out of the binary log (it exists on every node).
    BACKUP_ADMIN lets a joiner clone (MySQL 8.0.17+), CONNECTION_ADMIN is 8.0's; 5.7 grants neither."""
    privileges = (
        "REPLICATION SLAVE, BACKUP_ADMIN, CONNECTION_ADMIN" if dialect.mysql_at_least(8, 0, 17) else "REPLICATION SLAVE"
    )
    change = dialect.change(USER=PLACEHOLDER, PASSWORD=PLACEHOLDER)
    return [
        ("SET SQL_LOG_BIN = 0", None),
        ("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (user, password)),
        (f"GRANT {privileges} ON *.* TO %s@'%%'", (user,)),
        ("SET SQL_LOG_BIN = 1", None),
        (f"{change} FOR CHANNEL 'group_replication_recovery'", (user, password)),
    ]


def gtid_count(conn) -> int:
    """Transactions executed, for choosing the bootstrap node (the most advanced one)."""
    gtids = rows(conn, "SELECT @@GLOBAL.gtid_executed AS g")[0]["g"] or ""
    total = 0
    for part in gtids.replace("\n", "").split(","):
        for interval in part.split(":")[1:]:
            low, _, high = interval.partition("-")
            if low.isdigit():
                total += int(high or low) - int(low) + 1
    return total


class GroupReplication(Cluster):
    kind = "group-replication"
    ports = (33061,)  # XCom, group_replication_local_address gr-nodeN:33061 (config/group-replication/start.sh)
    label = "Group Replication"
    prefix = "gr-node"
    port_var = "GR_NODE{}_PORT"

    @classmethod
    def member(cls, conn) -> dict:
        """This node's own view of itself: state (OFFLINE when Group Replication is not running) and role."""
        found = rows(
            conn,
            "SELECT MEMBER_STATE AS state, MEMBER_ROLE AS role FROM performance_schema.replication_group_members "
            "WHERE MEMBER_ID = @@server_uuid",
        )
        return {"state": found[0]["state"] if found else "OFFLINE", "role": found[0]["role"] if found else None}

    @classmethod
    def node_ok(cls, member: dict) -> bool:
        return member.get("state") == "ONLINE"

    @classmethod
    def queues(cls, conn) -> dict:
        """Transactions waiting for certification and, certified, for the applier
        (replication_group_member_stats); whether flow control throttles this member now
        (Gr_flow_control_throttle_active_count, MySQL 8.2+)."""
        found = rows(
            conn,
            "SELECT COUNT_TRANSACTIONS_IN_QUEUE AS certifier, COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE AS applier "
            "FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@server_uuid",
        )
        throttling = status_var(conn, "Gr_flow_control_throttle_active_count")
        return {
            "certifier_queue": int(found[0]["certifier"]) if found else None,
            "applier_queue": int(found[0]["applier"]) if found else None,
            "flow_control": None if throttling is None else float(int(throttling) > 0),
        }

    @classmethod
    def writer(cls, nodes: list[Endpoint], conn_of=None) -> Endpoint:
        """The group's primary. `conn_of(endpoint)`: a connection the caller keeps (the per-node lag
        recorder's own; a new connection per node per reading cost the controller most of its CPU)."""
        for endpoint in nodes:
            try:
                conn = conn_of(endpoint) if conn_of is not None else connect(endpoint, timeout=2)
            except pymysql.MySQLError:
                continue
            try:
                if cls.member(conn) == {"state": "ONLINE", "role": "PRIMARY"}:
                    return endpoint
            except pymysql.MySQLError:
                continue
            finally:
                if conn_of is None:
                    conn.close()
        raise ClusterError(f"{cls.kind} has no ONLINE primary")

    @classmethod
    def setup(cls, settings) -> None:
        nodes = cls.endpoints(settings)
        conns = [wait_connect(e, 300, read_timeout=120) for e in nodes]
        try:
            states = [cls.member(c)["state"] for c in conns]
            say("states before: " + ", ".join(f"{e.name} {s}" for e, s in zip(nodes, states, strict=True)))
            # A node still joining by itself (start_on_boot after a restart) gets time to finish.
            calls = itertools.count()

            def steady() -> bool:  # from the second call on (poll slept 1 s), read the states again
                if next(calls):
                    states[:] = [cls.member(c)["state"] for c in conns]
                return not any(s in TRANSIENT for s in states)

            with contextlib.suppress(TimedOut):  # still joining after 60 s: handled below as it is
                poll(steady, 60, 1.0)
            for conn, state in zip(conns, states, strict=True):
                if state in STABLE:
                    continue
                with conn.cursor() as cur:
                    if state != "OFFLINE":  # ERROR, UNREACHABLE: leave the failed attempt first
                        cur.execute("STOP GROUP_REPLICATION")
                    # A failed join (start_on_boot with no group to join) leaves the node super-read-only;
                    # START GROUP_REPLICATION sets it again as the node's role requires.
                    cur.execute("SET GLOBAL super_read_only = OFF")
                    for sql, args in recovery_statements(
                        settings.REPL_USER, settings.REPL_PASSWORD, server_dialect(conn)
                    ):
                        cur.execute(sql, args)
            if not any(s in STABLE for s in states):
                first = max(range(len(conns)), key=lambda i: (gtid_count(conns[i]), -i))
                say(f"no node is ONLINE: {nodes[first].name} bootstraps the group")
                with conns[first].cursor() as cur:
                    cur.execute("SET GLOBAL group_replication_bootstrap_group = ON")
                    try:
                        cur.execute("START GROUP_REPLICATION")
                    finally:
                        cur.execute("SET GLOBAL group_replication_bootstrap_group = OFF")
                states[first] = "ONLINE"
            for endpoint, conn, state in zip(nodes, conns, states, strict=True):
                if state not in STABLE:
                    say(f"{endpoint.name} joins")
                    with conn.cursor() as cur:
                        cur.execute("START GROUP_REPLICATION")
                cls._wait_online(endpoint, conn, 300)
                with conn.cursor() as cur:
                    # A restarted node rejoins by itself; the first boot never does (the group must exist).
                    cur.execute(server_dialect(conn).set_lasting("group_replication_start_on_boot", "ON"))
        finally:
            for conn in conns:
                conn.close()
        writer = cls.writer(nodes)
        ensure_lab_account(writer, settings)
        say(f"group formed; primary {writer.name}")

    @classmethod
    def _wait_online(cls, endpoint: Endpoint, conn, seconds: float, sleep=time.sleep) -> None:
        last = {"state": None}

        def online() -> bool:
            last["state"] = state = cls.member(conn)["state"]
            if state in ("ERROR", "OFFLINE"):
                raise ClusterError(f"{endpoint.name} did not become ONLINE (state {state}); see its log")
            return state == "ONLINE"

        poll(online, seconds, 0.5, sleep=sleep, timed_out=lambda: ClusterError(
            f"{endpoint.name} did not become ONLINE (state {last['state']}); see its log"))  # fmt: skip
