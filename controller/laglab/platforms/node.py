"""One Kubernetes node as the laglab shaper DaemonSet sees it (shaping/node_shaper.py): the lab's pods that run
on this node, each with the PID of a process in it (the DaemonSet has `hostPID`), so that today's
backends shape them through the same executor as on Docker; the lab's pods on other nodes only by
address (`peers`: a plan needs them, since what they send here is held here); and the node's own
network namespace as the "bridge" (PID 1's), where the userspace backend holds what arrives for a
local pod whichever interface it came in by (`+`: the CNI's bridge, or its VXLAN device).

A pod's PID: a process whose cgroup names the pod's UID (`pod<uid>` with cgroupfs, `pod<uid_with_
underscores>` with the systemd driver), checked again before every entry (`owns`), as on Docker. A
pod in the node's own namespaces (hostNetwork or hostPID, or a PID whose network namespace is the
root PID's) is never entered: a forced apply would run `tc qdisc del dev eth0 root` on the node.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from laglab.platforms.base import Bridge, LabContainer, PlatformError, ServiceState, running_of
from laglab.platforms.kube_api import KubeApi, KubeError
from laglab.platforms.kube_lab import NAME_LABEL, SHAPED_LABEL, pod_running, service_of

log = logging.getLogger("laglab.node")
ANY_INTERFACE = "+"  # iptables' wildcard: every interface


class NodePlatform:
    name = "kubernetes-node"

    def __init__(
        self,
        api: KubeApi,
        node: str,
        resolve: Callable[[dict], int | None] | None = None,
        proc: str = "/proc",
        root_pid: int = 1,
    ):
        self.api, self.node, self.project = api, node, api.namespace
        self._proc, self.root_pid = proc, root_pid
        self._resolve = resolve or self._pid_of
        self._pids: dict[int, str] = {}  # PID -> pod UID, of the last list
        self._peers: dict[str, str] = {}
        self._cache: tuple[float, dict[str, LabContainer]] | None = None

    def _items(self) -> list[dict]:
        try:
            return self.api.pods(NAME_LABEL)
        except KubeError as error:
            raise PlatformError(f"listing the lab's pods: {error.message}") from None

    def list(self, max_age: float = 0.0) -> dict[str, LabContainer]:
        cached = self._cache
        if max_age and cached is not None and time.monotonic() - cached[0] <= max_age:
            return dict(cached[1])
        local: dict[str, LabContainer] = {}
        peers: dict[str, str] = {}
        pids: dict[int, str] = {}
        for pod in sorted(self._items(), key=lambda p: p["metadata"]["name"]):
            meta, status = pod["metadata"], pod.get("status") or {}
            labels = meta.get("labels") or {}
            service, ip = service_of(pod), status.get("podIP")
            if not service or meta.get("deletionTimestamp") or not pod_running(pod):
                continue
            shapeable = labels.get(SHAPED_LABEL) != "never"
            if (pod.get("spec") or {}).get("nodeName") != self.node:
                if shapeable and ip:
                    peers[service] = ip
                continue
            if not shapeable:  # the apparatus (the controller, the shapers themselves): never entered
                continue
            spec = pod.get("spec") or {}
            if spec.get("hostNetwork") or spec.get("hostPID"):  # its namespace is the node's: never entered
                log.warning("pod %s runs in the node's namespaces (hostNetwork/hostPID): not shaped", meta["name"])
                continue
            pid = self._resolve(pod) or 0
            if pid > 1 and self._nodes_netns(pid):  # `tc qdisc del dev eth0 root` would hit the node itself
                log.warning("pod %s: PID %d is in the node's network namespace: not shaped", meta["name"], pid)
                continue
            if pid > 1:
                pids[pid] = meta.get("uid", "")
            local[service] = LabContainer(service, meta["name"], meta.get("uid", ""), pid, ip, pid > 1, shapeable)
        self._pids, self._peers = pids, peers
        self._cache = (time.monotonic(), dict(local))
        return local

    def peers(self) -> dict[str, str]:
        """service -> address, of the lab's running pods on other nodes (as of the last list)."""
        return dict(self._peers)

    def running(self, *services: str, hint: str = "") -> list[LabContainer]:
        return running_of(self.list(), services, hint)

    def watch(self) -> None:
        pass

    def unwatch(self) -> None:
        self.api.session.close()

    def image(self, service: str) -> str | None:
        return None

    def nodes(self) -> dict[str, str]:
        return {service: self.node for service in self.list()}

    # --- namespaces ---
    def _pid_of(self, pod: dict) -> int | None:
        """The lowest PID whose cgroup names the pod (its pause or first process: they share the netns)."""
        uid = pod["metadata"].get("uid", "")
        marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
        for entry in sorted((e for e in os.listdir(self._proc) if e.isdigit()), key=int):
            if self._in_pod(int(entry), marks):
                return int(entry)
        return None

    def _in_pod(self, pid: int, marks: tuple[str, ...]) -> bool:
        try:
            with open(f"{self._proc}/{pid}/cgroup") as cgroup:
                text = cgroup.read()
        except OSError:
            return False
        return any(mark in text for mark in marks)

    def _nodes_netns(self, pid: int) -> bool:
        """Whether the PID's network namespace is the node's own (the root PID's); unknown: not."""
        try:
            return os.readlink(f"{self._proc}/{pid}/ns/net") == os.readlink(f"{self._proc}/{self.root_pid}/ns/net")
        except OSError:
            return False

    def owns(self, pid: int) -> bool:
        if pid == self.root_pid:
            return True
        uid = self._pids.get(pid)
        if uid is None:
            return False
        if self._resolve != self._pid_of:  # a resolver of the caller's (the tests' namespaces): alive is enough
            return os.path.exists(f"{self._proc}/{pid}")
        return self._in_pod(pid, (f"pod{uid}", f"pod{uid.replace('-', '_')}"))

    def bridge(self) -> Bridge:
        return Bridge(ANY_INTERFACE, self.root_pid)

    # --- the shaper runs nothing in pods and breaks nothing ---
    def exec(self, service: str, argv: list[str], workdir: str | None = None, container: str | None = None):
        raise PlatformError("the node shaper runs no command in a pod")

    exec_stream = exec

    def read_file(self, service: str, path: str) -> bytes:
        raise PlatformError("the node shaper reads no file of a pod")

    def put_files(self, service: str, directory: str, files: dict[str, bytes]) -> None:
        raise PlatformError("the node shaper writes no file into a pod")

    def state(self, service: str) -> ServiceState:
        found = self.list().get(service)
        return ServiceState(bool(found and found.running))

    def act(self, service: str, action: str) -> None:
        raise PlatformError("the node shaper breaks no container (faults: the controller, through PodChaos)")
