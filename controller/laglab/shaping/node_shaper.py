"""The laglab shaper: one per node (a DaemonSet, deploy/kubernetes/components/shaper), for clusters
whose nodes have no sch_netem for Chaos Mesh, or to shape with the lab's own backends. It runs
today's backends (kernel netem where the node has it, else the userspace NFQUEUE one) on the lab's
pods of its node, entering their network namespaces as the controller does on Docker.

Its desired state comes from a Kubernetes object, never from a private RPC: the ConfigMap
`laglab-shaping` of the lab's namespace, which the controller writes (`shaping/daemonset.py`): a
generation and the desired entries, the same ones the Docker backends take. Each shaper plans with
every pod of the lab (the other nodes' by address) and converges the pods of its node; then it
reports in its own ConfigMap, `laglab-shaper-<node>`: the generation it holds, when, and the error if
its kernel refused. The controller answers a change once every node with a lab pod reports it.

    python -m laglab.shaping.node_shaper      (NODE_NAME, LAB_NAMESPACE; in a pod with hostPID and NET_ADMIN)
"""

from __future__ import annotations

import logging
import os
import threading
import time

from laglab.platforms.kube_api import KubeApi
from laglab.platforms.node import NodePlatform
from laglab.shaping.executor import Executor
from laglab.shaping.node_wire import WireError, read_desired, status_name, write_configmap
from laglab.shaping.reconciler import FAILURES, Reconciler

log = logging.getLogger("laglab.shaping.node_shaper")


class NodeShaper:
    def __init__(self, api: KubeApi, platform: NodePlatform, backend, interval: float = 0.5, executor=None):
        self.api, self.platform, self.interval = api, platform, interval
        self.executor = executor if executor is not None else Executor(owns=platform.owns)
        self.reconciler = Reconciler(platform, self.executor, backend)
        self.generation: int | None = None  # held now (None: nothing applied yet)
        self._stop = threading.Event()

    def step(self) -> None:
        """Read the desired state; make this node's pods hold it when it or the pods changed; report."""
        try:
            generation, entries = read_desired(self.api)
        except WireError as bad:  # answered, not applied: the controller's change fails naming it
            if bad.generation != self.generation:
                log.error("generation %s cannot be read: %s", bad.generation, bad)
                self.generation = bad.generation
                self._report(bad.generation, f"WireError: {bad}")
            return
        lab = self.platform.list()
        if generation == self.generation and not self.reconciler.stale(lab):
            return
        error = None
        try:
            self.reconciler.apply(entries, lab, force=self.generation is None)
        except FAILURES as failure:
            error = f"{type(failure).__name__}: {failure}"
            log.error("applying generation %s failed: %s", generation, error)
        self.generation = generation
        self._report(generation, error)

    def _report(self, generation: int, error: str | None) -> None:
        write_configmap(
            self.api,
            status_name(self.platform.node),
            "status.json",
            {
                "node": self.platform.node,
                "generation": generation,
                "applied_at": round(time.time(), 3),
                "backend": self.reconciler.backend.name,
                "services": sorted(self.reconciler.applied),
                "error": error,
            },
            labels={"app.kubernetes.io/component": "shaper"},
        )

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as error:  # the API or a namespace: try again at the next tick
                log.warning("shaper step: %s: %s", type(error).__name__, error)
            self._stop.wait(self.interval)

    def stop(self, clear: bool = True) -> None:
        self._stop.set()
        if clear:
            try:
                self.reconciler.apply([], self.platform.list(), force=True)
            except Exception as error:
                log.error("clearing at exit failed: %s", error)
        self.reconciler.stop()
        self.executor.close()


def main() -> None:
    import signal

    from laglab.shaping.backends import choose, netem_available

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    environ = os.environ
    api = KubeApi.from_environment(environ, namespace=environ.get("LAB_NAMESPACE"))
    platform = NodePlatform(api, environ["NODE_NAME"])
    setting = environ.get("SHAPING_BACKEND", "auto")
    backend = choose(setting, netem_available(Executor()) if setting == "auto" else None)
    shaper = NodeShaper(api, platform, backend)
    signal.signal(signal.SIGTERM, lambda *_: shaper._stop.set())
    log.info("shaping the pods of %s on node %s with the %s backend", api.namespace, platform.node, backend.name)
    shaper.run()
    shaper.stop(clear=True)


if __name__ == "__main__":
    main()
