"""What a run ran on (environment.json): the platform, its nodes and the node of each service, server
versions, images, kernel, shaping backend, host size."""

from __future__ import annotations

import os
import platform

from .. import tcp_buffers
from ..db import server_version

BUFFERED = ("mysql-source", "mysql-target", "loadgen")  # whose TCP buffers a run records


def describe(lab) -> dict:
    placed = lab.platform.nodes()
    return {
        "platform": lab.platform.name,
        "nodes": sorted(set(placed.values())),
        "service_nodes": dict(sorted(placed.items())),
        "server_versions": {endpoint.name: server_version(endpoint) for endpoint in (lab.source, lab.target)},
        "images": {service: lab.platform.image(service) for service in lab.platform.list()},
        "kernel": platform.release(),
        "shaping_backend": lab.shaping.backend.name,
        "netem_available": lab.netem_available,
        "host_cores": os.cpu_count(),
        "host_memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "heartbeat_interval_ms": round(lab.recorder.interval * 1000) if lab.recorder else None,
        "tcp_buffers": buffers(lab),
    }


def buffers(lab) -> dict:
    """net.ipv4.tcp_wmem / tcp_rmem of the servers' and the load generator's network namespaces, and
    the smallest send buffer max among them (the bandwidth-delay bound of a stream: bottleneck.py).
    Empty where the controller does not enter the containers (Kubernetes)."""
    found = {}
    for service, container in sorted(lab.platform.list().items()):
        if service in BUFFERED and container.running and container.entered:
            found[service] = tcp_buffers.read(lab.executor, container.pid)
    maxes = [m for m in (tcp_buffers.max_bytes(v) for v in found.values()) if m]
    return {**found, "wmem_max": min(maxes)} if found else {}
