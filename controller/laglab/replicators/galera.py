"""MariaDB Galera, three nodes (profile `galera`: galera-node1..3).

The nodes form the cluster themselves (config/galera/start.sh bootstraps node 1); the set-up job
(`python -m laglab setup galera`) waits until all three are Synced in one primary component of size 3,
then writes the lab schema and account on node 1. Every node takes writes.
"""

from __future__ import annotations

from laglab.replicators.cluster import NODES, Cluster, ensure_lab_account, say, status_var
from laglab.replicators.db import wait_connect


class Galera(Cluster):
    kind = "galera"
    ports = (4567, 4568, 4444)  # group communication, IST, SST (Galera Cluster documentation, "Firewall Settings")
    label = "Galera"
    prefix = "galera-node"
    port_var = "GALERA_NODE{}_PORT"

    @classmethod
    def member(cls, conn) -> dict:
        size = status_var(conn, "wsrep_cluster_size")
        return {
            "state": status_var(conn, "wsrep_local_state_comment"),
            "component": status_var(conn, "wsrep_cluster_status"),
            "cluster_size": int(size) if size else 0,
            "ready": status_var(conn, "wsrep_ready") == "ON",
        }

    @classmethod
    def queues(cls, conn) -> dict:
        """Write-sets received and waiting to be applied; the share of time flow control paused
        replication since the previous reading (wsrep_flow_control_paused)."""
        recv, paused = status_var(conn, "wsrep_local_recv_queue"), status_var(conn, "wsrep_flow_control_paused")
        return {
            "applier_queue": int(recv) if recv is not None else None,
            "flow_control": float(paused) if paused is not None else None,
        }

    @classmethod
    def node_ok(cls, member: dict) -> bool:
        return bool(member.get("state") == "Synced" and member.get("component") == "Primary" and member.get("ready"))

    @classmethod
    def formed(cls, nodes: list[dict]) -> bool:
        return all(n.get("ok") and n.get("cluster_size") == NODES for n in nodes)

    @classmethod
    def setup(cls, settings) -> None:
        nodes = cls.endpoints(settings)
        for endpoint in nodes:
            wait_connect(endpoint, 300).close()
        state = cls.wait_formed(nodes, 300)
        say("cluster formed: " + ", ".join(f"{n['service']} {n['state']}" for n in state["nodes"]))
        ensure_lab_account(nodes[0], settings)
