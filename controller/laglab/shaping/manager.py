"""Desired shaping, persisted, and the loop that makes every lab container's kernel match it.

All changes go through `ShapingManager` under one lock, so concurrent requests are serialised and the
kernel ends up as the last accepted request says. Desired state is saved to a JSON file; at start
the manager reloads it and reconciles (chains replaced atomically, qdiscs rebuilt, one worker per
namespace), so a restart — even after kill -9 — leaves exactly the desired rules. A supervisor
thread re-applies shaping to a container that restarted and reverts entries whose duration ran out.
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..containers import Containers, LabContainer
from . import backends
from ..executor import CommandError, Executor
from .params import Request, Shaping
from .plan import EgressPlan, Entry, NamespacePlan, build, build_egress

log = logging.getLogger("laglab.shaping")


class ShapingError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Applied:
    pid: int
    plan: NamespacePlan | EgressPlan
    rules: str = ""
    chain: str = ""


class ShapingManager:
    def __init__(
        self, containers: Containers, executor: Executor, backend, state_path: Path, python: str = "python", events=None
    ):
        self.containers = containers
        self.executor = executor
        self.backend = backend
        self.state_path = Path(state_path)
        self.python = python
        self.entries: dict[tuple[str, str | None], Entry] = {}
        self.applied: dict[str, Applied] = {}
        self.workers: dict[str, tuple[int, subprocess.Popen]] = {}
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
                entry = Entry(
                    item["service"], item["peer"], item["direction"], Shaping(**item["shaping"]), item.get("expires_at")
                )
                self.entries[entry.key] = entry

    def save(self) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "entries": [
                {
                    "service": e.service,
                    "peer": e.peer,
                    "direction": e.direction,
                    "shaping": e.shaping.as_dict(),
                    "expires_at": e.expires_at,
                }
                for e in self.entries.values()
            ]
        }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.state_path)

    def shapeable(self, lab: dict[str, LabContainer]) -> dict[str, str]:
        return {s: c.ip for s, c in lab.items() if c.running and c.ip and c.pid > 1 and c.shapeable}

    def _resolve(self, lab: dict[str, LabContainer], service: str, field: str) -> None:
        if service in lab and not lab[service].shapeable:
            raise ShapingError(
                409, f"{field}: {service} is not shaped (it is the lab's measuring apparatus or a one-shot job)"
            )
        if service not in lab:
            raise ShapingError(404, f"{field}: no service {service!r} in this lab (known: {', '.join(sorted(lab))})")
        if not lab[service].running:
            raise ShapingError(409, f"{field}: service {service!r} is not running")

    def put(self, service: str, request: Request) -> dict:
        lab = self.containers.list()  # outside the lock: the Docker API can be slow
        self._resolve(lab, service, "service")
        if request.peer is not None:
            self._resolve(lab, request.peer, "peer")
            if request.peer == service:
                raise ShapingError(422, "peer: a service is not its own peer")
        expires = time.time() + request.duration if request.duration else None
        entry = Entry(service, request.peer, request.direction, request.shaping, expires)
        refused = self.backend.unsupported(entry)
        if refused:
            raise ShapingError(422, f"{refused[0]}: {refused[1]}")
        with self.lock:
            before = dict(self.entries)
            self.entries[entry.key] = entry
            self._apply_or_roll_back(lab, before)
            self._event(f"{service} -> {request.peer or 'all'}: {_settings_text(entry)}")
            return self.describe(service, lab)

    def delete(self, service: str, peer: str | None = None) -> dict:
        lab = self.containers.list()
        self._resolve(lab, service, "service")
        with self.lock:
            before = dict(self.entries)
            keys = [k for k in self.entries if k[0] == service and (peer is None or k[1] == peer)]
            if peer is not None and not keys:
                raise ShapingError(404, f"peer: no shaping of {service} towards {peer}")
            for key in keys:
                del self.entries[key]
            self._apply_or_roll_back(lab, before)
            if keys:
                self._event(f"{service} -> {peer or 'all'}: cleared")
            return self.describe(service, lab)

    def clear(self) -> None:
        lab = self.containers.list()
        with self.lock:
            before = dict(self.entries)
            self.entries.clear()
            self._apply_or_roll_back(lab, before)
            if before:
                self._event("all shaping cleared")

    def _event(self, text: str) -> None:
        if self.events is not None:
            self.events.add("shaping", text)

    def _apply_or_roll_back(self, lab, before) -> None:
        try:
            self.apply(lab)
        except (CommandError, OSError, subprocess.TimeoutExpired) as error:
            # A hung tc/iptables (TimeoutExpired) leaves the kernel half-changed just like a failing one.
            self.entries = before
            try:
                self.apply(lab, force=True)
            except (CommandError, OSError, subprocess.TimeoutExpired) as again:
                log.error("rolling back failed too: %s", again)
            raise ShapingError(502, f"applying failed and was rolled back: {error}") from None
        self.save()

    # --- converging the kernel ---
    def apply(self, lab: dict[str, LabContainer] | None = None, force: bool = False) -> None:
        lab = self.containers.list() if lab is None else lab
        with self.lock:
            ips = self.shapeable(lab)
            if self.backend.name == "kernel":
                for service, egress in build_egress(list(self.entries.values()), ips).items():
                    self._converge_kernel(service, lab[service].pid, egress, force)
                for service in [s for s in self.applied if s not in ips]:
                    del self.applied[service]
                return
            plans = build(list(self.entries.values()), ips)
            for service, plan in plans.items():
                self._converge(service, lab[service].pid, plan, force)
            for service in [s for s in self.workers if s not in plans]:
                self._stop_worker(service)
            for service in [s for s in self.applied if s not in plans]:
                del self.applied[service]

    def _converge(self, service: str, pid: int, plan: NamespacePlan, force: bool) -> None:
        previous = self.applied.get(service)
        if previous is not None and previous.pid != pid:
            previous = None  # restarted container: a new namespace with nothing in it
            self._stop_worker(service)
        rules = backends.worker_rules(plan)
        chain = backends.iptables_restore_input(plan)
        if previous is None or force or previous.chain != chain:
            self.executor.run(["iptables-restore", "--noflush"], netns_pid=pid, stdin=chain)
            self._ensure_jump(pid)
        if plan.hold:
            self._ensure_worker(service, pid, rules)
        else:
            self._stop_worker(service)
        if previous is None or force or previous.plan.rates != plan.rates:
            backends.apply_userspace_tc(
                self.executor, pid, plan, None if force else (previous.plan if previous else None)
            )
        self.applied[service] = Applied(pid, plan, rules, chain)

    def _converge_kernel(self, service: str, pid: int, plan: EgressPlan, force: bool) -> None:
        previous = self.applied.get(service)
        if previous is not None and previous.pid == pid and previous.plan == plan and not force:
            return
        layout = self.backend.layout(plan.service_wide, plan.per_peer)
        in_place = (
            previous is not None
            and previous.pid == pid
            and not force
            and self.backend.layout(previous.plan.service_wide, previous.plan.per_peer) == layout
        )
        commands = self.backend.tc_commands(plan.service_wide, plan.per_peer, in_place=in_place)
        if not in_place:
            # A new layout starts from an empty root, so no class, filter or leaf of a removed peer stays.
            self.executor.run(["tc", "qdisc", "del", "dev", backends.DEV, "root"], netns_pid=pid, check=False)
        for cmd in commands:  # every command is a `replace` of fixed handles: values change in place
            self.executor.run(cmd, netns_pid=pid)
        self.applied[service] = Applied(pid, plan)

    def _ensure_jump(self, pid: int) -> None:
        present = self.executor.run(["iptables", "-S", "INPUT"], netns_pid=pid)
        jumps = [line for line in present.splitlines() if line.strip() == f"-A INPUT -j {backends.CHAIN}"]
        if not jumps:
            self.executor.run(["iptables", "-I", "INPUT", "1", "-j", backends.CHAIN], netns_pid=pid)
        for _ in jumps[1:]:  # never two hooks into the chain
            self.executor.run(["iptables", "-D", "INPUT", "-j", backends.CHAIN], netns_pid=pid)

    def _ensure_worker(self, service: str, pid: int, rules: str) -> None:
        current = self.workers.get(service)
        if current and current[0] == pid and current[1] is not None and current[1].poll() is None:
            try:
                current[1].stdin.write(rules + "\n")
                current[1].stdin.flush()
                return
            except (BrokenPipeError, OSError):
                pass
        self._stop_worker(service)
        proc = self.executor.spawn([self.python, "-m", "laglab.shaping.nfqueue", "--queue", "0", "--rules", rules], pid)
        self.workers[service] = (pid, proc)

    def _stop_worker(self, service: str) -> None:
        current = self.workers.pop(service, None)
        if not current or current[1] is None:
            return
        proc = current[1]
        try:
            proc.stdin.close()  # the worker lets its held packets go and exits
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=5)

    # --- reading back ---
    def describe(self, service: str, lab: dict[str, LabContainer] | None = None) -> dict:
        lab = self.containers.list() if lab is None else lab
        desired = [self._entry_json(e) for e in self.entries.values() if e.service == service]
        out = {"service": service, "backend": self.backend.name, "desired": desired}
        # Read back every namespace that carries this service's shaping: its own (rates, ingress
        # holds) and each receiver holding packets from it.
        own_ip = lab[service].ip if service in lab else None
        involved = [service] + [
            s
            for s, a in self.applied.items()
            if s != service and isinstance(a.plan, NamespacePlan) and own_ip in a.plan.hold
        ]
        out["kernel"] = {
            name: self.read_back(name, lab[name].pid)
            for name in involved
            if name in lab and lab[name].running and lab[name].pid > 1 and lab[name].shapeable
        }
        return out

    def read_back(self, service: str, pid: int) -> dict:
        chain = self.executor.run(["iptables", "-S", backends.CHAIN], netns_pid=pid, check=False)
        hooks = self.executor.run(["iptables", "-S", "INPUT"], netns_pid=pid, check=False)
        qdisc = self.executor.run(["tc", "-j", "qdisc", "show", "dev", backends.DEV], netns_pid=pid, check=False)
        classes = self.executor.run(["tc", "-j", "class", "show", "dev", backends.DEV], netns_pid=pid, check=False)
        worker = self.workers.get(service)
        applied = self.applied.get(service)
        return {
            "iptables": [line for line in chain.splitlines() if line.startswith("-A ")],
            "input_hooks": sum(1 for line in hooks.splitlines() if line.strip() == f"-A INPUT -j {backends.CHAIN}"),
            "qdiscs": _json_or_empty(qdisc),
            "classes": _json_or_empty(classes),
            "worker": None
            if not worker or worker[1] is None
            else {
                "pid": worker[1].pid,
                "running": worker[1].poll() is None,
                "rules": json.loads(applied.rules) if applied else {},
            },
        }

    def _entry_json(self, e: Entry) -> dict:
        out = {"peer": e.peer, "direction": e.direction, **e.shaping.to_json()}
        if e.expires_at:
            out["expires_in"] = f"{max(0.0, e.expires_at - time.time()):.1f}s"
        return out

    def all(self) -> list[dict]:
        lab = self.containers.list()
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
                lab = self.containers.list()
                with self.lock:
                    now = time.time()
                    expired = [k for k, e in self.entries.items() if e.expires_at and e.expires_at <= now]
                    for key in expired:
                        del self.entries[key]
                        self._event(f"{key[0]} -> {key[1] or 'all'}: duration over, cleared")
                    if expired:
                        self.save()
                    ips = self.shapeable(lab)
                    moved = any(s in self.applied and self.applied[s].pid != lab[s].pid for s in ips)
                    dead = any(proc is not None and proc.poll() is not None for _, proc in self.workers.values())
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
                saved = dict(self.entries)
                self.entries.clear()
                try:
                    self.apply()
                except Exception as error:
                    log.error("clearing shaping at exit failed: %s", error)
                self.entries = saved  # kept on disk: a restart re-applies it
            for service in list(self.workers):
                self._stop_worker(service)


def _json_or_empty(text: str) -> list:
    try:
        return json.loads(text) if text.strip() else []
    except json.JSONDecodeError:
        return []


def _settings_text(entry: Entry) -> str:
    settings = entry.shaping.to_json()
    text = " ".join(f"{k} {v}" for k, v in settings.items())
    return text if entry.direction == "egress" else f"{text} ({entry.direction})"
