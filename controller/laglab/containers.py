"""The lab's containers, as the Docker API shows them: only those labelled with this compose project.

A service name resolves to its running container, the PID that holds its network namespace and its
address on the lab network. Anything without the project's label does not exist for the controller.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
from dataclasses import dataclass

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
SHAPED_LABEL = "laglab.shaped"  # "never": the measuring apparatus and set-up jobs (compose.yaml)


@dataclass(frozen=True)
class LabContainer:
    service: str
    name: str
    id: str
    pid: int
    ip: str | None
    running: bool
    shapeable: bool = True

    def as_json(self) -> dict:
        return {
            "service": self.service,
            "container": self.name,
            "id": self.id[:12],
            "pid": self.pid,
            "ip": self.ip,
            "running": self.running,
            "shapeable": self.shapeable,
        }


@dataclass(frozen=True)
class Bridge:
    """The lab network's bridge device and a process in the namespace that holds it (dockerd's): where
    br_netfilter shows every packet between two lab containers to iptables."""

    name: str
    pid: int


class Containers:
    def __init__(self, project: str, client=None, proc: str = "/proc"):
        self.project = project
        self._client = client
        self._proc = proc
        self._ids_by_pid: dict[int, str] = {}
        self._bridge: Bridge | None = None
        self._cache: tuple[float, dict] | None = None  # (monotonic time, the last list)

    @property
    def client(self):
        if self._client is None:
            import docker  # here, not at import: the kernel suite (User-mode Linux) resolves without it

            self._client = docker.from_env(timeout=10)
        return self._client

    def list(self, max_age: float = 0.0) -> dict[str, LabContainer]:
        """service -> container, for every container of this project (one per service). `max_age`: a
        list read that recently will do (the Docker API's inspect of every container is the costliest
        thing the controller does once a second; the shaping supervisor keeps it fresh)."""
        cached = self._cache
        if max_age and cached is not None and time.monotonic() - cached[0] <= max_age:
            return dict(cached[1])
        found: dict[str, LabContainer] = {}
        for container in self.client.containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={self.project}"}):
            labels = container.attrs["Config"]["Labels"] or {}
            if labels.get(PROJECT_LABEL) != self.project or SERVICE_LABEL not in labels:
                continue
            state = container.attrs["State"]
            networks = container.attrs["NetworkSettings"]["Networks"] or {}
            ip = next(
                (n["IPAddress"] for name, n in networks.items() if name.endswith("_lab") and n.get("IPAddress")), None
            )
            service = labels[SERVICE_LABEL]
            entry = LabContainer(
                service, container.name, container.id, int(state.get("Pid") or 0), ip, bool(state.get("Running")),
                shapeable=labels.get(SHAPED_LABEL) != "never",
            )  # fmt: skip
            if service not in found or entry.running:
                found[service] = entry
        self._ids_by_pid = {c.pid: c.id for c in found.values() if c.running and c.pid > 1}
        self._cache = (time.monotonic(), dict(found))
        return found

    def running(self, *services: str, hint: str = "") -> list[LabContainer]:
        """The running containers of these services, or an error naming the ones that are not running."""
        lab = self.list()
        missing = [s for s in services if s not in lab or not lab[s].running]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not running" + (f" ({hint})" if hint else ""))
        return [lab[s] for s in services]

    def container(self, service: str, hint: str = ""):
        """The Docker SDK's container object of a running service (exec, put_archive)."""
        return self.client.containers.get(self.running(service, hint=hint)[0].id)

    def image(self, container: LabContainer) -> str | None:
        try:
            return self.client.containers.get(container.id).attrs["Config"]["Image"]
        except Exception:
            return None

    def bridge(self) -> Bridge:
        """The bridge of this project's `lab` network (compose labels it) and the dockerd process whose
        network namespace holds it. Found once and kept while that process still holds a device of
        that name (a recreated network has another name): every change of shaping asks for it, and
        finding it takes the Docker API and a walk through /proc (tens of ms on a busy machine)."""
        cached = self._bridge
        if cached is not None and self._is_bridge_holder(cached.pid, cached.name):
            return cached
        networks = self.client.networks.list(filters={"label": f"{PROJECT_LABEL}={self.project}"})
        labelled = [n for n in networks if (n.attrs.get("Labels") or {}).get("com.docker.compose.network") == "lab"]
        if not labelled:
            raise RuntimeError(f"no 'lab' network of compose project {self.project!r}")
        network = labelled[0]
        name = (network.attrs.get("Options") or {}).get("com.docker.network.bridge.name") or f"br-{network.id[:12]}"
        for entry in sorted(os.listdir(self._proc), key=lambda e: (len(e), e)):
            if entry.isdigit() and self._is_bridge_holder(int(entry), name):
                self._bridge = Bridge(name, int(entry))
                return self._bridge
        raise RuntimeError(f"no dockerd process whose network namespace holds {name} (is the controller's pid: host?)")

    def _is_bridge_holder(self, pid: int, name: str) -> bool:
        """dockerd, and its namespace has the bridge (/proc/PID/net/dev lists that namespace's devices)."""
        try:
            with open(f"{self._proc}/{pid}/comm") as comm, open(f"{self._proc}/{pid}/net/dev") as devices:
                return comm.read().strip() == "dockerd" and any(
                    line.split(":", 1)[0].strip() == name for line in devices
                )
        except OSError:
            return False

    def owns(self, pid: int) -> bool:
        """Whether `pid` is still the process of this project's container that Docker reported for
        it: its cgroup names that container. A PID recycled for a host process (or another
        container's) must never be the namespace the controller enters. The one exception is the
        bridge's namespace (dockerd's), checked the same way: still dockerd, still holding the bridge."""
        if self._bridge is not None and pid == self._bridge.pid:
            return self._is_bridge_holder(pid, self._bridge.name)
        container_id = self._ids_by_pid.get(pid)
        if container_id is None:
            self.list()
            container_id = self._ids_by_pid.get(pid)
        if container_id is None:
            return False
        try:
            with open(f"{self._proc}/{pid}/cgroup") as f:
                return container_id in f.read()
        except OSError:
            return False


def put_files(container, directory: str, files: dict[str, bytes]) -> None:
    """Write files (mode 600) into `directory` of a container, creating it: docker cp, from memory."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as bundle:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            bundle.addfile(info, io.BytesIO(data))
    container.exec_run(["mkdir", "-p", directory])
    container.put_archive(directory, out.getvalue())
