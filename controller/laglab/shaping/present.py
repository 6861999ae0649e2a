"""Shaping in the API's words: desired entries as tc-style strings, and what the kernel was read back
to hold. Reads the desired state and the reconciler; changes nothing. `ShapingView` is the read side
the ShapingManager publishes (its `view`): the API, /metrics and the timeline's steps read shaping
through it, never the manager's desired state or reconciler themselves."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from laglab.platforms import LabContainer
from laglab.shaping.desired import DesiredState, Partition
from laglab.shaping.impairment import format_rate
from laglab.shaping.params import Direction
from laglab.shaping.plan import Entry, build
from laglab.shaping.reconciler import Reconciler

if TYPE_CHECKING:  # the node shaper imports shaping/ without pydantic
    from laglab.shaping.matrix import Matrix


def entry_json(e: Entry) -> dict:
    out = {"peer": e.peer, "direction": e.direction.value, **e.shaping.to_json()}
    if e.ports:  # only these ports' packets are held: the rest of the link is not
        out["ports"] = e.ports.text()
    if e.expires_at:
        out["expires_in"] = f"{max(0.0, e.expires_at - time.time()):.1f}s"
    return out


def settings_text(entry: Entry) -> str:
    text = " ".join(f"{k} {v}" for k, v in entry.shaping.to_json().items())
    text += f" on ports {entry.ports.text()}" if entry.ports else ""
    return text if entry.direction is Direction.EGRESS else f"{text} ({entry.direction})"


class ShapingView:
    """What shaping holds, read under the manager's lock: a service's entries and its kernel's read-back,
    every shaped service, what the entries ask of one link, the partitions and the delay matrix in
    force. `desired` gives the manager's desired state as it is now (a load replaces it whole)."""

    def __init__(self, desired: Callable[[], DesiredState], reconciler: Reconciler, lock):
        self._desired, self._reconciler, self._lock = desired, reconciler, lock

    @property
    def backend(self) -> str:
        return self._reconciler.backend.name

    def service(self, name: str, lab: dict[str, LabContainer], readback: bool = True) -> dict:
        """One service's desired entries, and (readback) what its kernel holds."""
        with self._lock:
            return service(self._desired(), self._reconciler, name, lab, readback)

    def every(self, lab: dict[str, LabContainer]) -> list[dict]:
        """Every shaped service, as service() says it."""
        with self._lock:
            desired = self._desired()
            return [
                service(desired, self._reconciler, s, lab)
                for s in sorted({e.service for e in desired.entries.values()})
            ]

    def requested(self, src: LabContainer, dst: LabContainer, lab: dict[str, LabContainer]) -> dict:
        """What the entries ask of the link between two services (POST /api/verify compares)."""
        with self._lock:
            return requested(self._desired(), lab, src, dst)

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._desired().entries.values())

    def partitions(self) -> list[Partition]:
        with self._lock:
            return list(self._desired().partitions.values())

    def matrix(self) -> Matrix | None:
        with self._lock:
            return self._desired().matrix


def service(
    desired: DesiredState, reconciler: Reconciler, name: str, lab: dict[str, LabContainer], readback: bool = True
) -> dict:
    out = {
        "service": name,
        "backend": reconciler.backend.name,
        "desired": [entry_json(e) for e in desired.entries.values() if e.service == name],
    }
    # The kernel's read-back is four nsenter'd reads per namespace: most of a live change's answer time.
    out["kernel"] = reconciler.kernel(name, lab) if readback else None
    return out


def requested(desired: DesiredState, lab: dict[str, LabContainer], src: LabContainer, dst: LabContainer) -> dict:
    """What the entries ask of the link src <-> dst (a partition aside): RTT and each direction's rate."""
    plans = build(list(desired.entries.values()), Reconciler.shapeable(lab))
    there, back = plans.get(dst.service), plans.get(src.service)
    holds = [p.hold.get(ip) for p, ip in ((there, src.ip), (back, dst.ip)) if p]
    return {
        "rtt_ms": round(1000 * sum(h.delay for h in holds if h), 3),
        "rate_forward": _rate(back, dst.ip),
        "rate_reverse": _rate(there, src.ip),
    }


def link(desired: DesiredState, lab: dict[str, LabContainer], a: str, b: str) -> dict[str, str]:
    """What each direction of the link a <-> b holds now, in the API's words ('delay 90ms loss 1% on
    ports 3306', 'rate 2mbit', 'unshaped'; a partition is 'loss 100%'): a capture's side file."""
    ips = Reconciler.shapeable(lab)
    plans = build(desired.planned_entries(), ips)
    out = {}
    for src, dst in ((a, b), (b, a)):
        words = []
        held, sent = plans.get(dst), plans.get(src)
        if held is not None and src in ips:
            source = ips[src] if ips[src] in held.hold else "*" if "*" in held.hold else None
            if source is not None:
                words += [f"{k} {v}" for k, v in held.hold[source].to_json().items()]
                if source in held.ports:
                    words.append(f"on ports {held.ports[source].text()}")
        if sent is not None and dst in ips:
            rate = sent.rates.get(ips[dst], sent.rates.get(None))
            if rate:
                words.append(f"rate {format_rate(rate)}")
        out[f"{src}->{dst}"] = " ".join(words) or "unshaped"
    return out


def _rate(plan, dest_ip):
    if plan is None:
        return None
    rate = plan.rates.get(dest_ip, plan.rates.get(None))
    return format_rate(rate) if rate else None
