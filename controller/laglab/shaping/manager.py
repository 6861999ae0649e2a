"""Desired shaping, persisted, and the loop that makes every lab container's kernel match it.

All changes go through `ShapingManager` under one lock, so concurrent requests are serialised and the
kernel ends up as the last accepted request says. Desired state is saved to a JSON file; at start
the manager reloads it and reconciles, so a restart — even after kill -9 — leaves exactly the desired
state. A supervisor thread re-applies shaping to a container that restarted, to a backend whose helper
died, and reverts entries whose duration ran out. How a plan reaches a kernel is the backend's
(backend.py: the protocol; kernel.py, userspace.py): the manager keeps desired state, persistence and
supervision only.
"""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Kind, LabError
from ..executor import CommandError, Executor
from ..platforms import LabContainer, Platform
from .backend import Applied, Backend, Batching, Preparing, Supervised
from .impairment import Impairment
from .params import ParamError, Request

if TYPE_CHECKING:  # pydantic is not in the kernel suite's User-mode Linux root: imported where used
    from .matrix import Matrix
from .plan import Entry

log = logging.getLogger("laglab.shaping")


class ShapingError(LabError):
    """Shaping the lab refuses (an unknown service, one that is not shapeable, a rule) or that the kernel
    refused (Kind.FAILED)."""


@dataclass(frozen=True)
class Partition:
    """Every packet from a service of `a` to one of `b` is lost (and back, unless `oneway`). It adds a
    100 % loss to those links on top of their shaping, which is left as it is and back once healed."""

    id: str
    a: tuple[str, ...]
    b: tuple[str, ...]
    oneway: bool = False
    expires_at: float | None = None

    def pairs(self) -> list[tuple[str, str]]:
        """(sender, receiver) of every blocked direction."""
        forward = [(x, y) for x in self.a for y in self.b]
        return forward if self.oneway else forward + [(y, x) for x, y in forward]

    def as_json(self) -> dict:
        out = {"id": self.id, "a": list(self.a), "b": list(self.b), "oneway": self.oneway}
        out["expires_in"] = None if not self.expires_at else f"{max(0.0, self.expires_at - time.time()):.1f}s"
        return out


BLOCK = Impairment(loss=1.0)


class ShapingManager:
    def __init__(self, platform: Platform, executor: Executor, backend: Backend, state_path: Path, events=None):
        self.platform = platform
        self.executor = executor
        self.backend = backend
        if isinstance(backend, Supervised):
            backend.attach(platform)
        self.state_path = Path(state_path)
        self.entries: dict[tuple[str, str | None], Entry] = {}
        self.partitions: dict[str, Partition] = {}
        self.matrix: Matrix | None = None  # the delay matrix in force (its entries are in `entries`)
        self._partition_ids = itertools.count(1)
        self.applied: dict[str, Applied] = {}
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self.events = events

    # --- desired state ---
    def load(self) -> None:
        if self.state_path.exists():
            raw = json.loads(self.state_path.read_text())
            for item in raw.get("entries", []):
                entry = Entry.from_wire(item)
                self.entries[entry.key] = entry
            for item in raw.get("partitions", []):
                partition = Partition(
                    item["id"], tuple(item["a"]), tuple(item["b"]), item["oneway"], item.get("expires_at")
                )
                self.partitions[partition.id] = partition
            if raw.get("matrix"):
                from .matrix import Matrix

                self.matrix = Matrix.model_validate(raw["matrix"])
            numbers = [int(p.removeprefix("p")) for p in self.partitions if p.removeprefix("p").isdigit()]
            self._partition_ids = itertools.count(max(numbers, default=0) + 1)

    def save(self) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "entries": [e.to_wire() for e in self.entries.values()],
            "partitions": [
                {"id": p.id, "a": list(p.a), "b": list(p.b), "oneway": p.oneway, "expires_at": p.expires_at}
                for p in self.partitions.values()
            ],
            "matrix": None if self.matrix is None else self.matrix.model_dump(mode="json", exclude_none=True),
        }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.state_path)

    def shapeable(self, lab: dict[str, LabContainer]) -> dict[str, str]:
        return {s: c.ip for s, c in lab.items() if c.running and c.ip and c.pid > 1 and c.shapeable}

    def _resolve(self, lab: dict[str, LabContainer], service: str, field: str) -> None:
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

    def put(self, service: str, request: Request, readback: bool = True) -> dict:
        lab = self.platform.list()  # outside the lock: the Docker API can be slow
        self._resolve(lab, service, "service")
        if request.peer is not None:
            self._resolve(lab, request.peer, "peer")
            if request.peer == service:
                raise ShapingError(Kind.INVALID, "peer: a service is not its own peer")
        expires = time.time() + request.duration if request.duration else None
        entry = Entry(service, request.peer, request.direction, request.shaping, expires)
        refused = self.backend.unsupported(entry)
        if refused:
            raise ShapingError(Kind.INVALID, f"{refused[0]}: {refused[1]}")
        with self.lock:
            before = dict(self.entries)
            self.entries[entry.key] = entry
            self._apply_or_roll_back(lab, before)
            self._event(f"{service} -> {request.peer or 'all'}: {_settings_text(entry)}")
            return self.describe(service, lab, readback)

    def delete(self, service: str, peer: str | None = None) -> dict:
        lab = self.platform.list()
        self._resolve(lab, service, "service")
        with self.lock:
            before = dict(self.entries)
            keys = [k for k in self.entries if k[0] == service and (peer is None or k[1] == peer)]
            if peer is not None and not keys:
                raise ShapingError(Kind.NOT_FOUND, f"peer: no shaping of {service} towards {peer}")
            for key in keys:
                del self.entries[key]
            self._apply_or_roll_back(lab, before)
            if keys:
                self._event(f"{service} -> {peer or 'all'}: cleared")
            return self.describe(service, lab)

    def clear(self) -> None:
        lab = self.platform.list()
        with self.lock:
            before = dict(self.entries)
            had_partitions = dict(self.partitions)
            self.entries.clear()
            self.partitions.clear()
            self.matrix = None  # its entries went with the others
            self._apply_or_roll_back(lab, before, had_partitions)
            if before or had_partitions:
                self._event("all shaping cleared" + (", partitions healed" if had_partitions else ""))

    def change(self, puts: list[tuple[str, Request]], removes: list[tuple[str, str | None]] = ()) -> None:
        """Several entries set and removed at once, in one convergence (a timeline step, a trace row):
        the kernel never holds half of the change. Validated like put(); no read-back."""
        lab = self.platform.list()
        entries = []
        for service, request in puts:
            self._resolve(lab, service, "service")
            if request.peer is not None:
                self._resolve(lab, request.peer, "peer")
            expires = time.time() + request.duration if request.duration else None
            entry = Entry(service, request.peer, request.direction, request.shaping, expires)
            refused = self.backend.unsupported(entry)
            if refused:
                raise ShapingError(Kind.INVALID, f"{refused[0]}: {refused[1]}")
            entries.append(entry)
        with self.lock:
            before = dict(self.entries)
            for key in removes:
                self.entries.pop(key, None)
            for entry in entries:
                self.entries[entry.key] = entry
            self._apply_or_roll_back(lab, before)

    def snapshot(self, keys: list[tuple[str, str | None]]) -> dict[tuple[str, str | None], Entry | None]:
        """The entries under these keys now (None: none), to put them back later with restore()."""
        with self.lock:
            return {key: self.entries.get(key) for key in keys}

    def restore(self, saved: dict[tuple[str, str | None], Entry | None]) -> None:
        with self.lock:
            before = dict(self.entries)
            for key, entry in saved.items():
                if entry is None:
                    self.entries.pop(key, None)
                else:
                    self.entries[key] = entry
            self._apply_or_roll_back(self.platform.list(), before)

    def prepare(self, services: list[str], warm: bool = True) -> None:
        """Ask the backend to make changes to what these services receive fast (a timeline's links,
        before its window opens), or to stop (`warm` False)."""
        if not isinstance(self.backend, Preparing):
            return  # nothing to start: a change takes effect at once
        lab = self.platform.list()
        with self.lock:
            ips = self.shapeable(lab)
            plans = self.backend.plan(self.planned_entries(), ips)
            for service in services:
                if service in plans:
                    self.backend.prepare(self.executor, service, plans[service], warm)

    # --- the delay matrix ---
    def set_matrix(self, matrix: Matrix | None) -> None:
        """Replace the matrix in force (None: remove it): its links' entries go, the new ones come, in
        one convergence. Other shaping is left alone, except on the links the new matrix sets."""
        try:
            puts = matrix.requests() if matrix is not None else []
        except ParamError as error:
            raise ShapingError(Kind.INVALID, f"links: {error.message}") from None
        old = [(service, request.peer) for service, request in self.matrix.requests()] if self.matrix else []
        with self.lock:
            self.change(puts, removes=old)
            self.matrix = matrix
            self.save()
            self._event("delay matrix " + ("set: " + ", ".join(matrix.groups) if matrix else "removed"))

    # --- partitions ---
    def partition(self, a: list[str], b: list[str], oneway: bool = False, duration: float | None = None) -> Partition:
        lab = self.platform.list()
        for field, group in (("a", a), ("b", b)):
            if not group:
                raise ShapingError(Kind.INVALID, f"{field}: name at least one service")
            for service in group:
                self._resolve(lab, service, field)
        overlap = sorted(set(a) & set(b))
        if overlap:
            raise ShapingError(Kind.INVALID, f"b: {', '.join(overlap)} on both sides")
        with self.lock:
            partition = Partition(
                f"p{next(self._partition_ids)}", tuple(a), tuple(b), oneway,
                time.time() + duration if duration is not None else None,  # 0: healed at the next check
            )  # fmt: skip
            before_partitions = dict(self.partitions)
            self.partitions[partition.id] = partition
            self._apply_or_roll_back(lab, dict(self.entries), before_partitions)
            arrow = "->" if oneway else "<->"
            self._event(f"partition {partition.id}: {','.join(a)} {arrow} {','.join(b)}")
            return partition

    def heal(self, partition_id: str | None = None) -> list[str]:
        """Heal one partition, or every one (None). Returns the ids healed."""
        with self.lock:
            if partition_id is not None and partition_id not in self.partitions:
                raise ShapingError(Kind.NOT_FOUND, f"partition: no partition {partition_id[:32]!r}")
            ids = [partition_id] if partition_id is not None else list(self.partitions)
            if not ids:
                return []
            before_partitions = dict(self.partitions)
            for pid in ids:
                del self.partitions[pid]
            self._apply_or_roll_back(self.platform.list(), dict(self.entries), before_partitions)
            self._event(f"healed {', '.join(ids)}")
            return ids

    def planned_entries(self) -> list[Entry]:
        """Desired shaping as the backends get it: the entries, and a 100 % loss per partitioned direction."""
        blocked = [
            Entry(sender, receiver, "egress", BLOCK) for p in self.partitions.values() for sender, receiver in p.pairs()
        ]
        return list(self.entries.values()) + blocked

    def _event(self, text: str) -> None:
        if self.events is not None:
            self.events.add("shaping", text)

    def _apply_or_roll_back(self, lab, before, partitions_before: dict | None = None) -> None:
        try:
            self.apply(lab)
        except (CommandError, OSError, subprocess.TimeoutExpired) as error:
            # A hung tc/iptables (TimeoutExpired) leaves the kernel half-changed just like a failing one.
            self.entries = before
            if partitions_before is not None:
                self.partitions = partitions_before
            try:
                self.apply(lab, force=True)
            except (CommandError, OSError, subprocess.TimeoutExpired) as again:
                log.error("rolling back failed too: %s", again)
            raise ShapingError(Kind.FAILED, f"applying failed and was rolled back: {error}") from None
        self.save()

    # --- converging the kernel ---
    @property
    def workers(self) -> dict:
        """The backend's helper processes per service (the userspace backend's workers), if any."""
        return getattr(self.backend, "workers", {})

    def apply(self, lab: dict[str, LabContainer] | None = None, force: bool = False) -> None:
        lab = self.platform.list() if lab is None else lab
        with self.lock:
            ips = self.shapeable(lab)
            plans = self.backend.plan(self.planned_entries(), ips)
            batching = self.backend if isinstance(self.backend, Batching) else None
            supervised = self.backend if isinstance(self.backend, Supervised) else None
            if batching:
                batching.begin()
            try:
                for service, plan in plans.items():
                    self.applied[service] = self.backend.converge(
                        self.executor, service, lab[service].pid, plan, self.applied.get(service), force
                    )
                for service in [s for s in self.applied if s not in plans]:
                    applied = self.applied.pop(service)
                    if supervised:
                        supervised.release(self.executor, service, applied)
            finally:
                if batching:
                    batching.commit(self.executor, force)

    # --- reading back ---
    def describe(self, service: str, lab: dict[str, LabContainer] | None = None, readback: bool = True) -> dict:
        lab = self.platform.list() if lab is None else lab
        desired = [self._entry_json(e) for e in self.entries.values() if e.service == service]
        out = {"service": service, "backend": self.backend.name, "desired": desired}
        if not readback:  # four nsenter'd reads per namespace: most of a live change's answer time
            out["kernel"] = None
            return out
        # Read back every namespace that carries this service's shaping (the backend says which).
        own_ip = lab[service].ip if service in lab else None
        out["kernel"] = {
            name: self.read_back(name, lab[name].pid)
            for name in self.backend.carriers(service, own_ip, self.applied)
            if name in lab and lab[name].running and lab[name].pid > 1 and lab[name].shapeable
        }
        return out

    def read_back(self, service: str, pid: int) -> dict:
        return self.backend.read_back(self.executor, service, pid, self.applied.get(service))

    def _entry_json(self, e: Entry) -> dict:
        out = {"peer": e.peer, "direction": e.direction, **e.shaping.to_json()}
        if e.expires_at:
            out["expires_in"] = f"{max(0.0, e.expires_at - time.time()):.1f}s"
        return out

    def all(self) -> list[dict]:
        lab = self.platform.list()
        services = sorted({e.service for e in self.entries.values()})
        return [self.describe(s, lab) for s in services]

    # --- supervision ---
    def start(self, interval: float = 0.5) -> None:
        self.load()
        try:
            self.apply(force=True)
        except (CommandError, OSError) as error:
            self.last_error = str(error)
            log.error("reconciling saved shaping failed: %s", error)
        self._thread = threading.Thread(
            target=self._supervise, args=(interval,), name="shaping-supervisor", daemon=True
        )
        self._thread.start()

    def _supervise(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                lab = self.platform.list()
                with self.lock:
                    now = time.time()
                    expired = [k for k, e in self.entries.items() if e.expires_at and e.expires_at <= now]
                    for key in expired:
                        del self.entries[key]
                        self._event(f"{key[0]} -> {key[1] or 'all'}: duration over, cleared")
                    ended = [p for p, v in self.partitions.items() if v.expires_at and v.expires_at <= now]
                    for pid in ended:
                        del self.partitions[pid]
                        self._event(f"partition {pid}: duration over, healed")
                    expired += ended
                    if expired:
                        self.save()
                    ips = self.shapeable(lab)
                    moved = any(s in self.applied and self.applied[s].pid != lab[s].pid for s in ips)
                    dead = isinstance(self.backend, Supervised) and not self.backend.healthy()
                    if expired or moved or dead or set(ips) != set(self.applied):
                        self.apply(lab)
                self.last_error = None
            except Exception as error:  # the supervisor must outlive a failing Docker API or namespace
                self.last_error = f"{type(error).__name__}: {error}"
                log.warning("shaping supervisor: %s", self.last_error)

    def stop(self, clear_kernel: bool) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        with self.lock:
            if clear_kernel:
                saved, partitions = dict(self.entries), dict(self.partitions)
                self.entries.clear()
                self.partitions.clear()
                try:
                    self.apply()
                except Exception as error:
                    log.error("clearing shaping at exit failed: %s", error)
                self.entries, self.partitions = saved, partitions  # kept on disk: a restart re-applies it
            if isinstance(self.backend, Supervised):
                self.backend.stop()


def _settings_text(entry: Entry) -> str:
    settings = entry.shaping.to_json()
    text = " ".join(f"{k} {v}" for k, v in settings.items())
    return text if entry.direction == "egress" else f"{text} ({entry.direction})"
