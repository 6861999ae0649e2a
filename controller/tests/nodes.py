"""Two Kubernetes "nodes" on one kernel, for the shaper DaemonSet's data path: each node a network
namespace with a bridge, the two joined by a VXLAN link over an underlay veth (as flannel's or
Calico's VXLAN joins real nodes; one L2 over it, the pods' MTU lowered by the encapsulation), and each
"pod" a namespace with a veth on its node's bridge, held by a sleeping process whose PID the shaper
enters. A fake API server (tests/unit/fake_kube.py) lists the pods with their node; a shaper per node
(laglab.shaping.node_shaper, the real one) reads the desired state from its ConfigMap, which the controller's
daemonset backend writes. Used on this host's kernel (userspace backend: tests/integration/
test_node_shaper.py) and in User-mode Linux (kernel backend: tests/kernel/test_nodes.py).
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import threading

from laglab.platforms.kube_api import KubeApi
from laglab.platforms.kubernetes import KubernetesPlatform
from laglab.platforms.node import NodePlatform
from laglab.shaping.daemonset import DaemonSetBackend
from laglab.shaping.executor import Executor
from laglab.shaping.manager import ShapingManager
from laglab.shaping.node_shaper import NodeShaper

from .unit.fake_kube import FakeKube

NS = "laglab"
NODES = {"node-a": "192.168.79.1", "node-b": "192.168.79.2"}
PODS = {  # service -> (node, address)
    "mysql-source": ("node-a", "10.79.0.2"),
    "loadgen": ("node-a", "10.79.0.4"),
    "mysql-target": ("node-b", "10.79.0.3"),
}
MTU = 1450  # 1500 less VXLAN's 50 bytes


def sh(*argv: str, check: bool = True, timeout: float = 60) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def in_ns(ns: str, *argv: str, check: bool = True, timeout: float = 60) -> str:
    return sh("ip", "netns", "exec", ns, *argv, check=check, timeout=timeout)


class TwoNodes:
    def __init__(self, prefix: str = "lg"):
        self.prefix = prefix
        self.holders: dict[str, subprocess.Popen] = {}
        self.kube = FakeKube(NS, inject_after=0.05, recover_after=0.05)
        self.shapers: list[NodeShaper] = []
        try:
            self._build()
        except Exception:
            self.close()
            raise

    def node_ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def pod_ns(self, service: str) -> str:
        return f"{self.prefix}-pod-{service}"

    def _hold(self, ns: str) -> None:
        self.holders[ns] = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "100000"])

    def _build(self) -> None:
        if shutil.which("modprobe"):  # (a host without kmod has them built in, or loads them itself)
            sh("modprobe", "vxlan", check=False)
            sh("modprobe", "br_netfilter", check=False)
        a, b = self.node_ns("node-a"), self.node_ns("node-b")
        for ns in (a, b):
            sh("ip", "netns", "add", ns)
            in_ns(ns, "ip", "link", "set", "lo", "up")
        underlay = (f"{self.prefix}-ua", f"{self.prefix}-ub")
        sh("ip", "link", "add", underlay[0], "type", "veth", "peer", "name", underlay[1])
        for node, ns, dev in (("node-a", a, underlay[0]), ("node-b", b, underlay[1])):
            other = NODES["node-b" if node == "node-a" else "node-a"]
            sh("ip", "link", "set", dev, "netns", ns)
            in_ns(ns, "ip", "addr", "add", f"{NODES[node]}/24", "dev", dev)
            in_ns(ns, "ip", "link", "set", dev, "up")
            in_ns(ns, "ip", "link", "add", "br0", "type", "bridge")
            in_ns(ns, "ip", "link", "set", "br0", "up")
            in_ns(ns, "ip", "link", "add", "vx0", "type", "vxlan", "id", "79", "local", NODES[node], "remote", other,
                  "dstport", "4789", "dev", dev)  # fmt: skip
            in_ns(ns, "ip", "link", "set", "vx0", "master", "br0", "up")
            # What a node with a bridge CNI has: bridged IPv4 passes iptables (the userspace backend's hold).
            in_ns(ns, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1")
            self._hold(ns)
        for service, (node, address) in PODS.items():
            pod, port = self.pod_ns(service), f"{self.prefix}-{service}"[:15]
            sh("ip", "netns", "add", pod)
            sh("ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", pod)
            sh("ip", "link", "set", port, "netns", self.node_ns(node))
            in_ns(self.node_ns(node), "ip", "link", "set", port, "master", "br0", "mtu", str(MTU), "up")
            for argv in (["ip", "addr", "add", f"{address}/24", "dev", "eth0"],
                         ["ip", "link", "set", "eth0", "mtu", str(MTU), "up"], ["ip", "link", "set", "lo", "up"]):  # fmt: skip
                in_ns(pod, *argv)
            self._hold(pod)
            self.kube.add_pod(f"{service}-0", service, node, address)

    def pid(self, ns: str) -> int:
        return self.holders[ns].pid

    def start_shapers(self, backend_factory, interval: float = 0.1) -> None:
        """A shaper per node, as the DaemonSet runs them: the pods of its node by PID, its node's
        namespace as where the userspace backend holds packets."""
        for node in NODES:
            platform = NodePlatform(
                KubeApi(self.kube.url, NS), node,
                resolve=lambda pod: self.pid(self.pod_ns(pod["metadata"]["labels"]["app.kubernetes.io/name"])),
                root_pid=self.pid(self.node_ns(node)),
            )  # fmt: skip
            shaper = NodeShaper(platform.api, platform, backend_factory(), interval=interval)
            threading.Thread(target=shaper.run, name=f"shaper-{node}", daemon=True).start()
            self.shapers.append(shaper)

    def controller(self, state_path) -> ShapingManager:
        """The controller's side: shaping through the daemonset backend (the ConfigMap, then the answers)."""
        platform = KubernetesPlatform(KubeApi(self.kube.url, NS))
        manager = ShapingManager(platform, Executor(dry_run=True), DaemonSetBackend(timeout=30), state_path)
        manager.start(interval=0.5)
        return manager

    def ping(self, src: str, dst: str, count: int = 20) -> dict:
        out = in_ns(self.pod_ns(src), "ping", "-U", "-n", "-c", str(count), "-i", "0.05", "-W", "3",
                    PODS[dst][1], check=False, timeout=count * 4 + 30)  # fmt: skip
        times = [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]
        return {"median": statistics.median(times) if times else None, "received": len(times), "output": out}

    def close(self) -> None:
        for shaper in self.shapers:
            shaper.stop(clear=True)
        for holder in self.holders.values():
            holder.kill()
            holder.wait()
        for service in PODS:
            sh("ip", "netns", "del", self.pod_ns(service), check=False)
        for node in NODES:
            sh("ip", "netns", "del", self.node_ns(node), check=False)
        self.kube.close()


def check_a_link_across_the_nodes(nodes: TwoNodes, state_path) -> dict:
    """The controller puts 60 ms on mysql-source -> mysql-target (node-a -> node-b): ping measures it,
    the other links stay unshaped, and a clear takes it away. Returns what each node's shaper had
    applied while it was in force (node -> service -> applied), for the test to say where it must sit.
    Both data path tests run this, each with its backend."""
    from laglab.shaping.params import parse_request

    manager = nodes.controller(state_path)
    try:
        before = nodes.ping("mysql-source", "mysql-target")
        assert before["received"] == 20 and before["median"] < 5, before["output"][-300:]
        manager.put("mysql-source", parse_request({"delay": "60ms", "peer": "mysql-target"}))
        got = nodes.ping("mysql-source", "mysql-target")
        assert got["received"] == 20 and abs(got["median"] - 60) <= 4, got["output"][-300:]
        # Only that link: a pod on the source's node to the same receiver, and the two pods of node-a.
        assert nodes.ping("loadgen", "mysql-target")["median"] < 5
        assert nodes.ping("mysql-source", "loadgen")["median"] < 5
        applied = {s.platform.node: dict(s.reconciler.applied) for s in nodes.shapers}
        manager.clear()
        after = nodes.ping("mysql-source", "mysql-target")
        assert after["received"] == 20 and after["median"] < 5
        return applied
    finally:
        manager.stop(clear_kernel=False)
        manager.platform.unwatch()


def userspace_backend():
    from laglab.shaping.backends import UserspaceBackend

    return UserspaceBackend(python=sys.executable)


def kernel_backend():
    from laglab.shaping.backends import KernelBackend

    return KernelBackend()
