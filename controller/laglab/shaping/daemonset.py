"""The daemonset backend (Kubernetes): shaping by the laglab shaper on each node (node_shaper.py),
which runs the kernel or userspace backend on the lab's pods of its node. The controller holds no
privilege for it: it writes the desired entries into the ConfigMap `laglab-shaping` (a generation and
the entries, as the Docker backends take them) and answers a change once the shaper of every node
that runs a lab pod reports that generation in its ConfigMap `laglab-shaper-<node>`; a shaper's error
fails the change naming the node (and the manager rolls it back, which is a new generation).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from laglab.deadline import poll
from laglab.shaping.backend import kube_of

if TYPE_CHECKING:
    from laglab.platforms.kube_lab import KubeLab

IN_EFFECT_TIMEOUT = 30.0


class DaemonSetBackend:
    name = "daemonset"

    def __init__(self, timeout: float = IN_EFFECT_TIMEOUT, interval: float = 0.1):
        self.timeout, self.interval = timeout, interval
        self.kube: KubeLab | None = None  # the lab's namespace, once attached (platforms/kube_lab.py)
        self.entries: list = []
        self.written: list | None = None  # the entries of the last generation written
        self.generation = 0
        self.statuses: dict[str, dict] = {}  # node -> its shaper's last status

    # Supervised: the namespace's API carries the desired state
    def attach(self, platform) -> None:
        self.kube = kube_of(platform, self.name)

    def healthy(self) -> bool:
        return True

    def stop(self) -> None:
        pass

    def release(self, executor, service: str, applied) -> None:
        pass  # the shapers release what no entry names any more

    def unsupported(self, entry) -> tuple[str, str] | None:
        return None  # the node's backend refuses what it cannot do (its error names the field)

    def plan(self, entries: list, ips: dict[str, str]) -> dict[str, object]:
        self.entries = list(entries)
        return {service: None for service in ips}

    def converge(self, executor, service: str, pid: int, plan, previous, force: bool):
        from laglab.shaping.backend import Applied

        return Applied(pid, plan)

    # Batching: one ConfigMap for the whole lab, written once per convergence
    def begin(self) -> None:
        pass

    def commit(self, executor, force: bool) -> None:
        from laglab.platforms import PlatformError
        from laglab.platforms.kube_api import KubeError
        from laglab.shaping.node_wire import DESIRED, read_desired, write_configmap

        api = self.kube.api
        wire = sorted((e.to_wire() for e in self.entries), key=lambda w: (w["service"], w["peer"] or ""))
        if wire == self.written and not force:
            return
        try:
            if self.written is None:  # a restarted controller continues the generations it finds
                self.generation = read_desired(api)[0]
            self.generation += 1
            write_configmap(api, DESIRED, "desired.json", {"generation": self.generation, "entries": wire})
        except KubeError as error:
            raise PlatformError(f"ConfigMap {DESIRED}: {error.message}") from None
        self.written = wire
        self._wait(self.generation)

    def _nodes(self) -> list[str]:
        containers = self.kube.pods.current()[0]
        placed = self.kube.pods.nodes()
        return sorted({placed[s] for s, c in containers.items() if c.running and c.shapeable and placed.get(s)})

    def _wait(self, generation: int) -> None:
        from laglab.platforms import PlatformError
        from laglab.shaping.node_wire import configmap, status_name

        waiting = self._nodes()

        def answered() -> bool:
            for node in list(waiting):
                found = configmap(self.kube.api, status_name(node))
                status = json.loads((found or {}).get("data", {}).get("status.json") or "{}")
                if status.get("generation", 0) >= generation:
                    self.statuses[node] = status
                    if status.get("error"):
                        raise PlatformError(f"the shaper on node {node}: {status['error']}")
                    waiting.remove(node)
            return not waiting

        where = self.kube.namespace  # the lab's namespace: the DaemonSet's pods run there
        poll(answered, self.timeout, self.interval, timed_out=lambda: PlatformError(
            f"no answer for generation {generation} from the shaper on {', '.join(waiting)} within {self.timeout:g}s "
            f"(is the shaper component applied? kubectl -n {where} get pods -l app.kubernetes.io/name=laglab-shaper)"
        ))  # fmt: skip

    def carriers(self, service: str, own_ip: str | None, applied: dict) -> list[str]:
        return [service]

    def read_back(self, executor, service: str, pid: int, applied) -> dict:
        node = self.kube.pods.nodes().get(service)
        return {"node": node, "shaper": self.statuses.get(node)}
