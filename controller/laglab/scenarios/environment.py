"""What a run ran on (environment.json): the platform, its nodes and the node of each service, server
versions, images, kernel, shaping backend, host size."""

from __future__ import annotations

import os
import platform

from ..db import server_version


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
    }
