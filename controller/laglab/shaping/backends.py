"""The two ways a namespace plan reaches the kernel, behind one interface.

- `KernelBackend` (normal Linux, Docker Desktop): netem does delay/jitter/loss on the sender's
  egress; tbf (one rate) or htb classes with u32 destination filters (per-peer rates and per-peer
  netem leaves). Queue limits are sized from rate x delay so nothing drops that shouldn't.
- `UserspaceBackend` (kernels without sch_netem): delay/jitter/loss by an NFQUEUE worker on the
  RECEIVER's INPUT (iptables chain LAGLAB, matched by source address); rate by htb on the sender.

Both only build argv lists (pure, unit-tested against golden argv) and hand them to the executor.
Both refuse, with the field named, what they cannot honour (`unsupported`).
"""

from __future__ import annotations

import json
import math

from ..executor import Executor
from .params import Shaping, format_rate, format_time
from .plan import Entry, NamespacePlan

CHAIN = "LAGLAB"
DEV = "eth0"
UNSHAPED = 10e9  # the parent class and the default class: 10 gbit


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


def htb_commands(rates: dict[str | None, float]) -> list[list[str]]:
    """Root htb 1:, parent 1:1; class 1:10 for all traffic (None), 1:11.. per destination with u32."""
    cmds = [
        ["tc", "qdisc", "replace", "dev", DEV, "root", "handle", "1:", "htb", "default", "10"],
        htb_class("1:", "1:1", UNSHAPED),
        htb_class("1:1", "1:10", rates.get(None, UNSHAPED)),
    ]
    for minor, dest in enumerate(sorted(d for d in rates if d is not None), start=11):
        cmds.append(htb_class("1:1", f"1:{minor}", rates[dest]))
        cmds.append(["tc", "filter", "replace", "dev", DEV, "parent", "1:", "protocol", "ip", "prio", "1", "handle", f"800::{minor:x}",
                     "u32", "match", "ip", "dst", f"{dest}/32", "flowid", f"1:{minor}"])  # fmt: skip
    return cmds


def iptables_restore_input(plan: NamespacePlan) -> str:
    """The LAGLAB chain, replaced atomically by `iptables-restore --noflush` (a declared chain is flushed)."""
    lines = ["*filter", f":{CHAIN} - [0:0]"]
    for source in sorted(s for s in plan.hold if s != "*"):
        lines.append(f"-A {CHAIN} -s {source}/32 ! -i lo -j NFQUEUE --queue-num 0 --queue-bypass")
    if "*" in plan.hold:
        lines.append(f"-A {CHAIN} ! -i lo -j NFQUEUE --queue-num 0 --queue-bypass")
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def worker_rules(plan: NamespacePlan) -> str:
    return json.dumps({source: hold.as_worker_rule() for source, hold in sorted(plan.hold.items())}, sort_keys=True)


class UserspaceBackend:
    name = "userspace"

    @staticmethod
    def unsupported(entry: Entry) -> tuple[str, str] | None:
        s: Shaping = entry.shaping
        for field in ("duplicate", "corrupt", "reorder", "correlation"):
            if getattr(s, field):
                return field, "not supported by the userspace backend (this kernel has no sch_netem)"
        if s.distribution not in (None, "uniform", "normal"):
            return "distribution", f"{s.distribution!r} is not supported by the userspace backend (uniform, normal)"
        if s.rate and entry.direction != "egress":
            return "rate", "a rate applies to egress only"
        return None

    @staticmethod
    def tc_commands(plan: NamespacePlan) -> list[list[str]]:
        return htb_commands(plan.rates) if plan.rates else []


class KernelBackend:
    """netem where the kernel has it. Used on hosts with sch_netem; here only its argv is tested."""

    name = "kernel"

    @staticmethod
    def unsupported(entry: Entry) -> tuple[str, str] | None:
        if entry.direction != "egress":
            return "direction", "the kernel backend shapes egress only (ingress needs ifb, not built yet)"
        return None

    @staticmethod
    def netem_args(s: Shaping, rate: float | None) -> list[str]:
        args = ["netem"]
        # Queue limit: enough packets for rate x delay (netem's default of 1000 drops at high rate x delay).
        in_flight = (rate or UNSHAPED) / 8 * (s.delay + s.jitter) / 1500
        args += ["limit", str(max(1000, math.ceil(in_flight * 1.5)))]
        if s.delay:
            args += ["delay", format_time(s.delay)]
            if s.jitter:
                args += [format_time(s.jitter)]
                if s.correlation:
                    args += [f"{s.correlation * 100:g}%"]
                if s.distribution:
                    args += ["distribution", s.distribution]
        if s.loss:
            args += ["loss", f"{s.loss * 100:g}%"]
        if s.duplicate:
            args += ["duplicate", f"{s.duplicate * 100:g}%"]
        if s.corrupt:
            args += ["corrupt", f"{s.corrupt * 100:g}%"]
        if s.reorder:
            args += ["reorder", f"{s.reorder * 100:g}%"]
        return args

    @staticmethod
    def layout(service_wide: Shaping | None, per_peer: dict[str, Shaping]) -> tuple:
        """What the qdisc tree looks like, values aside. Two plans of one layout differ only in values,
        and `tc ... replace` of the same handles changes them in place: no queued packet is dropped.
        Another layout starts from an empty root (a netem root cannot be replaced by htb: 'Invalid
        qdisc name'; and a removed peer's class and filter must not stay)."""
        if not per_peer:
            return ("netem-root", service_wide is not None, bool(service_wide and service_wide.rate))
        return ("htb", service_wide is not None, tuple(sorted(per_peer)))

    def tc_commands(
        self, service_wide: Shaping | None, per_peer: dict[str, Shaping], in_place: bool = False
    ) -> list[list[str]]:
        """Egress of one container: netem root (+ tbf child for a rate), or htb with a class and a
        netem leaf per peer when any peer has its own settings. `in_place`: the same layout is there
        already, so the htb root is left as it is (htb has no change operation: 'Change operation not
        supported by specified qdisc'); classes, filters and leaves are replaced."""
        tc = ["tc"]
        if not per_peer:
            if service_wide is None:
                return []
            cmds = [
                [
                    *tc,
                    "qdisc",
                    "replace",
                    "dev",
                    DEV,
                    "root",
                    "handle",
                    "1:",
                    *self.netem_args(service_wide, service_wide.rate),
                ]
            ]
            if service_wide.rate:
                limit = max(15140 * 4, int(_bytes(service_wide.rate) * 0.2))  # 200 ms of queue
                cmds.append([*tc, "qdisc", "replace", "dev", DEV, "parent", "1:1", "handle", "10:", "tbf",
                             "rate", format_rate(service_wide.rate), "burst", "15140", "limit", str(limit)])  # fmt: skip
            return cmds
        rates = {ip: s.rate or UNSHAPED for ip, s in per_peer.items()}
        if service_wide is not None:
            rates[None] = service_wide.rate or UNSHAPED
        cmds = htb_commands(rates)
        if in_place:
            cmds = [c for c in cmds if not (c[1] == "qdisc" and "root" in c)]
        leaves = {None: service_wide, **per_peer}
        minors = {None: 10, **{dest: m for m, dest in enumerate(sorted(per_peer), start=11)}}
        for dest, settings in leaves.items():
            if settings is None:
                continue
            minor = minors[dest]
            cmds.append([*tc, "qdisc", "replace", "dev", DEV, "parent", f"1:{minor}", "handle", f"{minor}:",
                         *self.netem_args(settings, settings.rate)])  # fmt: skip
        return cmds


def apply_userspace_tc(executor: Executor, pid: int, plan: NamespacePlan, previous: NamespacePlan | None) -> None:
    """Rate classes on a container's egress. Same layout: change class rates in place (no queue is
    dropped); new layout: rebuild from an empty root so no stale class or filter of a removed peer stays."""
    if not plan.rates:
        if previous is None or previous.rates:
            executor.run(["tc", "qdisc", "del", "dev", DEV, "root"], netns_pid=pid, check=False)
        return
    if previous is not None and previous.rates and set(previous.rates) == set(plan.rates):
        cmds = [c for c in htb_commands(plan.rates) if c[1] == "class"]
        for cmd in cmds:
            executor.run([*cmd[:2], "change", *cmd[3:]], netns_pid=pid)
        return
    executor.run(["tc", "qdisc", "del", "dev", DEV, "root"], netns_pid=pid, check=False)
    for cmd in htb_commands(plan.rates):
        executor.run(cmd, netns_pid=pid)
