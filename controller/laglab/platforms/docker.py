"""The Docker platform: the lab's containers as the Docker API shows them, only those labelled with
this compose project.

A service name resolves to its running container, the PID that holds its network namespace and its
address on the lab network. Anything without the project's label does not exist for the controller.
"""

from __future__ import annotations

import io
import logging
import tarfile
import threading
import time

from laglab.platforms.base import Bridge, LabContainer, ServiceState, Unsupported, running_of
from laglab.platforms.host_procs import HostProcesses

log = logging.getLogger("laglab.containers")
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
SHAPED_LABEL = "laglab.shaped"  # "never": the measuring apparatus and set-up jobs (compose.yaml)


class DockerPlatform:
    name = "docker"
    restarts_killed = False  # a killed container stays down until started

    def __init__(self, project: str, client=None, proc: str = "/proc", socket_path: str | None = None):
        self.project = project
        self._client = client
        self.procs = HostProcesses(proc, socket_path)  # who a PID is: a container's process, the daemon
        self._ids_by_pid: dict[int, str] = {}
        self._bridge: Bridge | None = None
        self._bridge_checked = 0.0  # when the kept bridge was last seen held by its dockerd (monotonic)
        self._node: str | None = None  # the engine's host name (nodes())
        self._cache: tuple[float, dict] | None = None  # (monotonic time, the last list)
        # Kept current from Docker's event stream (watch()): while it runs, a list stays good until an
        # event of this project's containers says something changed.
        self.events = ContainerEvents(self)  # watch(): the list kept current from Docker's events
        self._listed_at: int | None = None  # the events' generation the last list was read at

    @classmethod
    def create(cls, project: str, environ) -> DockerPlatform:
        """The Docker engine of DOCKER_HOST (docker.from_env, when first used)."""
        return cls(project)

    @property
    def client(self):
        if self._client is None:
            import docker  # here, not at import: the kernel suite (User-mode Linux) resolves without it

            self._client = docker.from_env(timeout=10)
        return self._client

    def list(self, max_age: float = 0.0) -> dict[str, LabContainer]:
        """service -> container, for every container of this project (one per service). `max_age`: a
        list read that recently will do (the shaping supervisor keeps it fresh).

        One `/containers/json` call gives every container's labels, state and address; only the PID
        needs an inspect, and that only for a container not seen running yet or whose PID /proc no
        longer shows as its process (docker-py's full list inspected every container, exited set-up
        jobs included, every time: the costliest thing the controller did at a 10 ms heartbeat)."""
        cached = self._cache
        if cached is not None and self.events.watching and self._listed_at == self.events.generation:
            return dict(cached[1])  # no event since: what Docker would answer
        if max_age and cached is not None and time.monotonic() - cached[0] <= max_age:
            return dict(cached[1])
        generation = self.events.generation  # an event while listing makes this list stale at once
        found: dict[str, LabContainer] = {}
        seen: set[str] = set()
        for summary in self.client.api.containers(all=True, filters={"label": f"{PROJECT_LABEL}={self.project}"}):
            labels = summary.get("Labels") or {}
            if labels.get(PROJECT_LABEL) != self.project or SERVICE_LABEL not in labels:
                continue
            networks = (summary.get("NetworkSettings") or {}).get("Networks") or {}
            ip = next(
                (n["IPAddress"] for name, n in networks.items() if name.endswith("_lab") and n.get("IPAddress")), None
            )
            container_id, state = summary["Id"], summary.get("State", "")
            seen.add(container_id)
            # Docker's State.Running is true while paused or restarting too (as the inspect said before).
            pid, running = (
                self.procs.process(lambda cid: _state_of(self.client, cid), container_id, state)
                if state in ("running", "paused", "restarting")
                else (0, False)
            )
            service = labels[SERVICE_LABEL]
            name = (summary.get("Names") or [f"/{container_id[:12]}"])[0].lstrip("/")
            entry = LabContainer(
                service, name, container_id, pid, ip, running, shapeable=labels.get(SHAPED_LABEL) != "never",
            )  # fmt: skip
            if service not in found or entry.running:
                found[service] = entry
        self.procs.forget(seen)
        self._ids_by_pid = {c.pid: c.id for c in found.values() if c.running and c.pid > 1}
        self._cache = (time.monotonic(), dict(found))
        self._listed_at = generation
        return found

    def watch(self) -> None:
        self.events.start()

    def unwatch(self) -> None:
        self.events.stop()

    def running(self, *services: str, hint: str = "") -> list[LabContainer]:
        """The running containers of these services, or an error naming the ones that are not running."""
        return running_of(self.list(), services, hint)

    def container(self, service: str, hint: str = ""):
        """The Docker SDK's container object of a running service."""
        return self.client.containers.get(self.running(service, hint=hint)[0].id)

    def nodes(self) -> dict[str, str]:
        """On Docker every service runs on the engine's host: its name, asked once."""
        if self._node is None:
            self._node = str(self.client.info().get("Name") or "docker")
        return {service: self._node for service in self.list()}

    def image(self, service: str) -> str | None:
        try:
            return self._any_container(service).attrs["Config"]["Image"]
        except Exception:  # gone, or not of this lab: no image to report
            return None

    # --- inside a service's container ---
    def exec(
        self, service: str, argv: list[str], workdir: str | None = None, container: str | None = None
    ) -> tuple[int, bytes]:
        if container is not None:
            raise Unsupported(f"container: a Docker service is one container ({service}), not {container!r}")
        code, out = self.container(service).exec_run(argv, workdir=workdir)
        return code, out or b""

    def tools(self, service: str) -> str:
        raise Unsupported("throughput: on Docker iperf3 runs in the containers' namespaces, entered by the controller")

    def exec_stream(
        self, service: str, argv: list[str], workdir: str | None = None, container: str | None = None
    ) -> DockerExecution:
        if container is not None:
            raise Unsupported(f"container: a Docker service is one container ({service}), not {container!r}")
        api = self.client.api
        exec_id = api.exec_create(self.running(service)[0].id, argv, workdir=workdir)["Id"]
        return DockerExecution(api, exec_id, api.exec_start(exec_id, stream=True))

    def read_file(self, service: str, path: str) -> bytes:
        stream, _ = self.container(service).get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as bundle:
            return bundle.extractfile(bundle.getmembers()[0]).read()

    def put_files(self, service: str, directory: str, files: dict[str, bytes]) -> None:
        """docker cp, from memory."""
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as bundle:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o600
                bundle.addfile(info, io.BytesIO(data))
        container = self.container(service)
        container.exec_run(["mkdir", "-p", directory])
        container.put_archive(directory, out.getvalue())

    # --- faults: `docker kill -s KILL | stop | start | restart | pause | unpause` ---
    ACTIONS = {
        "kill": lambda c: c.kill(signal="SIGKILL"),
        "stop": lambda c: c.stop(timeout=30),
        "start": lambda c: c.start(),
        "restart": lambda c: c.restart(timeout=30),
        "pause": lambda c: c.pause(),
        "unpause": lambda c: c.unpause(),
    }

    def _any_container(self, service: str):
        found = self.list().get(service)
        if found is None:
            raise KeyError(service)
        return self.client.containers.get(found.id)

    def state(self, service: str) -> ServiceState:
        state = self._any_container(service).attrs["State"]  # containers.get inspects it: fresh already
        return ServiceState(bool(state.get("Running")), bool(state.get("Paused")), str(state.get("Status") or ""))

    def act(self, service: str, action: str) -> None:
        self.ACTIONS[action](self._any_container(service))

    def bridge(self) -> Bridge:
        """The bridge of this project's `lab` network (compose labels it) and the dockerd process whose
        network namespace holds it. Found once and kept while that process still holds a device of
        that name (a recreated network has another name): every change of shaping asks for it, and
        finding it takes the Docker API and a walk through /proc (tens of ms on a busy machine)."""
        cached = self._bridge
        if cached is not None and time.monotonic() - self._bridge_checked < 1.0:
            return cached  # checked within the second (entering its namespace checks again: owns)
        if cached is not None and self.procs.holds_device(cached.pid, cached.name):
            self._bridge_checked = time.monotonic()
            return cached
        networks = self.client.networks.list(filters={"label": f"{PROJECT_LABEL}={self.project}"})
        labelled = [n for n in networks if (n.attrs.get("Labels") or {}).get("com.docker.compose.network") == "lab"]
        if not labelled:
            raise RuntimeError(f"no 'lab' network of compose project {self.project!r}")
        network = labelled[0]
        name = (network.attrs.get("Options") or {}).get("com.docker.network.bridge.name") or f"br-{network.id[:12]}"
        pid = self.procs.daemon_pid()
        if not self.procs.holds_device(pid, name):
            raise RuntimeError(
                f"the Docker daemon (PID {pid}, the peer of its API socket) has no {name} in its network namespace "
                "(is the controller's pid: host?)"
            )
        self._bridge, self._bridge_checked = Bridge(name, pid), time.monotonic()
        return self._bridge

    def owns(self, pid: int) -> bool:
        """Whether `pid` is still the process of this project's container that Docker reported for
        it: its cgroup names that container. A PID recycled for a host process (or another
        container's) must never be the namespace the controller enters. The one exception is the
        bridge's namespace (dockerd's), checked the same way: still dockerd, still holding the bridge."""
        if self._bridge is not None and pid == self._bridge.pid:
            return self.procs.holds_device(pid, self._bridge.name)
        container_id = self._ids_by_pid.get(pid)
        if container_id is None:
            self.list()
            container_id = self._ids_by_pid.get(pid)
        return container_id is not None and self.procs.in_cgroup(pid, container_id)


def _state_of(client, container_id: str) -> dict | None:
    """A container's State as Docker inspects it; None once it is removed."""
    from docker.errors import NotFound  # here, not at import: the kernel suite's guest has no Docker SDK

    try:
        return client.api.inspect_container(container_id)["State"]
    except NotFound:
        return None


class ContainerEvents:
    """Docker's event stream for this project's containers, followed in a thread: `generation` counts
    the events, so that a list stays good until one says something changed."""

    def __init__(self, platform: DockerPlatform):
        self.platform = platform
        self.generation = 0  # events seen
        self.watching = False
        self._stop = threading.Event()
        self._stream = None

    # Events that change what list() answers: a container's existence, state, PID or address.
    NAMES = ("create", "start", "restart", "die", "kill", "stop", "pause", "unpause", "destroy", "rename", "oom")

    def start(self) -> None:
        """Follow Docker's event stream in a thread (a live change then lists nothing: the list is in
        memory). Healthchecks' exec events are filtered out by the daemon. A broken stream falls back
        to listing on every call until it is followed again."""
        self._stop.clear()
        threading.Thread(target=self._follow, name="container-events", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.watching = False
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # closing a broken stream: nothing left to do
                log.debug("closing the event stream failed", exc_info=True)

    def _follow(self) -> None:
        filters = {"type": "container", "label": f"{PROJECT_LABEL}={self.platform.project}", "event": list(self.NAMES)}
        while not self._stop.is_set():
            try:
                self._stream = self.platform.client.events(decode=True, filters=filters)
                self.generation += 1  # whatever happened before the stream: list again once
                self.watching = True
                for _event in self._stream:
                    self.generation += 1
            except Exception as error:  # the daemon restarted, the socket closed
                log.warning("container events: %s; listing on every call until they come back", error)
            self.watching = False
            self._stop.wait(1.0)


class DockerExecution:
    """An exec started with its output streamed (sysbench's report lines as they come)."""

    def __init__(self, api, exec_id: str, stream):
        self.api, self.exec_id, self.stream = api, exec_id, stream

    def chunks(self):
        return iter(self.stream)

    def pid(self, timeout: float = 5.0) -> int | None:
        """The exec's PID as the host sees it (None once it is over, or when Docker does not say)."""
        from laglab.deadline import TimedOut, poll

        def answered(info: dict) -> bool:  # a PID, or none because it is already over
            return bool(info.get("Pid")) or not info.get("Running", True)

        try:
            info = poll(lambda: self.api.exec_inspect(self.exec_id), timeout, 0.05, "the exec's PID", done=answered)
        except TimedOut:
            return None
        return int(info["Pid"]) if info.get("Pid") else None
