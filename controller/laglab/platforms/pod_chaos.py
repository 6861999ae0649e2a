"""The fault actions on Kubernetes, as Chaos Mesh's PodChaos objects: kill (container-kill: the
container restarts), stop (pod-failure until the object goes), start (the pod-failure deleted),
restart (a kill); pause has none and is refused naming the action. The Docker platform does the same
actions through the Docker API (docker.py's act)."""

from __future__ import annotations

from laglab.errors import Kind
from laglab.platforms import PlatformError
from laglab.platforms.kube_api import KubeError
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
    """The PodChaos objects of one platform's namespace."""

    def __init__(self, platform):
        self.platform = platform

    def get(self, service: str, action: str) -> dict | None:
        path = self.platform.api.chaos_path(self.platform.project, "podchaos", object_name(service, action))
        try:
            return self.platform.api.request("GET", path)
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
        body = pod_chaos(self.platform.project, service, kind, container, pods=self.platform.shared_pods())
        if self.platform.owner:
            body["metadata"]["ownerReferences"] = [self.platform.owner]
        self.delete(service, kind)  # a container-kill is done once injected: the last one may remain
        try:
            self.platform.api.request(
                "POST", self.platform.api.chaos_path(self.platform.project, "podchaos"), body=body
            )
        except KubeError as error:
            raise PlatformError(f"action: {action}: creating its PodChaos: {error.message}") from None
        self.platform._cache = None  # the pods changed: list them again

    def delete(self, service: str, action: str, timeout: float = 60.0) -> None:
        path = self.platform.api.chaos_path(self.platform.project, "podchaos", object_name(service, action))
        try:  # Chaos Mesh's finalizer holds it until recovered
            if self.platform.api.delete_until_gone(path, timeout, 0.2):
                self.platform._cache = None  # the pods changed: list them again
                return
        except KubeError as error:
            raise PlatformError(f"{service}: deleting its PodChaos: {error.message}") from None
        raise PlatformError(f"{service}: its PodChaos was not recovered within {timeout:g}s")
