"""What a shaping backend is: one protocol, implemented by `kernel.KernelBackend` (netem) and
`userspace.UserspaceBackend` (NFQUEUE worker). A new backend is one new module implementing it and
one line in `backends.BACKENDS`.

The manager keeps desired state, persistence and supervision; a backend turns desired entries into a
plan per container (`plan`, pure), makes one container's kernel match its plan (`converge`, through
the executor, changing in place what can be changed in place), reads it back (`read_back`) and
refuses with the field named what it cannot honour (`unsupported`). A backend owns whatever it runs
besides the kernel (the userspace workers): that, batching and preparing are optional capabilities,
each its own protocol below, so a backend without them writes no empty methods.

Shared here: the device, the htb helpers both use for rates, and the common read-back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from laglab.errors import Kind
from laglab.shaping.executor import Executor
from laglab.shaping.params import ShapingError, format_rate
from laglab.shaping.plan import Entry
from laglab.shaping.ports import PROTOCOL_NUMBERS, Ports

DEV = "eth0"
UNSHAPED = 10e9  # the parent class and the default class: 10 gbit


@dataclass
class Applied:
    """What a backend last made a container's kernel hold (`state`: backend-specific, e.g. the chain)."""

    pid: int
    plan: object
    state: dict | None = None


class Backend(Protocol):
    """What every backend does: refuse what it cannot honour, plan, converge one container, read back."""

    name: str

    def unsupported(self, entry: Entry) -> tuple[str, str] | None: ...

    def plan(self, entries: list[Entry], ips: dict[str, str]) -> dict[str, object]: ...

    def converge(
        self, executor: Executor, service: str, pid: int, plan: object, previous: Applied | None, force: bool
    ) -> Applied: ...

    def carriers(self, service: str, own_ip: str | None, applied: dict[str, Applied]) -> list[str]:
        """Every container whose kernel carries this service's shaping (read back together)."""

    def read_back(self, executor: Executor, service: str, pid: int, applied: Applied | None) -> dict: ...


# Optional capabilities: a backend has one when it has its methods (the manager asks with isinstance).
@runtime_checkable
class Batching(Protocol):
    """Writes something shared by every container once per convergence (the userspace backend's chain)."""

    def begin(self) -> None:
        """A convergence of every container starts (converge/release calls follow, then commit)."""

    def commit(self, executor: Executor, force: bool) -> None:
        """It ends: what was batched is written now."""


@runtime_checkable
class Preparing(Protocol):
    def prepare(self, executor: Executor, service: str, plan: object, warm: bool) -> None:
        """Make changes to what `service` receives fast before they are asked (a timeline knows its
        steps in advance), or stop doing so (`warm` False)."""


@runtime_checkable
class Seeding(Protocol):
    def seed(self, seed: int | None, executor: Executor) -> str | None:
        """Draw each link's random decisions (loss, jitter and the other drawn knobs) from a generator
        seeded from `seed` and the link's names (None: the host's own randomness again). Returns what
        could not be seeded, in words, or None."""


def kube_of(platform, backend: str):
    """The Kubernetes lab's namespace (platforms/kube_lab.KubeLab: its API, pods and owner) that a
    backend of that platform acts through; any other platform is refused naming the backend."""
    kube = getattr(platform, "kube", None)
    if kube is None:
        raise ShapingError(Kind.UNAVAILABLE, f"backend: {backend} shapes only on the Kubernetes platform")
    return kube


@runtime_checkable
class Supervised(Protocol):
    """Runs something besides the kernel (the userspace workers): the supervisor watches it."""

    def attach(self, platform) -> None:
        """The lab's platform (the userspace backend finds the bridge's namespace through it)."""

    def release(self, executor: Executor, service: str, applied: Applied) -> None:
        """The container is gone or no longer shapeable: stop what runs for it."""

    def healthy(self) -> bool:
        """False when something the backend runs died (the supervisor re-applies)."""

    def stop(self) -> None: ...


def _bytes(bits: float) -> int:
    return max(1, int(bits / 8))


def htb_class_args(rate: float) -> list[str]:
    """rate/ceil with explicit burst and quantum: htb's computed ones are wrong at both ends
    (too small at 256 kbit, overflowing at 10 gbit)."""
    burst = max(15140, int(_bytes(rate) * 0.01))  # 10 ms of line rate, at least ten full frames
    quantum = max(1514, min(200000, int(_bytes(rate) / 1000)))
    text = format_rate(rate)
    return ["rate", text, "ceil", text, "burst", str(burst), "cburst", str(burst), "quantum", str(quantum)]


def htb_class(parent: str, classid: str, rate: float) -> list[str]:
    return ["tc", "class", "replace", "dev", DEV, "parent", parent, "classid", classid, "htb", *htb_class_args(rate)]


def port_matches(ports: Ports) -> list[list[str]]:
    """u32's words for each packet of `ports`: per protocol, per port, its source and its destination
    port (u32 reads them at the IP header's fixed offset: packets without IP options, as the lab's are)."""
    return [
        ["match", "ip", "protocol", str(PROTOCOL_NUMBERS[protocol]), "0xff", "match", "ip", end, str(port), "0xffff"]
        for protocol in ports.protocols
        for port in ports.numbers
        for end in ("sport", "dport")
    ]


def htb_commands(rates: dict[str | None, float], ported: dict[str, Ports] | None = None) -> list[list[str]]:
    """Root htb 1:, parent 1:1; class 1:10 for all traffic (None), 1:11.. per destination with u32 (and,
    for a destination in `ported`, one filter per port match: node ids minor << 7 + k, within u32's 12
    bits for 31 peers of KERNEL_PORTS ports)."""
    cmds = [
        ["tc", "qdisc", "replace", "dev", DEV, "root", "handle", "1:", "htb", "default", "10"],
        htb_class("1:", "1:1", UNSHAPED),
        htb_class("1:1", "1:10", rates.get(None, UNSHAPED)),
    ]
    filter_ = ["tc", "filter", "replace", "dev", DEV, "parent", "1:", "protocol", "ip", "prio", "1", "handle"]
    for minor, dest in enumerate(sorted(d for d in rates if d is not None), start=11):
        cmds.append(htb_class("1:1", f"1:{minor}", rates[dest]))
        ports = (ported or {}).get(dest)
        if not ports:
            cmds.append(
                [*filter_, f"800::{minor:x}", "u32", "match", "ip", "dst", f"{dest}/32", "flowid", f"1:{minor}"]
            )
            continue
        for k, match in enumerate(port_matches(ports)):
            cmds.append([*filter_, f"800::{(minor << 7) + k:x}", "u32", "match", "ip", "dst", f"{dest}/32", *match,
                         "flowid", f"1:{minor}"])  # fmt: skip
    return cmds


def read_back_kernel(executor: Executor, pid: int) -> dict:
    """What a container's kernel holds, whichever backend put it there: its device's qdiscs and classes."""
    qdisc = executor.run(["tc", "-j", "qdisc", "show", "dev", DEV], netns_pid=pid, check=False)
    classes = executor.run(["tc", "-j", "class", "show", "dev", DEV], netns_pid=pid, check=False)
    return {"qdiscs": _json_or_empty(qdisc), "classes": _json_or_empty(classes)}


def _json_or_empty(text: str) -> list:
    try:
        return json.loads(text) if text.strip() else []
    except json.JSONDecodeError:
        return []
