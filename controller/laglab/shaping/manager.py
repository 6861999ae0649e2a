"""Changes to shaping: validated, applied under one lock, persisted, and supervised.

All changes go through `ShapingManager`, so concurrent requests are serialised and the kernel ends up
as the last accepted request says. The parts are separate modules: the desired state and its file
(desired.py), the reconciler that makes the kernels hold it (reconciler.py, through a backend), the
API's view of both (present.py). At start the saved state is reloaded and reconciled, so a restart —
even after kill -9 — leaves exactly the desired state. A supervisor thread re-applies shaping to a
container that restarted, to a backend whose helper died, and reverts entries whose duration ran out.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from laglab import limits
from laglab.errors import Kind
from laglab.platforms import LabContainer, Platform, PlatformError
from laglab.shaping import present
from laglab.shaping.backend import Backend, Seeding
from laglab.shaping.desired import BLOCK, DesiredState, Partition
from laglab.shaping.executor import CommandError, Executor
from laglab.shaping.params import ParamError, Request, ShapingError
from laglab.shaping.plan import Entry
from laglab.shaping.ports import ALL, Ports
from laglab.shaping.reconciler import Reconciler
from laglab.shaping.watch import LinkWatchers

if TYPE_CHECKING:  # pydantic is not in the kernel suite's User-mode Linux root: imported where used
    from laglab.shaping.matrix import Matrix

log = logging.getLogger("laglab.shaping")
__all__ = ["BLOCK", "Partition", "ShapingError", "ShapingManager"]


class ShapingManager:
    def __init__(self, platform: Platform, executor: Executor, backend: Backend, state_path: Path, events=None):
        self.platform = platform
        self.executor = executor
        self.backend = backend
        self.reconciler = Reconciler(platform, executor, backend)
        self.state_path = Path(state_path)
        self.desired = DesiredState()
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self.events = events
        # captures: what their link holds, told at each change
        self.links = LinkWatchers(self.lock, lambda: self.desired, self.platform.list)
        # the read side: what the API, /metrics and the timeline's steps read (shaping/present.py)
        self.view = present.ShapingView(lambda: self.desired, self.reconciler, self.lock)

    # --- desired state ---
    def load(self, restart=None) -> None:
        """The saved state (one that cannot be read is set aside, never a crash loop), less what expired
        while the controller was down: that is not applied even for a moment."""
        self.desired = DesiredState.load(self.state_path, restart)
        for text in self.desired.expire(time.time()):
            if restart is not None:
                restart.add("shaping", f"{text} (while the controller was down)")
        if restart is not None:
            for entry in self.desired.entries.values():
                restart.add(
                    "shaping", f"re-applied: {entry.service} -> {entry.peer or 'all'}: {present.settings_text(entry)}"
                )
            for partition in self.desired.partitions.values():
                restart.add("shaping", f"re-applied: partition {partition.id}")

    def _converge(self, lab, mutate) -> float:
        """Change the desired state (`mutate`), make the kernels hold it and save it; when the kernel
        refuses, the state before comes back, in memory and in the kernels. Under the lock. Returns
        when the change was in force (epoch seconds): before the save, which packets do not wait for."""
        before = DesiredState(dict(self.desired.entries), dict(self.desired.partitions), self.desired.matrix)
        mutate(self.desired)
        try:
            self.reconciler.apply_or_roll_back(self.desired.planned_entries(), before.planned_entries(), lab)
        except ShapingError:
            self.desired.entries, self.desired.partitions, self.desired.matrix = (
                before.entries, before.partitions, before.matrix,
            )  # fmt: skip
            raise
        in_force = time.time()
        self.links.tell(lab, in_force)
        self.desired.save(self.state_path)
        return in_force

    def put(self, service: str, request: Request, readback: bool = True) -> dict:
        lab = self.platform.list()  # outside the lock: listing can be slow
        entry = entry_for(self.backend, lab, service, request)
        with self.lock:
            in_force = self._converge(lab, lambda d: d.entries.__setitem__(entry.key, entry))
            if request.duration:
                # `duration` counts from when the shaping is in force, not from the request: a slow apply
                # (a worker starting in a busy User-mode Linux guest) must not eat into it.
                self.desired.entries[entry.key] = dataclasses.replace(entry, expires_at=in_force + request.duration)
                self.desired.save(self.state_path)
            self.note(f"{service} -> {request.peer or 'all'}: {present.settings_text(entry)}")
            return self.view.service(service, lab, readback)

    def delete(self, service: str, peer: str | None = None) -> dict:
        lab = self.platform.list()
        resolve(lab, service, "service")
        with self.lock:
            keys = [k for k in self.desired.entries if k[0] == service and (peer is None or k[1] == peer)]
            if peer is not None and not keys:
                raise ShapingError(Kind.NOT_FOUND, f"peer: no shaping of {service} towards {peer}")
            self._converge(lab, lambda d: [d.entries.pop(key) for key in keys])
            if keys:
                self.note(f"{service} -> {peer or 'all'}: cleared")
            return self.view.service(service, lab)

    def clear(self) -> None:
        lab = self.platform.list()
        with self.lock:
            had = bool(self.desired.entries) or bool(self.desired.partitions)
            had_partitions = bool(self.desired.partitions)

            def empty(d: DesiredState) -> None:
                d.entries, d.partitions, d.matrix = {}, {}, None  # the matrix's entries went with the others

            self._converge(lab, empty)
            if had:
                self.note("all shaping cleared" + (", partitions healed" if had_partitions else ""))

    def change(self, puts: list[tuple[str, Request]], removes: list[tuple[str, str | None]] = ()) -> float:
        """Several entries set and removed at once, in one convergence (a timeline step, a trace row):
        the kernel never holds half of the change. Validated like put(); no read-back. Returns when it
        was in force (epoch seconds)."""
        lab = self.platform.list()
        entries = [entry_for(self.backend, lab, service, request) for service, request in puts]

        def apply(d: DesiredState) -> None:
            for key in removes:
                d.entries.pop(key, None)
            for entry in entries:
                d.entries[entry.key] = entry

        with self.lock:
            return self._converge(lab, apply)

    def snapshot(self, keys: list[tuple[str, str | None]]) -> dict[tuple[str, str | None], Entry | None]:
        """The entries under these keys now (None: none), to put them back later with restore()."""
        with self.lock:
            return {key: self.desired.entries.get(key) for key in keys}

    def restore(self, saved: dict[tuple[str, str | None], Entry | None]) -> None:
        def apply(d: DesiredState) -> None:
            for key, entry in saved.items():
                if entry is None:
                    d.entries.pop(key, None)
                else:
                    d.entries[key] = entry

        with self.lock:
            self._converge(self.platform.list(), apply)

    def prepare(self, services: list[str], warm: bool = True) -> None:
        """Ask the backend to make changes to what these services receive fast (a timeline's links,
        before its window opens), or to stop (`warm` False)."""
        lab = self.platform.list()
        with self.lock:
            self.reconciler.prepare(self.desired.planned_entries(), lab, services, warm)

    # --- the delay matrix ---
    def set_matrix(self, matrix: Matrix | None) -> None:
        """Replace the matrix in force (None: remove it): its links' entries go, the new ones come, in
        one convergence. Other shaping is left alone, except on the links the new matrix sets."""
        try:
            puts = matrix.requests() if matrix is not None else []
        except ParamError as error:
            raise ShapingError(Kind.INVALID, f"links: {error.message}") from None
        with self.lock:
            old = self.desired.matrix
            removes = [(service, request.peer) for service, request in old.requests()] if old else []
            self.change(puts, removes=removes)
            self.desired.matrix = matrix
            self.desired.save(self.state_path)
            self.note("delay matrix " + ("set: " + ", ".join(matrix.groups) if matrix else "removed"))

    # --- partitions ---
    def partition(
        self, a: list[str], b: list[str], oneway: bool = False, duration: float | None = None, ports: Ports = ALL
    ) -> Partition:
        """Cut every link between the groups (only their packets to or from `ports`, when given)."""
        lab = self.platform.list()
        if ports:  # the backend's word on a ported block (Chaos Mesh has no ports; the kernel's ≤ 32)
            refused = self.backend.unsupported(
                Entry(a[0] if a else "", b[0] if b else None, "egress", BLOCK, ports=ports)
            )
            if refused:
                raise ShapingError(Kind.INVALID, f"{refused[0]}: {refused[1]}")
        for field, group in (("a", a), ("b", b)):
            if not group:
                raise ShapingError(Kind.INVALID, f"{field}: name at least one service")
            repeated = sorted({s for s in group if group.count(s) > 1})
            if repeated:
                raise ShapingError(Kind.INVALID, f"{field}: {', '.join(repeated)} named more than once")
            for service in group:
                resolve(lab, service, field)
        overlap = sorted(set(a) & set(b))
        if overlap:
            raise ShapingError(Kind.INVALID, f"b: {', '.join(overlap)} on both sides")
        with self.lock:
            if len(self.desired.partitions) >= limits.PARTITIONS:
                raise ShapingError(
                    Kind.CONFLICT,
                    f"partition: {len(self.desired.partitions)} partitions are in force, at most {limits.PARTITIONS} "
                    "(limit partitions): heal one first",
                )
            partition = Partition(
                self.desired.next_partition_id(), tuple(a), tuple(b), oneway,
                time.time() + duration if duration is not None else None,  # 0: healed at the next check
                ports,
            )  # fmt: skip
            self._converge(lab, lambda d: d.partitions.__setitem__(partition.id, partition))
            arrow = "->" if oneway else "<->"
            self.note(f"partition {partition.id}: {','.join(a)} {arrow} {','.join(b)}"
                      + (f" on ports {ports.text()}" if ports else ""))  # fmt: skip
            return partition

    def heal(self, partition_id: str | None = None) -> list[str]:
        """Heal one partition, or every one (None). Returns the ids healed."""
        with self.lock:
            if partition_id is not None and partition_id not in self.desired.partitions:
                raise ShapingError(Kind.NOT_FOUND, f"partition: no partition {partition_id[:32]!r}")
            ids = [partition_id] if partition_id is not None else list(self.desired.partitions)
            if not ids:
                return []
            self._converge(self.platform.list(), lambda d: [d.partitions.pop(pid) for pid in ids])
            self.note(f"healed {', '.join(ids)}")
            return ids

    def seed(self, seed: int | None) -> str | None:
        """A seeded run (None: unseeded again): each link's random decisions from its own generator, the
        links held now converged again with it. Returns what could not be seeded, in words."""
        if not isinstance(self.backend, Seeding):
            # Chaos Mesh's NetworkChaos has no seed (no such property in its CRD, chaos-mesh.org_networkchaos.yaml),
            # nor has the node agents' tc a way to learn one.
            return None if seed is None else f"not seeded: the {self.backend.name} backend has no seeded randomness"
        with self.lock:
            note = self.backend.seed(seed, self.executor)
            self.reconciler.apply(self.desired.planned_entries(), self.platform.list())
        if seed is not None:
            self.note(f"seeded: {seed}" + (f" ({note})" if note else ""))
        return note

    def note(self, text: str) -> None:
        """An event of the lab's log (the dashboard's markers)."""
        if self.events is not None:
            self.events.add("shaping", text)

    # --- converging the kernel ---
    def apply(self, lab: dict[str, LabContainer] | None = None, force: bool = False) -> None:
        lab = self.platform.list() if lab is None else lab
        with self.lock:
            self.reconciler.apply(self.desired.planned_entries(), lab, force)

    # --- supervision ---
    def start(self, interval: float = 0.5, restart=None) -> None:
        self.load(restart)
        try:
            self.apply(force=True)
        except (CommandError, OSError, PlatformError) as error:
            self.last_error = str(error)
            log.error("reconciling saved shaping failed: %s", error)
        self._thread = threading.Thread(
            target=self._supervise, args=(interval,), name="shaping-supervisor", daemon=True
        )
        self._thread.start()

    def stop(self, clear_kernel: bool) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        with self.lock:
            if clear_kernel:
                try:  # the desired state stays on disk: a restart re-applies it
                    self.reconciler.apply([], self.platform.list())
                except Exception as error:
                    log.error("clearing shaping at exit failed: %s", error)
            self.reconciler.stop()

    def _supervise(self, interval: float) -> None:
        """The supervisor thread: re-applies shaping to a container that restarted or a backend whose
        helper died, and reverts entries whose duration ran out."""
        while not self._stop.wait(interval):
            try:
                lab = self.platform.list()
                with self.lock:
                    expired = self.desired.expire(time.time())
                    for text in expired:
                        self.note(text)
                    if expired:
                        self.desired.save(self.state_path)
                    if expired or self.reconciler.stale(lab):
                        self.reconciler.apply(self.desired.planned_entries(), lab)
                    if expired:
                        self.links.tell(lab, time.time())
                self.last_error = None
            except Exception as error:  # the supervisor must outlive a failing platform API or namespace
                self.last_error = f"{type(error).__name__}: {error}"
                log.warning("shaping supervisor: %s", self.last_error)


def resolve(lab: dict[str, LabContainer], service: str, field: str) -> None:
    """A service the lab may shape now, or ShapingError naming the field."""
    if service in lab and not lab[service].shapeable:
        raise ShapingError(
            Kind.CONFLICT,
            f"{field}: {service} is not shaped (it is the lab's measuring apparatus or a one-shot job)",
        )
    if service not in lab:
        raise ShapingError(
            Kind.NOT_FOUND, f"{field}: no service {service!r} in this lab (known: {', '.join(sorted(lab))})"
        )
    if not lab[service].running:
        raise ShapingError(Kind.CONFLICT, f"{field}: service {service!r} is not running")


def entry_for(backend: Backend, lab: dict[str, LabContainer], service: str, request: Request) -> Entry:
    """A request as an entry, or ShapingError naming the field the lab or the backend refuses."""
    resolve(lab, service, "service")
    if request.peer is not None:
        resolve(lab, request.peer, "peer")
        if request.peer == service:
            raise ShapingError(Kind.INVALID, "peer: a service is not its own peer")
    expires = time.time() + request.duration if request.duration else None
    entry = Entry(service, request.peer, request.direction, request.shaping, expires, request.ports)
    refused = backend.unsupported(entry)
    if refused:
        raise ShapingError(Kind.INVALID, f"{refused[0]}: {refused[1]}")
    return entry
