"""Three-node clusters of the `group-replication` and `galera` profiles: forming them, their state.

`python -m laglab.clusters setup group-replication|galera` is the profiles' one-shot set-up job. It is
idempotent, so every `make up` runs it again:
- Group Replication: every node that is not ONLINE gets the recovery account (not binlogged) and the
  recovery channel's credentials; if no node is ONLINE the node with the most transactions
  bootstraps the group, then the others join one at a time. A joined node gets
  `group_replication_start_on_boot` persisted, so a restarted node rejoins by itself.
- Galera: the nodes form the cluster themselves (config/galera/start.sh bootstraps node 1); the job
  waits until all three are Synced in one primary component of size 3.
Both then make sure the lab schema and account exist (written once, replicated to every node).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import pymysql

from . import config, consistency
from .db import Endpoint, connect, quote_identifier

NODES = 3
GR_STABLE = ("ONLINE",)
GR_TRANSIENT = ("RECOVERING",)


@dataclass(frozen=True)
class Kind:
    name: str  # the compose profile
    prefix: str  # services are <prefix>1..3
    port_var: str  # published ports: <port_var % n>

    def services(self) -> list[str]:
        return [f"{self.prefix}{n}" for n in range(1, NODES + 1)]


KINDS = {
    "group-replication": Kind("group-replication", "gr-node", "GR_NODE{}_PORT"),
    "galera": Kind("galera", "galera-node", "GALERA_NODE{}_PORT"),
}


class ClusterError(RuntimeError):
    pass


def kind_of(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ClusterError(f"unknown cluster {name!r}; known: {', '.join(KINDS)}") from None


def endpoints(kind: Kind, settings: config.Settings, published: bool = False) -> list[Endpoint]:
    """Root endpoints of the three nodes: by service name inside the lab, or the published ports."""
    password = str(settings.MYSQL_ROOT_PASSWORD)
    if published:
        return [
            Endpoint("127.0.0.1", int(getattr(settings, kind.port_var.format(n))), "root", password, service)
            for n, service in enumerate(kind.services(), start=1)
        ]
    return [Endpoint(service, 3306, "root", password, service) for service in kind.services()]


def _rows(conn, sql: str, args=None) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def _status_var(conn, name: str) -> str | None:
    rows = _rows(conn, "SHOW GLOBAL STATUS LIKE %s", (name,))
    return rows[0]["Value"] if rows else None


# --- state -----------------------------------------------------------------------------------------


def gr_member(conn) -> dict:
    """This node's own view of itself: state (OFFLINE when Group Replication is not running) and role."""
    rows = _rows(
        conn,
        "SELECT MEMBER_STATE AS state, MEMBER_ROLE AS role FROM performance_schema.replication_group_members "
        "WHERE MEMBER_ID = @@server_uuid",
    )
    return {"state": rows[0]["state"] if rows else "OFFLINE", "role": rows[0]["role"] if rows else None}


def galera_member(conn) -> dict:
    size = _status_var(conn, "wsrep_cluster_size")
    return {
        "state": _status_var(conn, "wsrep_local_state_comment"),
        "component": _status_var(conn, "wsrep_cluster_status"),
        "cluster_size": int(size) if size else 0,
        "ready": _status_var(conn, "wsrep_ready") == "ON",
    }


def node_ok(kind: Kind, member: dict) -> bool:
    if kind.name == "galera":
        return member.get("state") == "Synced" and member.get("component") == "Primary" and member.get("ready")
    return member.get("state") == "ONLINE"


def status(kind: Kind, nodes: list[Endpoint], timeout: float = 2.0) -> dict:
    """Every node's state; `formed` when all three are members (ONLINE / Synced in a primary of 3)."""
    out = []
    for endpoint in nodes:
        entry: dict = {"service": endpoint.name, "reachable": False}
        try:
            conn = connect(endpoint, timeout=timeout)
        except pymysql.MySQLError as error:
            entry["error"] = str(error.args[-1]) if error.args else str(error)
            out.append(entry)
            continue
        try:
            entry["reachable"] = True
            entry.update(galera_member(conn) if kind.name == "galera" else gr_member(conn))
        except pymysql.MySQLError as error:
            entry["error"] = str(error.args[-1]) if error.args else str(error)
        finally:
            conn.close()
        entry["ok"] = node_ok(kind, entry)
        out.append(entry)
    formed = all(n.get("ok") for n in out)
    if kind.name == "galera":
        formed = formed and all(n.get("cluster_size") == NODES for n in out)
    return {"cluster": kind.name, "formed": formed, "nodes": out}


def wait_formed(kind: Kind, nodes: list[Endpoint], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = status(kind, nodes)
        if state["formed"]:
            return state
        if time.monotonic() > deadline:
            summary = ", ".join(f"{n['service']}: {n.get('state') or n.get('error')}" for n in state["nodes"])
            raise ClusterError(f"{kind.name} did not form within {timeout:.0f}s ({summary})")
        time.sleep(1)


def primary(kind: Kind, nodes: list[Endpoint]) -> Endpoint:
    """Where writes go: the GR primary; node 1 for Galera (every node takes writes)."""
    if kind.name == "galera":
        return nodes[0]
    for endpoint in nodes:
        try:
            conn = connect(endpoint, timeout=2)
        except pymysql.MySQLError:
            continue
        try:
            if gr_member(conn) == {"state": "ONLINE", "role": "PRIMARY"}:
                return endpoint
        finally:
            conn.close()
    raise ClusterError(f"{kind.name} has no ONLINE primary")


def _summaries(endpoint: Endpoint, database: str) -> dict[str, dict]:
    """table -> {"rows", "checksum"} for every table of `database` (consistency's per-table summary)."""
    conn = connect(endpoint, timeout=5, read_timeout=120)
    try:
        prefix = f"{database}."
        return {
            t.removeprefix(prefix): consistency.table_summary(conn, t)
            for t in sorted(consistency.lab_tables(conn))
            if t.startswith(prefix)
        }
    finally:
        conn.close()


def compare_tables(nodes: list[Endpoint], database: str, timeout: float) -> dict:
    """Every table of `database` has the same row count and checksum on every node; waits up to `timeout` for the
    nodes to converge (secondaries apply asynchronously) before reporting differences."""
    deadline = time.monotonic() + timeout
    while True:
        views = {e.name: _summaries(e, database) for e in nodes}
        first_name, first = nodes[0].name, views[nodes[0].name]
        differences = []
        for name, view in views.items():
            for table in sorted(set(first) | set(view)):
                if first.get(table) != view.get(table):
                    differences.append(
                        f"{database}.{table}: {view.get(table)} on {name}, {first.get(table)} on {first_name}"
                    )
        if not differences or time.monotonic() > deadline:
            return {"identical": not differences, "differences": differences, "tables": sorted(first)}
        time.sleep(1)


# --- set-up ----------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"cluster-setup: {message}", flush=True)


def _wait_connect(endpoint: Endpoint, seconds: float):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return connect(endpoint, timeout=2, read_timeout=120)
        except pymysql.MySQLError as error:
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{endpoint.name} did not accept connections within {seconds:.0f}s: {error}"
                ) from None
            time.sleep(1)


def recovery_statements(user: str, password: str) -> list[tuple[str, tuple | None]]:
    """Recovery account on a node before it joins, kept out of the binary log (it exists on every node)."""
    return [
        ("SET SQL_LOG_BIN = 0", None),
        ("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (user, password)),
        ("GRANT REPLICATION SLAVE, BACKUP_ADMIN, CONNECTION_ADMIN ON *.* TO %s@'%%'", (user,)),
        ("SET SQL_LOG_BIN = 1", None),
        (
            "CHANGE REPLICATION SOURCE TO SOURCE_USER=%s, SOURCE_PASSWORD=%s FOR CHANNEL 'group_replication_recovery'",
            (user, password),
        ),
    ]


def _gtid_count(conn) -> int:
    """Transactions executed, for choosing the bootstrap node (the most advanced one)."""
    gtids = _rows(conn, "SELECT @@GLOBAL.gtid_executed AS g")[0]["g"] or ""
    total = 0
    for part in gtids.replace("\n", "").split(","):
        for interval in part.split(":")[1:]:
            low, _, high = interval.partition("-")
            if low.isdigit():
                total += int(high or low) - int(low) + 1
    return total


def setup_group_replication(nodes: list[Endpoint], settings: config.Settings) -> None:
    conns = [_wait_connect(e, 300) for e in nodes]
    try:
        states = [gr_member(c)["state"] for c in conns]
        log("states before: " + ", ".join(f"{e.name} {s}" for e, s in zip(nodes, states, strict=True)))
        # A node still joining by itself (start_on_boot after a restart) gets time to finish.
        deadline = time.monotonic() + 60
        while any(s in GR_TRANSIENT for s in states) and time.monotonic() < deadline:
            time.sleep(1)
            states = [gr_member(c)["state"] for c in conns]
        user, password = str(settings.REPL_USER), str(settings.REPL_PASSWORD)
        for conn, state in zip(conns, states, strict=True):
            if state in GR_STABLE:
                continue
            with conn.cursor() as cur:
                if state != "OFFLINE":  # ERROR, UNREACHABLE: leave the failed attempt first
                    cur.execute("STOP GROUP_REPLICATION")
                # A failed join (start_on_boot with no group to join) leaves the node super-read-only;
                # START GROUP_REPLICATION sets it again as the node's role requires.
                cur.execute("SET GLOBAL super_read_only = OFF")
                for sql, args in recovery_statements(user, password):
                    cur.execute(sql, args)
        if not any(s in GR_STABLE for s in states):
            first = max(range(len(conns)), key=lambda i: (_gtid_count(conns[i]), -i))
            log(f"no node is ONLINE: {nodes[first].name} bootstraps the group")
            with conns[first].cursor() as cur:
                cur.execute("SET GLOBAL group_replication_bootstrap_group = ON")
                try:
                    cur.execute("START GROUP_REPLICATION")
                finally:
                    cur.execute("SET GLOBAL group_replication_bootstrap_group = OFF")
            states[first] = "ONLINE"
        for endpoint, conn, state in zip(nodes, conns, states, strict=True):
            if state not in GR_STABLE:
                log(f"{endpoint.name} joins")
                with conn.cursor() as cur:
                    cur.execute("START GROUP_REPLICATION")
            _wait_online(endpoint, conn, 300)
            with conn.cursor() as cur:
                # A restarted node rejoins by itself; the first boot never does (the group must exist).
                cur.execute("SET PERSIST group_replication_start_on_boot = ON")
    finally:
        for conn in conns:
            conn.close()
    writer = primary(KINDS["group-replication"], nodes)
    ensure_lab_account(writer, settings)
    log(f"group formed; primary {writer.name}")


def _wait_online(endpoint: Endpoint, conn, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (state := gr_member(conn)["state"]) != "ONLINE":
        if state in ("ERROR", "OFFLINE") or time.monotonic() > deadline:
            raise ClusterError(f"{endpoint.name} did not become ONLINE (state {state}); see its log")
        time.sleep(0.5)


def setup_galera(nodes: list[Endpoint], settings: config.Settings) -> None:
    for endpoint in nodes:
        _wait_connect(endpoint, 300).close()
    state = wait_formed(KINDS["galera"], nodes, 300)
    log("cluster formed: " + ", ".join(f"{n['service']} {n['state']}" for n in state["nodes"]))
    ensure_lab_account(nodes[0], settings)


def ensure_lab_account(endpoint: Endpoint, settings: config.Settings) -> None:
    """The lab schema and account, written on one node (replicated to the others)."""
    database, user = str(settings.LAB_DATABASE), str(settings.LAB_USER)
    conn = connect(endpoint, timeout=5, read_timeout=60)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(database)}")
            cur.execute("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (user, str(settings.LAB_PASSWORD)))
            cur.execute(f"GRANT ALL ON {quote_identifier(database)}.* TO %s@'%%'", (user,))
    finally:
        conn.close()


def setup(name: str, settings: config.Settings) -> None:
    kind = kind_of(name)
    nodes = endpoints(kind, settings)
    if kind.name == "galera":
        setup_galera(nodes, settings)
    else:
        setup_group_replication(nodes, settings)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] != "setup" or argv[2] not in KINDS:
        print(f"usage: python -m laglab.clusters setup {{{'|'.join(KINDS)}}}", file=sys.stderr)
        return 2
    try:
        setup(argv[2], config.load(os.environ))
    except (ClusterError, pymysql.MySQLError, config.ConfigError) as error:
        log(f"error: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
