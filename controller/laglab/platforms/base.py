"""What the lab asks of the platform its services run on: the `Platform` interface, and the values it
answers with. Everything Docker-specific (or, with #23, Kubernetes-specific) is behind it: listing the
lab's services, the process whose network namespace the executor enters, exec and files in a
service's container, its state and the container actions faults do. One implementation per module in
this package (`docker.py`), registered in `__init__.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class PlatformError(RuntimeError):
    """A service the platform cannot reach (not running, not of this lab), or its API refused."""


class Unsupported(PlatformError):
    """What this platform cannot do at all (pause on Kubernetes); the message starts with the field."""


@dataclass(frozen=True)
class LabContainer:
    service: str
    name: str
    id: str
    pid: int
    ip: str | None
    running: bool
    shapeable: bool = True
    # Whether the controller reaches it through its network namespace (`pid`): on Docker. On
    # Kubernetes it holds no host privilege and enters none (pid 0; shaping through Chaos Mesh).
    entered: bool = True

    @property
    def reachable(self) -> bool:
        """Running, on the lab network, and (where the controller enters namespaces) with a process."""
        return self.running and bool(self.ip) and (self.pid > 1 or not self.entered)

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


@dataclass(frozen=True)
class ServiceState:
    """What a fault needs to know of a service's container."""

    running: bool
    paused: bool = False
    status: str = ""  # the platform's word for it, for messages ("exited", "created")

    @property
    def text(self) -> str:
        if self.paused:
            return "paused"
        return "running" if self.running else (self.status or "stopped")


class Execution(Protocol):
    """A command started in a service's container: its output as it comes, and its PID as the host sees it."""

    def chunks(self): ...  # an iterator of bytes

    def pid(self, timeout: float = 5.0) -> int | None: ...


class Platform(Protocol):
    name: str
    project: str
    # A killed container is started again by the platform itself at once (Kubernetes' kubelet): a kill
    # cannot last a duration there (a stop can).
    restarts_killed: bool

    # --- the lab's services ---
    def list(self, max_age: float = 0.0) -> dict[str, LabContainer]:
        """service -> its container (running or not), only this lab's."""

    def running(self, *services: str, hint: str = "") -> list[LabContainer]:
        """The running containers of these services, or PlatformError naming the ones that are not."""

    def watch(self) -> None:
        """Keep list() current from the platform's own change feed (optional: list() works without)."""

    def unwatch(self) -> None: ...

    def image(self, service: str) -> str | None: ...

    def nodes(self) -> dict[str, str]:
        """service -> the machine (node) its container runs on: the results bundle records it."""

    # --- network namespaces (the executor enters them) ---
    def owns(self, pid: int) -> bool:
        """Whether `pid` is still the process of one of this lab's containers (or of its bridge)."""

    def bridge(self) -> Bridge:
        """The lab network's bridge and a process in its namespace (the userspace backend's NFQUEUE)."""

    # --- inside a service's container ---
    def exec(
        self, service: str, argv: list[str], workdir: str | None = None, container: str | None = None
    ) -> tuple[int, bytes]:
        """Run argv to its end; (exit code, stdout and stderr). `container`: another container of the
        service's pod (Kubernetes: tools()); Docker has one per service."""

    def tools(self, service: str) -> str:
        """A container of the service with iperf3 and ss, sharing its network (Kubernetes: an ephemeral
        container); Unsupported where the controller enters the namespaces itself (Docker)."""

    def exec_stream(
        self, service: str, argv: list[str], workdir: str | None = None, container: str | None = None
    ) -> Execution: ...

    def read_file(self, service: str, path: str) -> bytes: ...

    def put_files(self, service: str, directory: str, files: dict[str, bytes]) -> None:
        """Write files (mode 600) into `directory`, creating it."""

    # --- faults ---
    def state(self, service: str) -> ServiceState: ...

    def act(self, service: str, action: str) -> None:
        """One of ACTIONS on the service's container, as the platform does it (faults/container.py)."""


ACTIONS = ("kill", "stop", "start", "restart", "pause", "unpause")
LOADGEN = "loadgen"  # the load's client: apparatus, yet its TCP buffers and links are the load's own


def measurable(container: LabContainer) -> bool:
    """Whether the lab may measure through (or tune) this container's network namespace: the services
    under test and loadgen, never the controller (its own namespace holds the shaping) or a set-up job."""
    return container.shapeable or container.service == LOADGEN


def running_of(found: dict[str, LabContainer], services: tuple[str, ...], hint: str) -> list[LabContainer]:
    missing = [s for s in services if s not in found or not found[s].running]
    if missing:
        raise PlatformError(f"{', '.join(missing)} not running" + (f" ({hint})" if hint else ""))
    return [found[s] for s in services]
