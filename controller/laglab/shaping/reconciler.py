"""Makes every lab container's kernel hold what the desired entries say, through a backend, and reads
it back. It keeps what it last applied per container (`applied`), so a change converges only the
containers whose plan changed, and it knows when that is stale: a container restarted (another PID),
one came or went, or something the backend runs died."""

from __future__ import annotations

import logging
import subprocess

from laglab.errors import Kind
from laglab.platforms import LabContainer, Platform, PlatformError
from laglab.shaping.backend import Applied, Backend, Batching, Preparing, Supervised
from laglab.shaping.executor import CommandError, Executor
from laglab.shaping.params import ShapingError
from laglab.shaping.plan import Entry

log = logging.getLogger("laglab.shaping")
# A hung tc/iptables leaves it half-changed too; PlatformError: the platform's API refused (Chaos Mesh).
FAILURES = (CommandError, OSError, subprocess.TimeoutExpired, PlatformError)


class Reconciler:
    def __init__(self, platform: Platform, executor: Executor, backend: Backend):
        self.platform, self.executor, self.backend = platform, executor, backend
        self.applied: dict[str, Applied] = {}
        self._peers: dict[str, str] = {}  # the other nodes' services planned with last (planning)
        if isinstance(backend, Supervised):
            backend.attach(platform)

    @staticmethod
    def shapeable(containers: dict[str, LabContainer]) -> dict[str, str]:
        """service -> address, of the containers shaping may touch now."""
        return {s: c.ip for s, c in containers.items() if c.reachable and c.shapeable}

    def planning(self, containers: dict[str, LabContainer]) -> dict[str, str]:
        """The addresses a plan is made with: the containers shaping touches here, and the lab's services
        this platform does not reach (`peers`: a node's shaper plans with the other nodes' pods too, so
        that what they send here is held; it converges only its own)."""
        peers = getattr(self.platform, "peers", None)
        self._peers = peers() if peers is not None else {}
        return {**self._peers, **self.shapeable(containers)}

    def apply(self, entries: list[Entry], containers: dict[str, LabContainer], force: bool = False) -> None:
        local = self.shapeable(containers)
        plans = {s: p for s, p in self.backend.plan(entries, self.planning(containers)).items() if s in local}
        batching = self.backend if isinstance(self.backend, Batching) else None
        supervised = self.backend if isinstance(self.backend, Supervised) else None
        if batching:
            batching.begin()
        try:
            for service, plan in plans.items():
                self.applied[service] = self.backend.converge(
                    self.executor, service, containers[service].pid, plan, self.applied.get(service), force
                )
            for service in [s for s in self.applied if s not in plans]:
                applied = self.applied.pop(service)
                if supervised:
                    supervised.release(self.executor, service, applied)
        finally:
            if batching:
                batching.commit(self.executor, force)

    def apply_or_roll_back(
        self, entries: list[Entry], before: list[Entry], containers: dict[str, LabContainer]
    ) -> None:
        """Apply `entries`; when the kernel refuses, put `before` back (forced) and raise ShapingError."""
        try:
            self.apply(entries, containers)
        except FAILURES as error:
            try:
                self.apply(before, containers, force=True)
            except FAILURES as again:
                log.error("rolling back failed too: %s", again)
            raise ShapingError(Kind.FAILED, f"applying failed and was rolled back: {error}") from None

    def prepare(
        self, entries: list[Entry], containers: dict[str, LabContainer], services: list[str], warm: bool
    ) -> None:
        if not isinstance(self.backend, Preparing):
            return  # nothing to start: a change takes effect at once
        plans = self.backend.plan(entries, self.planning(containers))
        for service in services:
            if service in plans:
                self.backend.prepare(self.executor, service, plans[service], warm)

    def stale(self, containers: dict[str, LabContainer]) -> bool:
        """Whether the kernels may no longer hold what was applied."""
        ips = self.shapeable(containers)
        moved = any(s in self.applied and self.applied[s].pid != containers[s].pid for s in ips)
        dead = isinstance(self.backend, Supervised) and not self.backend.healthy()
        peers = getattr(self.platform, "peers", None)
        elsewhere = peers is not None and peers() != self._peers  # a pod elsewhere came, went or moved
        return moved or dead or elsewhere or set(ips) != set(self.applied)

    # --- reading back ---
    def kernel(self, service: str, containers: dict[str, LabContainer]) -> dict:
        """Every namespace that carries this service's shaping (the backend says which), read back."""
        own_ip = containers[service].ip if service in containers else None
        return {
            name: self.read_back(name, containers[name].pid)
            for name in self.backend.carriers(service, own_ip, self.applied)
            if name in containers and containers[name].reachable and containers[name].shapeable
        }

    def read_back(self, service: str, pid: int) -> dict:
        return self.backend.read_back(self.executor, service, pid, self.applied.get(service))

    @property
    def workers(self) -> dict:
        """The backend's helper processes per service (the userspace backend's workers), if any."""
        return getattr(self.backend, "workers", {})

    def stop(self) -> None:
        if isinstance(self.backend, Supervised):
            self.backend.stop()
