"""Chaos Mesh objects for shaping and faults on Kubernetes (issue #23, in progress: nothing creates them
in a cluster yet; the Kubernetes platform that will is not built). What exists: the objects the
controller would create, from the same Request and Impairment values the Docker backends take,
checked offline against Chaos Mesh's CRD schemas and its admission webhook's rules
(tests/unit/test_chaos_mesh.py).

- A shaping entry (service, Request) is one NetworkChaos, `action: netem`, selecting the service's
  pods by `app.kubernetes.io/name`: egress is `direction: to` (with a `target` for a peer), ingress
  `direction: from` with its peer as `target` (the webhook refuses `from` without one). netem's
  fields map one to one (delay{latency, jitter, correlation, reorder{reorder, correlation, gap}},
  loss, duplicate, corrupt, each with the correlation; rate{rate}); what NetworkChaos cannot say (a
  jitter distribution, the Gilbert-Elliott loss model) is refused naming the field.
- A partition is a NetworkChaos `action: partition` from one side to the other (`both`, or `to` one way).
- A container fault is a PodChaos: kill -> container-kill, stop -> pod-failure.
Chaos Mesh refuses any update of a chaos's spec, so a change is: delete, wait for AllRecovered,
create (the name says which link, so there is one object a link and direction).
"""

from __future__ import annotations

import zlib

from ..errors import Kind
from .impairment import Impairment, format_rate
from .params import Direction, Request, ShapingError

API_VERSION = "chaos-mesh.org/v1alpha1"
NAME_LABEL = "app.kubernetes.io/name"  # how the lab's manifests name each service's pods
MANAGED = {"app.kubernetes.io/managed-by": "laglab-controller"}


def duration(seconds: float) -> str:
    """Chaos Mesh's duration pattern (^[0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h)$), in ms to the microsecond."""
    return f"{round(seconds * 1000, 3):.3f}".rstrip("0").rstrip(".") + "ms"


def percent(fraction: float) -> str:
    """Chaos Mesh's percentages are plain numbers in strings ("25" for 25 %)."""
    return f"{round(fraction * 100, 4):.4f}".rstrip("0").rstrip(".")


def selector(namespace: str, services: list[str]) -> dict:
    if len(services) == 1:
        return {"namespaces": [namespace], "labelSelectors": {NAME_LABEL: services[0]}}
    return {
        "namespaces": [namespace],
        "expressionSelectors": [{"key": NAME_LABEL, "operator": "In", "values": sorted(services)}],
    }


def object_name(*parts: str) -> str:
    """A DNS-1123 name: laglab-<parts>, shortened with a hash of the whole when it would pass 63."""
    name = "-".join(("laglab", *parts)).lower()
    if len(name) <= 63:
        return name
    return f"{name[:54]}-{zlib.crc32(name.encode()):08x}"


def netem_fields(s: Impairment) -> dict:
    if s.distribution:
        raise ShapingError(Kind.INVALID, "distribution: Chaos Mesh's NetworkChaos has no jitter distribution")
    if s.gemodel:
        raise ShapingError(Kind.INVALID, "gemodel: Chaos Mesh's NetworkChaos has no Gilbert-Elliott loss model")
    correlation = percent(s.correlation)
    out: dict = {}
    if s.delay or s.jitter or s.reorder:
        delay: dict = {"latency": duration(s.delay), "correlation": correlation}
        if s.jitter:
            delay["jitter"] = duration(s.jitter)
        if s.reorder:
            delay["reorder"] = {"reorder": percent(s.reorder), "correlation": correlation, "gap": s.gap}
        out["delay"] = delay
    if s.loss:
        out["loss"] = {"loss": percent(s.loss), "correlation": correlation}
    if s.duplicate:
        out["duplicate"] = {"duplicate": percent(s.duplicate), "correlation": correlation}
    if s.corrupt:
        out["corrupt"] = {"corrupt": percent(s.corrupt), "correlation": correlation}
    if s.rate:
        out["rate"] = {"rate": format_rate(s.rate)}
    return out


def network_chaos(namespace: str, service: str, request: Request, never: frozenset[str] = frozenset()) -> dict:
    """The NetworkChaos of one shaping entry (what PUT /api/shaping/<service> asks)."""
    for name in (service, request.peer):
        if name in never:
            raise ShapingError(Kind.CONFLICT, f"service: {name} is not shaped (it is the lab's measuring apparatus)")
    ingress = request.direction is Direction.INGRESS
    if ingress and request.peer is None:
        raise ShapingError(
            Kind.INVALID,
            "direction: Chaos Mesh shapes what a pod receives only from a named peer (direction from needs a "
            "target); put the shaping on each sender's link to it instead",
        )
    spec: dict = {
        "action": "netem",
        "mode": "all",
        "selector": selector(namespace, [service]),
        "direction": "from" if ingress else "to",
        **netem_fields(request.shaping),
    }
    if request.peer is not None:
        spec["target"] = {"mode": "all", "selector": selector(namespace, [request.peer])}
    link = request.peer or "all"
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkChaos",
        "metadata": {
            "name": object_name(service, "from" if ingress else "to", link),
            "namespace": namespace,
            "labels": {**MANAGED, "laglab.io/service": service, "laglab.io/peer": link},
        },
        "spec": spec,
    }


def partition_chaos(namespace: str, ident: str, a: list[str], b: list[str], oneway: bool) -> dict:
    """A partition between two groups: nothing from a reaches b (and, not one way, nothing back)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkChaos",
        "metadata": {"name": object_name("partition", ident), "namespace": namespace, "labels": dict(MANAGED)},
        "spec": {
            "action": "partition",
            "mode": "all",
            "selector": selector(namespace, a),
            "direction": "to" if oneway else "both",
            "target": {"mode": "all", "selector": selector(namespace, b)},
        },
    }


POD_ACTIONS = {"kill": "container-kill", "stop": "pod-failure"}


def pod_chaos(namespace: str, service: str, action: str, container: str, seconds: float | None = None) -> dict:
    """A container fault: kill (container-kill: the container restarts) or stop (pod-failure, for
    `seconds`). Pause has no PodChaos: the platform will refuse it naming the action."""
    if action not in POD_ACTIONS:
        raise ShapingError(Kind.INVALID, f"action: {action} has no PodChaos (Chaos Mesh has {', '.join(POD_ACTIONS)})")
    spec: dict = {"action": POD_ACTIONS[action], "mode": "all", "selector": selector(namespace, [service])}
    if action == "kill":
        spec["containerNames"] = [container]
    if seconds is not None:
        spec["duration"] = duration(seconds)
    return {
        "apiVersion": API_VERSION,
        "kind": "PodChaos",
        "metadata": {"name": object_name(service, action), "namespace": namespace, "labels": dict(MANAGED)},
        "spec": spec,
    }
