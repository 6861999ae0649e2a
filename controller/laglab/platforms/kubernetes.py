"""The Kubernetes platform: the lab's services are the pods of its namespace, each named by its
`app.kubernetes.io/name` label (deploy/kubernetes gives every pod one), seen through the Kubernetes
API with the controller's service account. The controller holds no host privilege there: it enters
no network namespace (no PID, no bridge), runs commands in a pod through the API's exec, and breaks
containers through Chaos Mesh's PodChaos objects, which it owns.

Faults as Chaos Mesh does them: `kill` and `restart` are a PodChaos `container-kill` (the kubelet
restarts the container itself; the service is down until its readiness probe passes again); `stop`
is a PodChaos `pod-failure` kept until `start` deletes it; `pause` has no Chaos Mesh equivalent and
is refused naming the action.
"""

from __future__ import annotations

import base64
import logging
import re

from laglab.deadline import poll
from laglab.platforms.base import LabContainer, PlatformError, ServiceState, running_of
from laglab.platforms.kube_api import ExecResult, KubeApi, KubeError
from laglab.platforms.kube_lab import KubeLab, LabPods, pod_running
from laglab.platforms.pod_chaos import PodChaos

log = logging.getLogger("laglab.kubernetes")
FILE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class KubernetesPlatform:
    name = "kubernetes"
    restarts_killed = True  # the kubelet restarts a killed container at once

    def __init__(self, api: KubeApi, owner: dict | None = None):
        self.api = api
        self.project = api.namespace  # the lab is its namespace
        # What acts on the namespace (kube_lab.py): the pods as listed, and the chaos objects' owner.
        self.kube = KubeLab(api, LabPods(api), owner)
        self.chaos = PodChaos(self.kube)  # the fault actions, as Chaos Mesh's PodChaos

    @classmethod
    def create(cls, project: str, environ) -> KubernetesPlatform:
        """In a pod: its service account (kube_api). The chaos objects' owner is the controller's pod
        (POD_NAME, POD_UID from the downward API), so that deleting the lab's controller removes what
        it injected. `project` is not used: the lab is the namespace the controller runs in."""
        return cls(KubeApi.from_environment(environ), _own_pod(environ))

    # --- the lab's services ---
    def list(self, max_age: float = 0.0) -> dict[str, LabContainer]:
        return self.kube.pods.current(max_age)[0]

    def running(self, *services: str, hint: str = "") -> list[LabContainer]:
        return running_of(self.list(), services, hint)

    def watch(self) -> None:
        """Nothing to follow: list() asks the API (one GET of the namespace's pods)."""

    def unwatch(self) -> None:
        """The controller stops: its connections to the API server close."""
        self.api.session.close()

    def image(self, service: str) -> str | None:
        try:
            return self.kube.pods.pod(service)["spec"]["containers"][0]["image"]
        except (PlatformError, KeyError, IndexError):
            return None

    def nodes(self) -> dict[str, str]:
        """service -> the node its pod was scheduled on."""
        return self.kube.pods.nodes()

    # --- network namespaces: none on this platform ---
    def owns(self, pid: int) -> bool:
        return False  # the controller enters no namespace on Kubernetes

    def bridge(self):
        raise PlatformError(
            "a Kubernetes lab has no bridge the controller may enter (shaping: SHAPING_BACKEND=chaos-mesh)"
        )

    # --- inside a service's container ---
    def exec(
        self, service: str, argv: list[str], workdir: str | None = None, container: str | None = None
    ) -> tuple[int, bytes]:
        """`container`: another container of the service's pod than its main one (tools())."""
        pod, main = _main(self, service)
        container = container or main
        try:
            result = self.api.exec(pod, container, _in_dir(argv, workdir))
        except KubeError as error:
            raise PlatformError(f"{service}: exec: {error.message}") from None
        return _code(result), result.output

    def exec_stream(self, service: str, argv: list[str], workdir: str | None = None, container: str | None = None):
        pod, main = _main(self, service)
        container = container or main
        try:
            return self.api.exec_stream(pod, container, _in_dir(argv, workdir), timeout=3600)
        except KubeError as error:
            raise PlatformError(f"{service}: exec: {error.message}") from None

    # --- iperf3 and ss in a pod whose image has none: an ephemeral container ---
    TOOLS = "laglab-tools"
    TOOLS_TIMEOUT = 90.0  # seconds for its image to be pulled and the container to start
    TOOLS_POLL = 0.5

    def tools(self, service: str) -> str:
        """The container of the service's pod to run iperf3 and ss in: its own when its image is
        loadgen's, else the ephemeral container laglab-tools on loadgen's image, added to the pod
        through its ephemeralcontainers subresource as `kubectl debug` does (it shares the pod's
        network namespace, so iperf3 there measures the pod's link). An ephemeral container cannot be
        removed: it sleeps until the pod goes, and the next measurement uses it again."""
        pod = self.kube.pods.pod(service)
        spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
        image = self.image("loadgen")
        if image is None:
            raise PlatformError("throughput: no loadgen pod in this lab to take the tools image (iperf3) from")
        if spec["containers"][0].get("image") == image:
            return spec["containers"][0]["name"]
        if self.TOOLS not in [c.get("name") for c in spec.get("ephemeralContainers") or []]:
            body = {"spec": {"ephemeralContainers": [{
                "name": self.TOOLS, "image": image, "command": ["sleep", "infinity"],
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }]}}  # fmt: skip
            try:
                self.api.request("PATCH", self.api.pods_path(name) + "/ephemeralcontainers", body=body,
                                 content_type="application/strategic-merge-patch+json")  # fmt: skip
            except KubeError as error:
                raise PlatformError(f"throughput: adding {self.TOOLS} to pod {name}: {error.message}") from None
        waiting: dict = {}

        def running() -> str | None:
            try:
                current = self.api.request("GET", self.api.pods_path(name))
            except KubeError as error:
                raise PlatformError(f"throughput: reading pod {name}: {error.message}") from None
            statuses = (current.get("status") or {}).get("ephemeralContainerStatuses") or []
            state = next((s.get("state") or {} for s in statuses if s.get("name") == self.TOOLS), {})
            if "running" in state:
                return self.TOOLS
            waiting.clear()
            waiting.update(state.get("waiting") or {})
            if waiting.get("reason") in (
                "ErrImagePull",
                "ImagePullBackOff",
                "InvalidImageName",
                "CreateContainerError",
            ):
                raise PlatformError(f"throughput: {self.TOOLS} in pod {name}: {waiting['reason']}: "
                                    f"{waiting.get('message', '')}".rstrip(": "))  # fmt: skip
            if "terminated" in state:
                ended = state["terminated"]
                raise PlatformError(f"throughput: {self.TOOLS} in pod {name} ended: {ended.get('reason', '')} "
                                    f"(exit {ended.get('exitCode')})")  # fmt: skip
            return None

        return poll(running, self.TOOLS_TIMEOUT, self.TOOLS_POLL, timed_out=lambda: PlatformError(
            f"throughput: {self.TOOLS} in pod {name} not running after {self.TOOLS_TIMEOUT:g}s"
            + (f" ({waiting.get('reason')})" if waiting.get("reason") else "")
        ))  # fmt: skip

    def read_file(self, service: str, path: str) -> bytes:
        code, out = self.exec(service, ["cat", "--", path])
        if code != 0:
            raise PlatformError(f"{service}: cannot read {path}: {out.decode(errors='replace').strip()[:200]}")
        return out

    def put_files(self, service: str, directory: str, files: dict[str, bytes]) -> None:
        """Each file through exec (the API's exec takes no archive): its bytes as base64 in an argument,
        decoded in the pod into `directory` with mode 600. No shell sees the contents or the names."""
        script = 'umask 077 && mkdir -p -- "$1" && printf %s "$2" | base64 -d > "$1/$3"'
        for name, data in files.items():
            if not FILE_NAME.match(name):
                raise PlatformError(f"{service}: {name!r} is not a plain file name")
            code, out = self.exec(service, ["sh", "-c", script, "sh", directory, base64.b64encode(data).decode(), name])
            if code != 0:
                raise PlatformError(f"{service}: writing {directory}/{name}: {out.decode(errors='replace')[:200]}")

    # --- faults, through Chaos Mesh's PodChaos (pod_chaos.py) ---
    def state(self, service: str) -> ServiceState:
        pod = self.kube.pods.pod(service)
        if self.chaos.get(service, "stop") is not None:
            return ServiceState(False, False, "stopped (PodChaos pod-failure)")
        status = pod.get("status") or {}
        return ServiceState(_ready(pod), False, str(status.get("phase") or "").lower())

    def act(self, service: str, action: str) -> None:
        self.chaos.act(service, action, pod=lambda: self.kube.pods.pod(service))


def statefulset_replicas(api: KubeApi, name: str) -> int:
    """How many pods a StatefulSet of the lab's namespace asks for (its spec.replicas, default 1)."""
    body = api.request("GET", f"/apis/apps/v1/namespaces/{api.namespace}/statefulsets/{name}")
    return int((body.get("spec") or {}).get("replicas", 1))


def _own_pod(environ) -> dict | None:
    name, uid = environ.get("POD_NAME"), environ.get("POD_UID")
    if not name or not uid:
        return None
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "blockOwnerDeletion": False}


def _ready(pod: dict) -> bool:
    """Running and ready: the service is up (a fault's kill is over once the restarted container's
    readiness probe passes again)."""
    ready = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return pod_running(pod) and bool(ready) and ready[0].get("status") == "True"


def _in_dir(argv: list[str], workdir: str | None) -> list[str]:
    """The exec API has no working directory: a shell changes to it and runs argv as given."""
    if not workdir:
        return list(argv)
    return ["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", workdir, *argv]


def _code(result: ExecResult) -> int:
    if result.code < 0 and result.message:
        log.warning("exec ended without an exit code: %s", result.message)
    return result.code


def _main(platform: KubernetesPlatform, service: str) -> tuple[str, str]:
    """The service's pod and its main container (the first)."""
    pod = platform.running(service)[0]
    spec = platform.kube.pods.pod(service).get("spec") or {}
    return pod.name, spec["containers"][0]["name"]
