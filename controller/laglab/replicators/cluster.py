"""Three-node clusters (the `group-replication` and `galera` profiles): what both kinds share.

A cluster point puts the load on `cluster.write_node` while everything `cluster.delayed_node` sends
waits `cluster.delay`. Each kind is a subclass that says how one node reports itself (`member`),
when a node counts as a member (`node_ok`), where writes go (`writer`), and how the set-up job forms
it (`setup`).
"""

from __future__ import annotations

import time
from typing import ClassVar

import pymysql

from laglab.deadline import TimedOut, poll
from laglab.replicators import consistency
from laglab.replicators.base import Replicator, ReplicatorPlan, Sleep
from laglab.replicators.db import Endpoint, connect, quote_identifier

NODES = 3


class ClusterError(RuntimeError):
    pass


def rows(conn, sql: str, args=None) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def status_var(conn, name: str) -> str | None:
    found = rows(conn, "SHOW GLOBAL STATUS LIKE %s", (name,))
    return found[0]["Value"] if found else None


def say(message: str) -> None:
    print(f"cluster-setup: {message}", flush=True)


class Cluster(Replicator):
    clustered = True
    records_lag = False
    prefix: ClassVar[str]  # services are <prefix>1..3
    port_var: ClassVar[str]  # published ports: <port_var % n>

    @property
    def consistency_scope(self) -> str:  # type: ignore[override]
        return f"{self.kind} nodes"

    @classmethod
    def services(cls) -> list[str]:
        return [f"{cls.prefix}{n}" for n in range(1, NODES + 1)]

    @classmethod
    def endpoints(cls, settings, published: bool = False) -> list[Endpoint]:
        """Root endpoints of the three nodes: by service name inside the lab, or the published ports."""
        password = settings.MYSQL_ROOT_PASSWORD
        if published:
            return [
                Endpoint("127.0.0.1", int(getattr(settings, cls.port_var.format(n))), "root", password, service)
                for n, service in enumerate(cls.services(), start=1)
            ]
        return [Endpoint(service, 3306, "root", password, service) for service in cls.services()]

    # --- what each kind says ---
    @classmethod
    def member(cls, conn) -> dict:
        raise NotImplementedError

    @classmethod
    def node_ok(cls, member: dict) -> bool:
        raise NotImplementedError

    @classmethod
    def formed(cls, nodes: list[dict]) -> bool:
        return all(n.get("ok") for n in nodes)

    @classmethod
    def writer(cls, nodes: list[Endpoint], conn_of=None) -> Endpoint:
        """Where writes go (`conn_of`: connections the caller keeps, for kinds that must ask the nodes)."""
        return nodes[0]

    @classmethod
    def queues(cls, conn) -> dict:
        """This node's own replication queue figures, as LagSample fields (certifier_queue,
        applier_queue, flow_control); none where the kind has none."""
        return {}

    @classmethod
    def setup(cls, settings) -> None:
        raise NotImplementedError

    # --- state ---
    @classmethod
    def status(cls, nodes: list[Endpoint], timeout: float = 2.0) -> dict:
        """Every node's state; `formed` when all three are members."""
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
                entry.update(cls.member(conn))
            except pymysql.MySQLError as error:
                entry["error"] = str(error.args[-1]) if error.args else str(error)
            finally:
                conn.close()
            entry["ok"] = cls.node_ok(entry)
            out.append(entry)
        return {"cluster": cls.kind, "formed": cls.formed(out), "nodes": out}

    @classmethod
    def wait_formed(cls, nodes: list[Endpoint], timeout: float, sleep: Sleep = time.sleep) -> dict:
        last: list[dict] = []

        def formed() -> dict | None:
            last[:] = [cls.status(nodes)]
            return last[0] if last[0]["formed"] else None

        def timed_out() -> ClusterError:
            summary = ", ".join(f"{n['service']}: {n.get('state') or n.get('error')}" for n in last[0]["nodes"])
            return ClusterError(f"{cls.kind} did not form within {timeout:.0f}s ({summary})")

        return poll(formed, timeout, interval=1, sleep=sleep, timed_out=timed_out)

    @staticmethod
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

    @classmethod
    def compare_tables(cls, nodes: list[Endpoint], database: str, timeout: float, sleep=time.sleep) -> dict:
        """Every table of `database` has the same row count and checksum on every node; waits up to
        `timeout` for the nodes to converge (secondaries apply asynchronously) before reporting differences."""
        report: dict = {}

        def converged() -> bool:
            views = {e.name: cls._summaries(e, database) for e in nodes}
            first_name, first = nodes[0].name, views[nodes[0].name]
            differences = [
                f"{database}.{table}: {view.get(table)} on {name}, {first.get(table)} on {first_name}"
                for name, view in views.items()
                for table in sorted(set(first) | set(view))
                if first.get(table) != view.get(table)
            ]
            report.update(identical=not differences, differences=differences, tables=sorted(first))
            return not differences

        try:
            poll(converged, timeout, 1.0, sleep=sleep)
        except TimedOut:
            pass  # the differences are the answer
        return report

    # --- the runner's interface ---
    def nodes(self) -> list[Endpoint]:
        return self.endpoints(self.parts.settings)

    def apply(self, plan: ReplicatorPlan, sleep: Sleep = time.sleep) -> None:
        nodes = self.nodes()
        try:
            self.wait_formed(nodes, 180, sleep)
        except ClusterError as error:
            raise RuntimeError(f"{error}; start it with: make up PROFILE={self.kind}") from None
        (chosen,) = [n for n in nodes if n.name == plan.cluster.writer]
        if self.writer(nodes) != chosen:
            raise RuntimeError(f"{chosen.name} is not the group's primary: cluster.write_node must name the primary")

    def wait_caught_up(self, timeout: float, sleep: Sleep = time.sleep) -> None:
        """A formed cluster is caught up by construction (apply waited for it)."""

    def summary(self, plan: ReplicatorPlan, samples) -> dict:
        c = plan.cluster
        return {"cluster": {"kind": self.kind, "write_node": c.writer, "delayed_node": c.delayed,
                            "delay_ms": c.delay_ms, "matrix": c.matrix}}  # fmt: skip

    def consistency(self, sleep: Sleep = time.sleep) -> dict:
        report = self.compare_tables(self.nodes(), self.parts.settings.LAB_DATABASE, timeout=120, sleep=sleep)
        return {
            "identical": report["identical"],
            "differences": [f"{self.kind}: {d}" for d in report["differences"]],
            "gtid": None,
            "clusters": [{"cluster": self.kind, **report}],
        }


def ensure_lab_account(endpoint: Endpoint, settings) -> None:
    """The lab schema and account, written on one node (replicated to the others)."""
    database, user = settings.LAB_DATABASE, settings.LAB_USER
    conn = connect(endpoint, timeout=5, read_timeout=60)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(database)}")
            cur.execute("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (user, settings.LAB_PASSWORD))
            cur.execute(f"GRANT ALL ON {quote_identifier(database)}.* TO %s@'%%'", (user,))
    finally:
        conn.close()
