"""Chaos Mesh objects for shaping and faults on Kubernetes: the objects the controller creates
(through the Kubernetes platform, platforms/kubernetes.py), from the same Request and Impairment
values the Docker backends take, checked offline against Chaos Mesh's CRD schemas and its admission
webhook's rules (tests/unit/test_chaos_mesh.py).

- Shaping is one NetworkChaos per sender and receiver, `action: netem`, `direction: to`, selecting
  the sender's pods by `app.kubernetes.io/name` (one replica of a scaled StatefulSet, mysql-target-2,
  by its `statefulset.kubernetes.io/pod-name`: the name label would select them all) with the
  receiver as `target`: an egress entry is its service's, an ingress one its peer's (Chaos Mesh puts a
  `from` object's rules on the target's pods anyway), and the entries on one pair add up in one object
  (ChaosMeshBackend.plan); a service-wide entry is one object per lab peer. netem's
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
from typing import TYPE_CHECKING

from laglab.deadline import poll
from laglab.errors import Kind
from laglab.shaping.backend import kube_of
from laglab.shaping.impairment import Impairment
from laglab.shaping.params import Direction, Request, ShapingError

if TYPE_CHECKING:
    from laglab.platforms.kube_lab import KubeLab

API_VERSION = "chaos-mesh.org/v1alpha1"
NAME_LABEL = "app.kubernetes.io/name"  # how the lab's manifests name each service's pods
MANAGED = {"app.kubernetes.io/managed-by": "laglab-controller"}


def duration(seconds: float) -> str:
    """Chaos Mesh's duration pattern (^[0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h)$), in ms to the microsecond."""
    return f"{round(seconds * 1000, 3):.3f}".rstrip("0").rstrip(".") + "ms"


def percent(fraction: float) -> str:
    """Chaos Mesh's percentages are plain numbers in strings ("25" for 25 %)."""
    return f"{round(fraction * 100, 4):.4f}".rstrip("0").rstrip(".")


POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"


def selector(namespace: str, services: list[str], pods: dict[str, str] | None = None) -> dict:
    """The pods of `services`: by their name label, or, for a service in `pods` (one of several pods
    under one name label: mysql-target scaled to N replicas), by its StatefulSet pod name."""
    pods = pods or {}
    named = [pods[s] for s in services if s in pods]
    if named:
        if len(named) < len(services):
            raise ShapingError(
                Kind.INVALID,
                f"services: {', '.join(sorted(services))}: one chaos object selects either replicas of one "
                "StatefulSet by pod name or services by name, not both; shape them separately",
            )
        if len(named) == 1:
            return {"namespaces": [namespace], "labelSelectors": {POD_NAME_LABEL: named[0]}}
        return {
            "namespaces": [namespace],
            "expressionSelectors": [{"key": POD_NAME_LABEL, "operator": "In", "values": sorted(named)}],
        }
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
        # jitter written even when 0: Chaos Mesh's mutating webhook stores "0ms" for an empty one, and a
        # spec that differs from the stored one is deleted and created again at every converge.
        delay: dict = {"latency": duration(s.delay), "jitter": duration(s.jitter), "correlation": correlation}
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
        out["rate"] = {"rate": whole_rate(s.rate)}
    return out


# Failed applies in a row on one pod before a change fails: Chaos Mesh retries a failed apply itself
# (controllers/common/records/controller.go: a Failed Apply event in the container record, an event of
# reason Failed, and a requeue), so one failure is a chaos-daemon restarting, not an answer; the same
# failure three times over (a node without sch_netem) is. An event of reason Failed alone proves
# nothing: the condition controller uses it for an update conflict too.
FAILED_APPLIES = 3


def apply_failures(obj: dict) -> list[str]:
    """The longest run of failed applies ending a container record's events (its messages, in order)."""
    worst: list[str] = []
    for record in ((obj.get("status") or {}).get("experiment") or {}).get("containerRecords") or []:
        run: list[str] = []
        for event in record.get("events") or []:
            if event.get("operation") == "Apply":
                run = [*run, event.get("message", "")] if event.get("type") == "Failed" else []
        worst = max(worst, run, key=len)
    return worst


def unknown_fields(dropped: list[str]) -> str:
    """Why the cluster's NetworkChaos lacks fields laglab sends: its Chaos Mesh is older than them."""
    since = {"rate": "2.7.0"}  # api/v1alpha1/podnetworkchaos_types.go: TcParameter.Rate, new in v2.7.0
    needs = sorted({since[f] for f in dropped if f in since}) or ["a newer release"]
    return (f"this cluster's Chaos Mesh does not know NetworkChaos spec.{dropped[0]} (the API server dropped it); "
            f"it needs Chaos Mesh {needs[-1]} or later: upgrade it, or shape without it")  # fmt: skip


def whole_rate(bits: float) -> str:
    """A rate as Chaos Mesh's webhook admits it: a whole number and a unit (isValidRateUnit reads the
    number with ParseUint, so `1.5mbit` from a search or a trace is refused): the largest of gbit, mbit
    and kbit that divides the rate rounded to a whole bit/s, else bits (`1500kbit`, `1234567bit`)."""
    whole = max(1, round(bits))
    for unit, size in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}bit"


def network_chaos(namespace: str, service: str, request: Request, never: frozenset[str] = frozenset()) -> dict:
    """The NetworkChaos of one shaping entry (what PUT /api/shaping/<service> asks)."""
    for name in (service, request.peer):
        if name in never:
            raise ShapingError(Kind.CONFLICT, f"service: {name} is not shaped (it is the lab's measuring apparatus)")
    if request.direction is Direction.INGRESS:  # what the peer sends it: on the peer, as the backend plans it
        if request.peer is None:
            return link_chaos(namespace, service, None, "from", request.shaping)  # refused, naming why
        return link_chaos(namespace, request.peer, service, "to", request.shaping)
    return link_chaos(namespace, service, request.peer, "to", request.shaping)


def link_chaos(
    namespace: str, service: str, peer: str | None, direction: str, shaping: Impairment, pods: dict | None = None
) -> dict:
    """One NetworkChaos: what `service` sends to (`to`) or receives from (`from`) `peer` (None: every
    destination, `to` only), with one impairment. `pods`: as selector()'s."""
    if direction == "from" and peer is None:
        raise ShapingError(
            Kind.INVALID,
            "direction: Chaos Mesh shapes what a pod receives only from a named peer (direction from needs a "
            "target); put the shaping on each sender's link to it instead",
        )
    spec: dict = {
        "action": "netem",
        "mode": "all",
        "selector": selector(namespace, [service], pods),
        "direction": direction,
        **netem_fields(shaping),
    }
    if peer is not None:
        spec["target"] = {"mode": "all", "selector": selector(namespace, [peer], pods)}
    link = peer or "all"
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkChaos",
        "metadata": {
            "name": object_name(service, direction, link),
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


# --- the backend: shaping on Kubernetes through NetworkChaos objects ---
IN_EFFECT_TIMEOUT = 60.0  # Chaos Mesh injects within seconds; a pod that is never injected fails the change


class ChaosMeshBackend:
    """Shaping as NetworkChaos objects in the lab's namespace, one per link and direction (`to` what
    a service sends, `from` what it receives, each with its peer as the target), created and deleted
    by the controller through the platform's API (platforms/kubernetes.py).

    A change to a link is delete, wait until the object is gone (Chaos Mesh's finalizer holds it
    until recovered), create: Chaos Mesh refuses any update of a spec. A link is in effect only when
    its object says AllInjected and every container record says Injected; three failed applies in a
    row on one pod fail the change, naming the object and chaos-daemon's words. Entries combine as on
    Docker (delays add, losses combine) into one object per sender and receiver (`plan`).
    """

    name = "chaos-mesh"

    def __init__(self, timeout: float = IN_EFFECT_TIMEOUT, interval: float = 0.25):
        self.timeout, self.interval = timeout, interval
        self.kube: KubeLab | None = None  # the lab's namespace, once attached (platforms/kube_lab.py)
        self.labels: dict[str, str] = {}  # put on every object besides its own (app.py: the controller's run)

    # Supervised: the namespace's API is how it acts.
    def attach(self, platform) -> None:
        self.kube = kube_of(platform, self.name)

    @property
    def api(self):
        return self.kube.api

    @property
    def namespace(self) -> str:
        return self.kube.namespace

    def healthy(self) -> bool:
        return True

    def stop(self) -> None:
        pass

    def unsupported(self, entry) -> tuple[str, str] | None:
        if entry.ports:  # its CRD (chaos-mesh.org_networkchaos.yaml, 608b61e7c) has no port in any selector
            return "ports", ("Chaos Mesh's NetworkChaos selects pods and a direction, not ports: shape the whole "
                             "link here, or use the userspace or kernel backend for ports")  # fmt: skip
        try:
            netem_fields(entry.shaping)
        except ShapingError as error:
            field, _, text = error.message.partition(": ")
            return field, text
        return None

    def plan(self, entries: list, ips: dict[str, str]) -> dict[str, dict[str, dict]]:
        """service -> {object name: NetworkChaos}, for every service in `ips`."""
        # One object per sender and receiver, direction `to` with the receiver as target: Chaos Mesh
        # puts a `from` object's rules on the target's pods, so B's ingress from A and A's egress to B
        # were two filtered rules on A for one address, and its tc server kept one of them (one band
        # per ipset; the last matching CLASSIFY chain wins in Go map order). Folded into one, they add
        # as on Docker. A service-wide entry is one object per lab peer: an object without a target
        # also held what the pod sends the controller (its lag answers: lag read low by the delay);
        # on Docker only the lab's peers are held.
        links: dict[tuple[str, str], Impairment] = {}

        def add(sender: str, receiver: str, shaping: Impairment) -> None:
            key = (sender, receiver)
            links[key] = links[key].plus(shaping) if key in links else shaping

        for entry in entries:
            if entry.service not in ips or (entry.peer is not None and entry.peer not in ips):
                continue
            for peer in [entry.peer] if entry.peer else [s for s in sorted(ips) if s != entry.service]:
                if entry.direction.sends:
                    add(entry.service, peer, entry.shaping)
                if entry.direction.receives:
                    add(peer, entry.service, entry.shaping)
        plans: dict[str, dict[str, dict]] = {service: {} for service in ips}
        pods = self.kube.pods.shared() if self.kube is not None else {}
        for (service, peer), shaping in sorted(links.items()):
            body = link_chaos(self.namespace, service, peer, "to", shaping, pods)
            body["metadata"]["labels"].update(self.labels)
            if self.kube is not None:
                self.kube.owned(body)
            plans[service][body["metadata"]["name"]] = body
        return plans

    def converge(self, executor, service: str, pid: int, plan: dict[str, dict], previous, force: bool):
        from laglab.platforms import PlatformError
        from laglab.shaping.backend import Applied

        held = dict(previous.state or {}) if previous is not None and not force else self._listed(service)
        stale = [name for name, body in held.items() if name not in plan or body.get("spec") != plan[name]["spec"]]
        for name in stale:
            self._delete(name)
            held.pop(name)
        created = []
        for name, body in plan.items():
            if name in held:
                continue
            try:
                made = self.api.request("POST", self.api.chaos_path(self.namespace, "networkchaos"), body=body)
            except Exception as error:
                raise PlatformError(f"NetworkChaos {name}: {getattr(error, 'message', error)}") from None
            dropped = sorted(set(body["spec"]) - set((made or {}).get("spec") or {}))
            if dropped:  # the API server prunes what the installed CRD does not know, with only a warning
                self._delete(name)
                raise PlatformError(f"{', '.join(dropped)}: {unknown_fields(dropped)}")
            created.append(name)
            held[name] = body
        for name in created:
            self._wait_injected(name)
        return Applied(pid, plan, state=held)

    def _owned(self, service: str) -> list[dict]:
        """This service's NetworkChaos objects as the cluster holds them."""
        from laglab.platforms import PlatformError
        from laglab.platforms.kube_api import KubeError

        path = self.api.chaos_path(self.namespace, "networkchaos")
        selector = f"app.kubernetes.io/managed-by=laglab-controller,laglab.io/service={service}"
        try:
            return self.api.request("GET", path, params={"labelSelector": selector}).get("items") or []
        except KubeError as error:  # 404: Chaos Mesh is not installed; 403: the Role lacks the component
            raise PlatformError(f"NetworkChaos of {service}: {error.message}") from None

    def _listed(self, service: str) -> dict[str, dict]:
        """What the cluster holds for a service (after a restart of the controller): its names and specs."""
        return {item["metadata"]["name"]: {"spec": item.get("spec")} for item in self._owned(service)}

    def _delete(self, name: str) -> None:
        from laglab.platforms import PlatformError
        from laglab.platforms.kube_api import KubeError

        path = self.api.chaos_path(self.namespace, "networkchaos", name)
        try:
            if self.api.delete_until_gone(path, self.timeout, self.interval):
                return
        except KubeError as error:
            raise PlatformError(f"NetworkChaos {name}: deleting it: {error.message}") from None
        raise PlatformError(f"NetworkChaos {name}: not recovered within {self.timeout:g}s (it is still there)")

    def _wait_injected(self, name: str) -> None:
        from laglab.platforms import PlatformError
        from laglab.platforms.kube_api import KubeError

        path = self.api.chaos_path(self.namespace, "networkchaos", name)
        last: dict = {}

        def injected_now() -> bool:
            try:
                last["current"] = self.api.request("GET", path)
            except KubeError as error:
                raise PlatformError(f"NetworkChaos {name}: {error.message}") from None
            if injected(last["current"]):
                return True
            failures = apply_failures(last["current"])
            if len(failures) >= FAILED_APPLIES:
                raise PlatformError(
                    f"NetworkChaos {name}: Chaos Mesh failed to inject it ({len(failures)} tries): {failures[-1]}"
                )
            return False

        poll(injected_now, self.timeout, self.interval, timed_out=lambda: PlatformError(
            f"NetworkChaos {name}: not injected within {self.timeout:g}s ({summary(last['current'])})"))  # fmt: skip

    def release(self, executor, service: str, applied) -> None:
        for name in list((applied.state or {}) if applied is not None else {}):
            self._delete(name)

    def carriers(self, service: str, own_ip: str | None, applied: dict) -> list[str]:
        return [service]

    def read_back(self, executor, service: str, pid: int, applied) -> dict:
        """The service's NetworkChaos objects as the cluster holds them: spec, conditions, records."""
        items = self._owned(service)
        return {
            "networkchaos": [
                {"name": item["metadata"]["name"], "spec": item.get("spec"), "in_effect": injected(item),
                 "status": summary(item)}
                for item in items
            ]
        }  # fmt: skip


def conditions(obj: dict) -> dict[str, bool]:
    return {c.get("type"): c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []}


def records(obj: dict) -> list[dict]:
    return ((obj.get("status") or {}).get("experiment") or {}).get("containerRecords") or []


def injected(obj: dict) -> bool:
    """In effect: AllInjected, and every selected container's record says Injected."""
    found = records(obj)
    return (
        conditions(obj).get("AllInjected", False) and bool(found) and all(r.get("phase") == "Injected" for r in found)
    )


def summary(obj: dict) -> str:
    said = conditions(obj)
    phases = sorted({str(r.get("phase")) for r in records(obj)})
    return (
        ", ".join([*(f"{k}={'True' if v else 'False'}" for k, v in sorted(said.items())), *phases]) or "no status yet"
    )
