"""The kernel backend (normal Linux, Docker Desktop): netem does delay, jitter, loss, duplicate,
corrupt, reorder on the sender's egress; tbf (one rate) or htb classes with u32 destination filters
(per-peer rates and per-peer netem leaves). Queue limits are sized from rate x delay so nothing drops
that shouldn't. Values change in place (`tc ... replace` of fixed handles); only a new layout is
rebuilt from an empty root. Run for real in make test inside User-mode Linux (tests/kernel)."""

from __future__ import annotations

import math

from laglab.shaping.backend import DEV, UNSHAPED, Applied, _bytes, htb_commands, read_back_kernel
from laglab.shaping.executor import CommandError, Executor
from laglab.shaping.impairment import Impairment, format_rate
from laglab.shaping.params import Direction
from laglab.shaping.plan import EgressPlan, Entry, build_egress, seed_links
from laglab.shaping.ports import KERNEL_PORTS, Ports

# netem's `seed` (TCA_NETEM_PRNG_SEED: Linux 6.6 and iproute2 6.6, François Michel's 2023 patches):
# tried once on a throwaway namespace's loopback, then read back. tc 6.1 says 'What is "seed"?' (and
# its usage); an older kernel drops an attribute it does not know without a word (netem parses its
# options leniently), so only a seed that `qdisc show` prints back was taken.
SEED_PROBE = ["unshare", "--net", "tc", "-batch", "-"]
SEED_PROBE_INPUT = "qdisc add dev lo root netem loss 1% seed 1\nqdisc show dev lo\n"


class KernelBackend:
    name = "kernel"

    def __init__(self):
        self.seeded: int | None = None  # the run's seed, when this kernel's netem takes one
        self.seed_taken: bool | None = None  # whether it does (None: not asked yet)
        self.seed_refusal = ""

    def seed(self, seed: int | None, executor: Executor) -> str | None:
        """Each netem seeded from `seed` where the kernel and tc have netem's seed; else the run goes on
        with the kernel's own randomness and this says so."""
        if seed is None:
            self.seeded = None
            return None
        if self.seed_taken is None:
            try:
                shown = executor.run(SEED_PROBE, stdin=SEED_PROBE_INPUT, timeout=10)
                self.seed_taken = " seed 1" in shown
                self.seed_refusal = "the kernel did not keep it (no seed in `tc qdisc show`)"
            except (CommandError, OSError) as error:
                said = getattr(error, "stderr", "") or str(error)
                self.seed_taken, self.seed_refusal = False, f"tc said: {said.strip().splitlines()[0][:200]}"
        if not self.seed_taken:
            return (f"not seeded: this host's netem takes no seed (Linux 6.6 and iproute2 6.6 bring it; "
                    f"{self.seed_refusal}); loss and jitter draw from the kernel's own randomness")  # fmt: skip
        self.seeded = seed
        return None

    @staticmethod
    def unsupported(entry: Entry) -> tuple[str, str] | None:
        if entry.direction is not Direction.EGRESS:
            return "direction", "the kernel backend shapes egress only (ingress needs ifb, not built yet)"
        if entry.ports and entry.peer is None:
            return "ports", "the kernel backend selects ports on a link: give the peer (a class per peer holds them)"
        if len(entry.ports.numbers) > KERNEL_PORTS:
            return "ports", (f"{len(entry.ports.numbers)} ports; the kernel backend filters at most {KERNEL_PORTS} "
                             "(one u32 filter each way per port)")  # fmt: skip
        return None

    def plan(self, entries: list[Entry], ips: dict[str, str]) -> dict[str, EgressPlan]:
        plans = build_egress(entries, ips)
        seed_links(plans, ips, self.seeded, "links")
        return plans

    @staticmethod
    def netem_args(s: Impairment, rate: float | None, seed: int | None = None) -> list[str]:
        # Queue limit: enough packets for rate x delay (netem's default of 1000 drops at high rate x delay).
        in_flight = (rate or UNSHAPED) / 8 * (s.delay + s.jitter) / 1500
        seeded = [] if seed is None else ["seed", str(seed)]
        return ["netem", "limit", str(max(1000, math.ceil(in_flight * 1.5))), *s.netem_args(), *seeded]

    @staticmethod
    def layout(service_wide: Impairment | None, per_peer: dict[str, Impairment], ported: dict | None = None) -> tuple:
        """What the qdisc tree looks like, values aside. Two plans of one layout differ only in values,
        and `tc ... replace` of the same handles changes them in place: no queued packet is dropped.
        Another layout starts from an empty root (a netem root cannot be replaced by htb: 'Invalid
        qdisc name'; and a removed peer's class and filter must not stay)."""
        if not per_peer:
            return ("netem-root", service_wide is not None, bool(service_wide and service_wide.rate))
        # The ports are part of it: a peer's filters change in number with them (an old one would stay).
        return ("htb", service_wide is not None, tuple(sorted(per_peer)), tuple(sorted((ported or {}).items())))

    def tc_commands(
        self,
        service_wide: Impairment | None,
        per_peer: dict[str, Impairment],
        in_place: bool = False,
        seeds: dict[str | None, int] | None = None,
        ported: dict[str, Ports] | None = None,
    ) -> list[list[str]]:
        """Egress of one container: netem root (+ tbf child for a rate), or htb with a class and a
        netem leaf per peer when any peer has its own settings. `in_place`: the same layout is there
        already, so the htb root is left as it is (htb has no change operation: 'Change operation not
        supported by specified qdisc'); classes, filters and leaves are replaced."""
        tc, seeds = ["tc"], seeds or {}
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
                    *self.netem_args(service_wide, service_wide.rate, seeds.get(None)),
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
        cmds = htb_commands(rates, ported)
        if in_place:
            cmds = [c for c in cmds if not (c[1] == "qdisc" and "root" in c)]
        leaves = {None: service_wide, **per_peer}
        minors = {None: 10, **{dest: m for m, dest in enumerate(sorted(per_peer), start=11)}}
        for dest, settings in leaves.items():
            if settings is None:
                continue
            minor = minors[dest]
            cmds.append([*tc, "qdisc", "replace", "dev", DEV, "parent", f"1:{minor}", "handle", f"{minor}:",
                         *self.netem_args(settings, settings.rate, seeds.get(dest))])  # fmt: skip
        return cmds

    def converge(
        self, executor: Executor, service: str, pid: int, plan: EgressPlan, previous: Applied | None, force: bool
    ) -> Applied:
        same_namespace = previous is not None and previous.pid == pid
        if same_namespace and previous.plan == plan and not force:
            return previous
        layout = self.layout(plan.service_wide, plan.per_peer, plan.ports)
        in_place = (
            same_namespace
            and not force
            and self.layout(previous.plan.service_wide, previous.plan.per_peer, previous.plan.ports) == layout
        )
        if not in_place:
            # A new layout starts from an empty root, so no class, filter or leaf of a removed peer stays.
            executor.tc([["tc", "qdisc", "del", "dev", DEV, "root"]], netns_pid=pid, check=False)
        cmds = self.tc_commands(plan.service_wide, plan.per_peer, in_place, plan.seeds, plan.ports)
        if in_place:
            # Every command is a `replace` of a fixed handle: the ones the kernel already holds are
            # no-ops, so only what changed is sent (a live change of one link: one line to the
            # namespace's tc -batch, one netlink message).
            held = self.tc_commands(
                previous.plan.service_wide, previous.plan.per_peer, True, previous.plan.seeds, previous.plan.ports
            )
            cmds = [cmd for cmd in cmds if cmd not in held]
        executor.tc(cmds, netns_pid=pid)
        return Applied(pid, plan)

    @staticmethod
    def carriers(service: str, own_ip: str | None, applied: dict[str, Applied]) -> list[str]:
        return [service]  # everything is on the sender's own egress

    @staticmethod
    def read_back(executor: Executor, service: str, pid: int, applied: Applied | None) -> dict:
        return {**read_back_kernel(executor, pid), "iptables": [], "hooks": 0, "worker": None}
