"""Injects faults into this project's containers, undoes them when their duration is over, and keeps
the active and recent ones for GET /api/faults and the dashboard.

The faults in force are kept apart from the history (a fault pushed out of the recent 200 can still be
undone) and on disk (faults.json in the state folder): a controller killed mid-fault (SIGKILL, the OOM
killer) finds them at its next start (`recover`) and undoes the ones whose time ran out, re-arming the
others for what is left of their duration.

Only containers labelled with this compose project exist here, and never the lab's apparatus (the
controller, loadgen, set-up jobs: label laglab.shaped=never). A fault's `effect` time is when the
container's state showed it (docker inspect), not when the call was sent.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from laglab import limits
from laglab.deadline import poll
from laglab.errors import Kind
from laglab.faults.base import ACTIONS, FaultError
from laglab.measurement.results import iso
from laglab.platforms import PlatformError, Unsupported
from laglab.state.recovery import read_state, write_state

log = logging.getLogger("laglab.faults")
MAX_DURATION = 86400.0


@dataclass
class Fault:
    id: str
    service: str
    action: str
    duration: float | None
    asked: float
    effect: float | None = None
    undo_action: str | None = None
    undone: float | None = None  # when the undo took effect
    error: str | None = None
    _timer: threading.Timer | None = field(default=None, repr=False)
    _undo_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # one undo at a time

    @property
    def active(self) -> bool:
        """In force: undone by its timer (a duration), by `fault undo`, or by the action that reverses it
        (kill, stop and pause without a duration stay in force until then; #36.2)."""
        return self.undo_action is not None and self.undone is None and not self.error

    def to_wire(self) -> dict:
        return {k: getattr(self, k) for k in ("id", "service", "action", "duration", "asked", "effect", "undo_action")}

    @property
    def due(self) -> float | None:
        """When its duration is over (epoch seconds), counted from when it took effect."""
        if self.duration is None:
            return None
        return (self.effect or self.asked) + self.duration

    def as_json(self) -> dict:
        return {
            "id": self.id,
            "service": self.service,
            "action": self.action,
            "duration_seconds": self.duration,
            "asked": iso(self.asked),
            "effect": iso(self.effect) if self.effect else None,
            "effect_ms": None if self.effect is None else round((self.effect - self.asked) * 1000, 1),
            "undo": self.undo_action,
            "undone": iso(self.undone) if self.undone else None,
            "active": self.active,
            "error": self.error,
        }


class FaultManager:
    def __init__(
        self, platform, events=None, keep: int = 200, settle_timeout: float = 60.0, state_path: Path | None = None
    ):
        self.platform = platform
        self.events = events
        self.recent: collections.deque[Fault] = collections.deque(maxlen=keep)
        self.live: dict[str, Fault] = {}  # faults with a duration not yet undone, whatever the history holds
        self.settle_timeout = settle_timeout
        self.state_path = state_path  # faults.json: the live ones, for the next start after a crash
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # --- what the API and the timeline call ---
    def inject(self, service: str, action: str, duration: float | None = None, timer: bool = True) -> Fault:
        """Do `action` now. With a duration it is active until undone: by its own timer, or (timer=False:
        a scenario's timeline keeps the time itself) by undo()."""
        spec = ACTIONS.get(action)
        if spec is None:
            raise FaultError(Kind.INVALID, f"action: {action[:32]!r} is not one of {', '.join(ACTIONS)}")
        if duration is not None:
            if spec.undo is None:
                raise FaultError(Kind.INVALID, f"duration: {action} cannot be undone; leave duration out")
            if action == "kill" and getattr(self.platform, "restarts_killed", False):
                raise FaultError(Kind.INVALID, (
                    f"duration: on {self.platform.name} a killed container is started again at once (the kubelet), "
                    f"so a kill cannot last {duration:g}s: `stop` with this duration holds {service} down "
                    "(Chaos Mesh's pod-failure); `kill` without one is the crash"
                ))  # fmt: skip
            if not 0 <= duration <= MAX_DURATION:  # 0: undone as soon as it took effect (a blip)
                raise FaultError(Kind.INVALID, f"duration: {duration:g}s is out of range (up to {MAX_DURATION:g}s)")
        lasting = duration is not None or spec.disrupts
        if lasting and len(self.active()) >= limits.ACTIVE_FAULTS:
            raise FaultError(
                Kind.CONFLICT,
                f"action: {limits.ACTIVE_FAULTS} faults are in force, at most "
                f"{limits.ACTIVE_FAULTS} (limit active_faults): undo one first",
            )
        state = self._state(service)
        if not spec.needs(state):
            raise FaultError(Kind.CONFLICT, f"service: {service} is not {spec.needs_text} (it is {state.text})")
        # `fault start X` after `fault kill X`: the start ends the kill (no fault of its own to undo).
        ended = [f for f in self.active() if f.service == service and f.undo_action == action]
        fault = Fault(f"f{next(self._ids)}", service, action, duration, time.time(),
                      undo_action=spec.undo if lasting else None)  # fmt: skip
        fault.effect = self._do(service, spec)
        for earlier in ended:
            with earlier._undo_lock:
                if earlier._timer is not None:
                    earlier._timer.cancel()
                earlier.undone = fault.effect
        with self._lock:
            self.recent.append(fault)
            if fault.active:
                self.live[fault.id] = fault
        self._save()
        ends = f" (ends {', '.join(f.id for f in ended)})" if ended else ""
        self._event(f"{service}: {action}" + (f" for {duration:g}s" if duration is not None else "") + ends)
        if duration is not None and timer:
            # The duration is how long the fault lasts once it took effect (a clean stop takes seconds).
            self._arm(fault, duration)
        return fault

    def _arm(self, fault: Fault, seconds: float) -> None:
        fault._timer = threading.Timer(max(0.0, seconds), self._undo_due, args=(fault,))
        fault._timer.daemon = True
        fault._timer.start()

    def undo(self, fault_id: str) -> Fault:
        """Undo an active fault now (before its duration is over). Idempotent: a fault already undone (by
        its timer a moment ago, or by an earlier call) is answered as it is; a fault without a duration
        has nothing to undo (409)."""
        fault = self.get(fault_id)
        if fault.undo_action is None:
            raise FaultError(Kind.CONFLICT, f"fault: {fault_id} ({fault.action}) has nothing to undo")
        if fault._timer is not None:
            fault._timer.cancel()
        self._undo(fault)
        return fault

    def get(self, fault_id: str) -> Fault:
        with self._lock:
            if fault_id in self.live:
                return self.live[fault_id]
            for fault in self.recent:
                if fault.id == fault_id:
                    return fault
        raise FaultError(Kind.NOT_FOUND, f"fault: no fault {fault_id[:32]!r}")

    def active(self) -> list[Fault]:
        with self._lock:
            return [f for f in self.live.values() if f.active]

    def listing(self) -> dict:
        with self._lock:
            faults = list(self.recent)
            live = list(self.live.values())
        return {
            "active": [f.as_json() for f in live if f.active],
            "recent": [f.as_json() for f in reversed(faults)],
        }

    # --- after a crash ---
    def recover(self, restart=None) -> None:
        """The faults a dead controller left in force (faults.json): undone now when their time ran out
        while it was down, re-armed for the rest of it otherwise. What was done goes to `restart`."""
        if self.state_path is None:
            return
        items = read_state(self.state_path, restart, [])
        numbers = [int(i["id"][1:]) for i in items if isinstance(i, dict) and str(i.get("id", ""))[1:].isdigit()]
        self._ids = itertools.count(max(numbers, default=0) + 1)  # ids go on: `fault undo f3` stays f3
        now = time.time()
        for item in items:
            try:
                fault = Fault(**{k: item[k] for k in ("id", "service", "action", "duration", "asked", "effect")},
                              undo_action=item["undo_action"])  # fmt: skip
                if fault.action not in ACTIONS or fault.undo_action not in ACTIONS:
                    raise TypeError(f"not a fault in force: {item!r:.120}")
                if fault.due is not None:
                    float(fault.due)
            except (KeyError, TypeError, ValueError) as error:  # a hand-edited or foreign file: said, not a crash
                if restart is not None:
                    restart.add("set_aside", f"faults.json: an entry skipped ({type(error).__name__})")
                continue
            with self._lock:
                self.recent.append(fault)
                self.live[fault.id] = fault
            if not self._reached(fault.service, ACTIONS[fault.action]):
                fault.undone = now  # someone (make up unpauses what compose cannot start past) undid it
                text = f"{fault.id} ({fault.action} {fault.service}) found undone already"
            elif fault.due is None:
                text = f"{fault.id} ({fault.action} {fault.service}) still in force: ./laglab fault undo {fault.id} ends it"
            elif fault.due <= now:
                try:
                    self._undo(fault)
                    text = f"{fault.id} ({fault.action} {fault.service}) undone: its {fault.duration:g}s ran out while the controller was down"
                except Exception as error:  # the container may be gone: say so, go on
                    text = f"{fault.id} ({fault.action} {fault.service}): undo failed: {error}"
            else:
                self._arm(fault, fault.due - now)
                text = f"{fault.id} ({fault.action} {fault.service}) re-armed: {fault.undo_action} in {fault.due - now:.0f}s"
            if restart is not None:
                restart.add("faults", text)
        self._save()

    def _save(self) -> None:
        if self.state_path is None:
            return
        with self._lock:
            for fault_id in [i for i, f in self.live.items() if not f.active]:
                del self.live[fault_id]
            wire = [f.to_wire() for f in self.live.values()]
        try:
            write_state(self.state_path, wire)
        except OSError as error:
            log.error("saving the faults in force to %s failed: %s", self.state_path, error)

    def stop(self) -> None:
        """A stopping controller undoes what it broke: no container stays killed or paused."""
        for fault in self.active():
            if fault._timer is not None:
                fault._timer.cancel()
            self._undo(fault)

    # --- the work ---
    def _state(self, service: str):
        """The state of a service's container that faults may touch (FaultError naming the service)."""
        containers = self.platform.list()
        found = containers.get(service)
        if found is None:
            raise FaultError(
                Kind.NOT_FOUND,
                f"service: no service {service[:64]!r} in this lab (known: {', '.join(sorted(containers))})",
            )
        if not found.shapeable:
            raise FaultError(
                Kind.CONFLICT,
                f"service: {service} is the lab's measuring apparatus or a set-up job; faults never touch it",
            )
        return self.platform.state(service)

    def _do(self, service: str, spec) -> float:
        """Run the action; the time its effect was seen in the container's state."""
        try:
            self.platform.act(service, spec.name)
        except Unsupported as error:
            raise FaultError(Kind.INVALID, str(error)) from None
        except Exception as error:
            # The state changed between the check and the call (another request, a crash, Docker's restart
            # policy): Docker then refuses with 409, which is the lab's conflict, not a failure.
            moved = self._state_now(service)
            if moved is not None and not spec.needs(moved):
                raise FaultError(
                    Kind.CONFLICT, f"service: {service} is not {spec.needs_text} (it is {moved.text})"
                ) from None
            words = str(error) if isinstance(error, PlatformError) else type(error).__name__  # the platform's words
            raise FaultError(Kind.FAILED, f"action: {spec.name} failed: {words}") from None
        return poll(
            lambda: spec.reached(self.platform.state(service)) and time.time(),
            self.settle_timeout,
            interval=0.02,
            timed_out=lambda: FaultError(
                Kind.TIMED_OUT, f"action: {spec.name} did not take effect within {self.settle_timeout:g}s"
            ),
        )

    def _state_now(self, service: str):
        try:
            return self.platform.state(service)
        except Exception:
            return None

    def _undo_due(self, fault: Fault) -> None:
        try:
            self._undo(fault)
        except Exception as error:  # a timer thread: nobody else would see it
            log.error("undoing %s failed: %s", fault.id, error)

    def _undo(self, fault: Fault) -> None:
        """The container's actual state decides: an undo whose effect is already there (its timer's
        undo a moment ago, or someone's `docker unpause`) does nothing and counts as done. Its timer and
        a DELETE can arrive together: the second waits for the first and finds the fault undone."""
        with fault._undo_lock:
            if not fault.active:
                return
            spec = ACTIONS[fault.undo_action]
            try:
                if spec.needs(self._state(fault.service)):
                    fault.undone = self._do(fault.service, spec)
                else:
                    fault.undone = time.time()
            except FaultError as error:
                if not self._reached(fault.service, spec):
                    fault.error = f"undo ({spec.name}): {error.message}"
                    raise
                fault.undone = time.time()  # it failed because its effect was already there
            self._event(f"{fault.service}: {spec.name} (undoing {fault.action} {fault.id})")
        self._save()

    def _reached(self, service: str, spec) -> bool:
        try:
            return bool(spec.reached(self._state(service)))
        except Exception:
            return False

    def _event(self, text: str) -> None:
        if self.events is not None:
            self.events.add("fault", text)
