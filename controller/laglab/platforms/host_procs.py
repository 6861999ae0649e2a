"""Who a PID is, as the controller (pid: host) sees the host's processes: whether it is still the
process of a container Docker reported (its cgroup names the container, its start time is the one
seen), the Docker daemon's PID (the peer of its API socket), and whether that namespace holds a
device. A recycled PID must never be a namespace the controller enters."""

from __future__ import annotations

import os
import socket
import struct
import time


class HostProcesses:
    def __init__(self, proc: str = "/proc", socket_path: str | None = None):
        self._proc = proc
        self._socket_path = socket_path  # the Docker API's unix socket (None: from DOCKER_HOST)
        self._daemon: tuple[float, int] | None = None  # (monotonic time, the daemon's PID) from the socket
        self._processes: dict[str, tuple[str, int, bool, int]] = {}  # id -> (state, PID, running, start time)

    def process(self, inspect, container_id: str, state: str) -> tuple[int, bool]:
        """(PID, running) of a container Docker lists as running, paused or restarting: what its last
        inspect said while /proc shows that PID is still its process (its cgroup names the container
        and its start time is the one seen then; a restart keeps the ID and changes the PID), else a
        fresh inspect (`inspect`). Without a readable /proc every call inspects."""
        known = self._processes.get(container_id)
        if (
            known is not None
            and known[0] == state
            and known[1] > 1
            and self.started(known[1], container_id) == known[3]
        ):
            return known[1], known[2]
        inspected = inspect(container_id)  # its State, None when removed between the list and the inspect
        if inspected is None:
            self._processes.pop(container_id, None)
            return 0, False
        pid, running = int(inspected.get("Pid") or 0), bool(inspected.get("Running"))
        started = self.started(pid, container_id) if pid > 1 else None
        if started is not None:
            self._processes[container_id] = (state, pid, running, started)
        else:
            self._processes.pop(container_id, None)
        return pid, running

    def started(self, pid: int, container_id: str) -> int | None:
        """The start time (clock ticks since boot) of `pid` if its cgroup names the container, else None."""
        try:
            with open(f"{self._proc}/{pid}/cgroup") as cgroup:
                if container_id not in cgroup.read():
                    return None
            with open(f"{self._proc}/{pid}/stat") as stat:
                # Field 22; the command name (field 2) may hold spaces and parentheses: split after it.
                return int(stat.read().rsplit(")", 1)[1].split()[19])
        except (OSError, IndexError, ValueError):
            return None

    def forget(self, kept) -> None:
        """Containers gone from the list: their processes are not remembered."""
        self._processes = {k: v for k, v in self._processes.items() if k in kept}

    def in_cgroup(self, pid: int, container_id: str) -> bool:
        try:
            with open(f"{self._proc}/{pid}/cgroup") as f:
                return container_id in f.read()
        except OSError:
            return False

    def daemon_pid(self) -> int:
        """The Docker daemon's PID as the controller sees it (pid: host): the peer of the API's unix socket
        (SO_PEERCRED, which the kernel fills in). A process's name is no proof: any user can start one
        called dockerd in a network namespace of its own (unshare -Urn) with a device of the bridge's name."""
        if self._daemon is not None and time.monotonic() - self._daemon[0] < 1.0:
            return self._daemon[1]  # asked on every entry into the bridge's namespace: once a second at most
        path = self._socket_path
        if path is None:
            host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            if not host.startswith("unix://"):
                raise RuntimeError(f"DOCKER_HOST={host}: the daemon's process is known only through a unix socket")
            path = host.removeprefix("unix://")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(path)
            pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        self._daemon = (time.monotonic(), pid)
        return pid

    def holds_device(self, pid: int, name: str) -> bool:
        """The daemon (its socket's peer), and its namespace has the bridge (/proc/PID/net/dev lists that
        namespace's devices)."""
        try:
            if pid != self.daemon_pid():
                return False
            with open(f"{self._proc}/{pid}/net/dev") as devices:
                return any(line.split(":", 1)[0].strip() == name for line in devices)
        except OSError:
            return False
