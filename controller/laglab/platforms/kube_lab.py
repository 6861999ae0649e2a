"""What acts on a Kubernetes lab's namespace through the API, as the parts that use it receive it: the
API client, the lab's pods as the API lists them, and the ownerReference put on every chaos object.
The platform (kubernetes.py), its PodChaos (pod_chaos.py) and the chaos-mesh and daemonset shaping
backends each get one `KubeLab` when they are built or attached, and read only its fields; a fault
that changes the pods says so to the pods (`forget`), not to the platform's insides."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from laglab.platforms.base import LabContainer, PlatformError
from laglab.platforms.kube_api import KubeApi, KubeError

NAME_LABEL = "app.kubernetes.io/name"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"  # the StatefulSet controller puts it on each of its pods
SHAPED_LABEL = "laglab.shaped"  # "never": the controller, set-up jobs (as compose's label)
ORDINAL = re.compile(r"-([0-9]+)$")


def service_of(pod: dict) -> str | None:
    """The lab's name for a pod: its `app.kubernetes.io/name` label, and for a StatefulSet's further
    pods (ordinal k > 0, e.g. mysql-target scaled to 3 replicas) that name with -k: mysql-target-0 is
    mysql-target, as on Docker, and mysql-target-2 is mysql-target-2."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    name = labels.get(NAME_LABEL)
    ordinal = ORDINAL.search(labels.get(POD_NAME_LABEL) or "")
    if name and ordinal and int(ordinal[1]) > 0:
        return f"{name}-{int(ordinal[1])}"
    return name


def pod_running(pod: dict) -> bool:
    """The pod runs (phase Running): it has its network namespace, which holds its shaping whatever its
    readiness says. Readiness is a probe's opinion of the service: mysql-target's fails once its IO
    thread stops (a partition, a crash's catch-up), and a service listed as not running lost its
    NetworkChaos objects, the 100 % loss a partition is made of among them (#38.2)."""
    return (pod.get("status") or {}).get("phase") == "Running"


class LabPods:
    """The lab's pods, one GET of the namespace's pods, kept for as long as a caller's `max_age` allows
    (0: asked again). One service per name label; a deleted pod is gone; a running one wins."""

    def __init__(self, api: KubeApi):
        self.api = api
        self._cache: tuple[float, dict[str, LabContainer], dict[str, dict]] | None = None

    def current(self, max_age: float = 0.0) -> tuple[dict[str, LabContainer], dict[str, dict]]:
        """service -> its container as the platform lists it, and service -> its pod as the API gave it."""
        cached = self._cache
        if max_age and cached is not None and time.monotonic() - cached[0] <= max_age:
            return dict(cached[1]), dict(cached[2])
        try:
            items = self.api.pods(NAME_LABEL)
        except KubeError as error:
            raise PlatformError(f"listing the lab's pods: {error.message}") from None
        found: dict[str, LabContainer] = {}
        pods: dict[str, dict] = {}
        for pod in sorted(items, key=lambda p: p["metadata"]["name"]):
            meta = pod.get("metadata") or {}
            labels = meta.get("labels") or {}
            service = service_of(pod)
            if not service or meta.get("deletionTimestamp"):
                continue
            running = pod_running(pod)
            entry = LabContainer(
                service, meta["name"], meta.get("uid", ""), 0, (pod.get("status") or {}).get("podIP"), running,
                shapeable=labels.get(SHAPED_LABEL) != "never", entered=False,
            )  # fmt: skip
            if service not in found or (entry.running and not found[service].running):
                found[service], pods[service] = entry, pod
        self._cache = (time.monotonic(), dict(found), dict(pods))
        return found, pods

    def forget(self) -> None:
        """The pods changed (a fault injected or recovered): the next look asks the API again."""
        self._cache = None

    def pod(self, service: str) -> dict:
        pods = self.current()[1]
        if service not in pods:
            raise PlatformError(f"{service}: no pod of this lab")
        return pods[service]

    def shared(self) -> dict[str, str]:
        """service -> its pod's name, for the services whose name label other pods carry too (the
        replicas of a scaled StatefulSet): a chaos object must select those by the pod-name label."""
        pods = self.current()[1]
        counts: dict[str, int] = {}
        for pod in pods.values():
            label = pod["metadata"]["labels"].get(NAME_LABEL)
            counts[label] = counts.get(label, 0) + 1
        return {
            service: pod["metadata"]["name"]
            for service, pod in pods.items()
            if counts[pod["metadata"]["labels"].get(NAME_LABEL)] > 1
        }

    def nodes(self) -> dict[str, str]:
        """service -> the node its pod was scheduled on."""
        pods = self.current()[1]
        return {service: str((pod.get("spec") or {}).get("nodeName") or "") for service, pod in pods.items()}


@dataclass(frozen=True)
class KubeLab:
    """The lab's namespace as its consumers need it: the API, its pods, and the owner of what the
    controller creates there (the controller's pod, so that deleting it removes what it injected)."""

    api: KubeApi
    pods: LabPods
    owner: dict | None  # an ownerReference put on every chaos object, or None (not run in a pod)

    @property
    def namespace(self) -> str:
        return self.api.namespace

    def owned(self, body: dict) -> dict:
        """A chaos object with the owner's reference on it (none when the controller has no pod)."""
        if self.owner:
            body["metadata"]["ownerReferences"] = [self.owner]
        return body
