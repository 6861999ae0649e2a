"""The fault actions on Kubernetes, as Chaos Mesh's PodChaos objects: kill (container-kill: the
container restarts), stop (pod-failure until the object goes), start (the pod-failure deleted),
restart (a kill); pause has none and is refused naming the action. The Docker platform does the same
actions through the Docker API (docker.py's act)."""

from __future__ import annotations

from laglab.errors import Kind
from laglab.platforms import PlatformError
from laglab.platforms.kube_api import KubeError
from laglab.platforms.kube_lab import KubeLab
from laglab.shaping.chaos_mesh import API_VERSION, MANAGED, duration, object_name, selector
from laglab.shaping.params import ShapingError

POD_ACTIONS = {"kill": "container-kill", "stop": "pod-failure"}


def pod_chaos(
    namespace: str, service: str, action: str, container: str, seconds: float | None = None, pods: dict | None = None
) -> dict:
    """A container fault: kill (container-kill: the container restarts) or stop (pod-failure, for
    `seconds`). Pause has no PodChaos: the platform will refuse it naming the action."""
    if action not in POD_ACTIONS:
        raise ShapingError(Kind.INVALID, f"action: {action} has no PodChaos (Chaos Mesh has {', '.join(POD_ACTIONS)})")
    spec: dict = {"action": POD_ACTIONS[action], "mode": "all", "selector": selector(namespace, [service], pods)}
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


class PodChaos:
    """The PodChaos objects of one lab's namespace (kube_lab.KubeLab: its API, pods and owner)."""

    def __init__(self, kube: KubeLab):
        self.kube = kube

    def get(self, service: str, action: str) -> dict | None:
        path = self.kube.api.chaos_path(self.kube.namespace, "podchaos", object_name(service, action))
        try:
            return self.kube.api.request("GET", path)
        except KubeError as error:
            if error.not_found:
                return None
            raise PlatformError(f"{service}: reading its PodChaos: {error.message}") from None

    def act(self, service: str, action: str, pod) -> None:
        """`pod`: the service's pod when it is needed (a function: start and pause need none)."""
        if action in ("pause", "unpause"):
            raise PlatformError(
                f"action: {action} has no Chaos Mesh equivalent on Kubernetes (kill, stop, start, restart)"
            )
        if action == "start":  # the end of a stop: its pod-failure goes
            self.delete(service, "stop")
            return
        kind = "kill" if action in ("kill", "restart") else "stop"
        container = pod()["spec"]["containers"][0]["name"]
        body = self.kube.owned(pod_chaos(self.kube.namespace, service, kind, container, pods=self.kube.pods.shared()))
        self.delete(service, kind)  # a container-kill is done once injected: the last one may remain
        try:
            self.kube.api.request("POST", self.kube.api.chaos_path(self.kube.namespace, "podchaos"), body=body)
        except KubeError as error:
            raise PlatformError(f"action: {action}: creating its PodChaos: {error.message}") from None
        self.kube.pods.forget()  # the pods changed: list them again

    def delete(self, service: str, action: str, timeout: float = 60.0) -> None:
        path = self.kube.api.chaos_path(self.kube.namespace, "podchaos", object_name(service, action))
        try:  # Chaos Mesh's finalizer holds it until recovered
            if self.kube.api.delete_until_gone(path, timeout, 0.2):
                self.kube.pods.forget()  # the pods changed: list them again
                return
        except KubeError as error:
            raise PlatformError(f"{service}: deleting its PodChaos: {error.message}") from None
        raise PlatformError(f"{service}: its PodChaos was not recovered within {timeout:g}s")
