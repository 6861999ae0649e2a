"""What a run ran on (environment.json): the platform, its nodes and the node of each service, server
versions, images, kernel, shaping backend, host size."""

from __future__ import annotations

import os
import platform as os_platform
from dataclasses import dataclass
from typing import TYPE_CHECKING

from laglab.replicators.db import Endpoint, server_version
from laglab.shaping import tcp_buffers

if TYPE_CHECKING:
    from laglab.platforms import Platform
    from laglab.shaping.executor import Executor

BUFFERED = ("mysql-source", "mysql-target", "loadgen")  # whose TCP buffers a run records


@dataclass(frozen=True)
class Environment:
    """What describes a run's environment: the platform and its namespaces, the servers, the shaping
    backend in use, whether the kernel has netem, the lag recorder's interval."""

    platform: Platform
    executor: Executor
    servers: tuple[Endpoint, ...]
    shaping_backend: str
    netem_available: bool | None
    heartbeat_interval: float

    def describe(self) -> dict:
        placed = self.platform.nodes()
        return {
            "platform": self.platform.name,
            "nodes": sorted(set(placed.values())),
            "service_nodes": dict(sorted(placed.items())),
            "server_versions": {endpoint.name: server_version(endpoint) for endpoint in self.servers},
            "images": {service: self.platform.image(service) for service in self.platform.list()},
            "kernel": os_platform.release(),
            "shaping_backend": self.shaping_backend,
            "netem_available": self.netem_available,
            "host_cores": os.cpu_count(),
            "host_memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "heartbeat_interval_ms": round(self.heartbeat_interval * 1000),
            "tcp_buffers": buffers(self.platform, self.executor),
        }


def buffers(platform: Platform, executor: Executor) -> dict:
    """net.ipv4.tcp_wmem / tcp_rmem of the servers' and the load generator's network namespaces, and
    the smallest send buffer max among them (the bandwidth-delay bound of a stream: bottleneck.py).
    Empty where the controller does not enter the containers (Kubernetes)."""
    found = {}
    for service, container in sorted(platform.list().items()):
        if service in BUFFERED and container.running and container.entered:
            found[service] = tcp_buffers.read(executor, container.pid)
    maxes = [m for m in (tcp_buffers.max_bytes(v) for v in found.values()) if m]
    return {**found, "wmem_max": min(maxes)} if found else {}
