"""The userspace backend (kernels without sch_netem): delay, jitter and loss by NFQUEUE workers
(nfqueue.py) holding packets ON THE LAB'S BRIDGE, in the namespace that holds it (dockerd's), where
br_netfilter shows every packet between two lab containers to iptables. Rates by htb on the sender.

Why there (measured, see the README's Backends section): on the sender's egress TCP Small Queues
starves TCP; on the receiver's INPUT the kernel has already time-stamped the packet, so plain ping and
tcpdump in the receiver do not see the delay; in FORWARD (after conntrack) a new flow's second packet
clashes with its first one's unconfirmed conntrack entry. In the raw table's PREROUTING, before
conntrack, the packet has not reached the receiver's namespace at all: every tool sees the delay.

Layout in the bridge's namespace: one chain `LAGLAB-<crc32(project)>` in the raw table, hooked into
PREROUTING for the lab's bridge only; per receiver, rules matched on source and destination send its
packets to the receiver's own queue (a number derived from the project and the service, the same after
a restart); one worker per receiver bound to that queue. `--queue-bypass`: with no worker bound (a
killed controller) packets pass unshaped, never blackholed. The chain is rewritten whole when it
differs from what it should be, and removed on a clear, a normal stop and `make down`
(`python -m laglab.shaping.userspace remove <project>` on the host network).
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import zlib

from laglab.platforms import Bridge
from laglab.shaping.backend import DEV, Applied, htb_commands, read_back_kernel
from laglab.shaping.executor import Executor
from laglab.shaping.params import Direction
from laglab.shaping.plan import Entry, NamespacePlan, build, seed_links

QUEUE_BASE, QUEUE_SPAN = 1000, 60000


def chain_name(project: str) -> str:
    return f"LAGLAB-{zlib.crc32(project.encode()):08x}"


def queue_numbers(project: str, services: list[str]) -> dict[str, int]:
    """service -> NFQUEUE number: from crc32(project/service), the next free one on a collision (in
    sorted order), so a restarted controller binds the same queues."""
    taken: dict[str, int] = {}
    used: set[int] = set()
    for service in sorted(services):
        number = QUEUE_BASE + zlib.crc32(f"{project}/{service}".encode()) % QUEUE_SPAN
        while number in used:
            number = QUEUE_BASE + (number - QUEUE_BASE + 1) % QUEUE_SPAN
        used.add(number)
        taken[service] = number
    return taken


def receiver_rules(chain: str, bridge: str, plan: NamespacePlan, queue: int) -> list[str]:
    """What sends packets to one receiver into its queue: per source address, then any source ("*")."""
    if not plan.hold or plan.address is None:
        return []
    # In the order `iptables -S` prints them, so the read-back compares equal: addresses, interface,
    # protocol and its match (`-p tcp -m multiport --ports 3306,4567:4568`), target.
    target = f"-j NFQUEUE --queue-num {queue} --queue-bypass"
    out = []
    for source in sorted(s for s in plan.hold if s != "*") + (["*"] if "*" in plan.hold else []):
        addresses = (f"-s {source}/32 " if source != "*" else "") + f"-d {plan.address}/32 -i {bridge}"
        ports = plan.ports.get(source)
        if not ports:
            out.append(f"-A {chain} {addresses} {target}")
            continue
        for protocol in ports.protocols:
            out.append(f"-A {chain} {addresses} -p {protocol} -m multiport --ports {ports.multiport()} {target}")
    return out


def restore_input(chain: str, rules: list[str]) -> str:
    """The chain replaced atomically by `iptables-restore --noflush` (a declared chain is flushed)."""
    return "\n".join(["*raw", f":{chain} - [0:0]", *rules, "COMMIT"]) + "\n"


def worker_rules(plan: NamespacePlan) -> str:
    """The worker's rules: per source, its impairments and, in a seeded run, its link's seed."""
    rules = {
        source: {**hold.to_wire(), **({"seed": plan.seeds[source]} if source in plan.seeds else {})}
        for source, hold in sorted(plan.hold.items())
    }
    return json.dumps(rules, sort_keys=True)


def apply_userspace_tc(executor: Executor, pid: int, plan: NamespacePlan, previous: NamespacePlan | None) -> None:
    """Rate classes on a container's egress. Same layout: change class rates in place (no queue is
    dropped); new layout: rebuild from an empty root so no stale class or filter of a removed peer stays."""
    delete = [["tc", "qdisc", "del", "dev", DEV, "root"]]
    if not plan.rates:
        if previous is None or previous.rates:
            executor.tc(delete, netns_pid=pid, check=False)
        return
    if previous is not None and previous.rates and set(previous.rates) == set(plan.rates):
        cmds = [c for c in htb_commands(plan.rates) if c[1] == "class"]
        executor.tc([[*cmd[:2], "change", *cmd[3:]] for cmd in cmds], netns_pid=pid)
        return
    executor.tc(delete, netns_pid=pid, check=False)
    executor.tc(htb_commands(plan.rates), netns_pid=pid)


def _wait_ready(proc, timeout: float) -> None:
    """Until the worker says it is bound to its queue: before that, --queue-bypass lets packets through
    unshaped, so a request is answered only once it is in effect."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        raise OSError(f"the shaping worker did not start within {timeout:g}s (exit {proc.poll()})")


READY_TIMEOUT = 15.0  # a worker says it is bound to its queue within this


class Workers:
    """The userspace workers (nfqueue.py), one per receiver, in the bridge's namespace: started with the
    receiver's rules, told a change over their pipe (only a change), stopped when nothing is held."""

    def __init__(self, python: str):
        self.python = python
        self.running: dict[str, tuple[int, subprocess.Popen]] = {}  # receiver -> (queue, worker)
        self.sent: dict[str, str] = {}  # receiver -> the rules its worker has (only a change is sent)

    def ensure(self, executor: Executor, service: str, bridge: Bridge, queue: int, rules: str) -> None:
        """The receiver's worker holds `rules`: sent over its pipe when it runs, started when not."""
        current = self.running.get(service)
        if current and current[0] == queue and current[1] is not None and current[1].poll() is None:
            if self.sent.get(service) == rules:
                return  # nothing changed for this receiver: its worker (and its links' state) is left alone
            try:
                current[1].stdin.write(rules + "\n")
                current[1].stdin.flush()
                self.sent[service] = rules
                return
            except (BrokenPipeError, OSError):
                pass
        self.stop(service)
        proc = executor.spawn(
            [self.python, "-m", "laglab.shaping.nfqueue", "--queue", str(queue), "--rules", rules],
            bridge.pid,
            talks=True,
        )
        self.running[service] = (queue, proc)
        self.sent[service] = rules
        if executor.dry_run:  # a dry run's process says nothing
            return
        try:
            _wait_ready(proc, READY_TIMEOUT)
        except OSError:
            self.stop(service)
            raise

    def stop(self, service: str) -> None:
        """The receiver's worker lets its held packets go and exits."""
        self.sent.pop(service, None)
        current = self.running.pop(service, None)
        if not current or current[1] is None:
            return
        proc = current[1]
        try:
            proc.stdin.close()  # the worker lets its held packets go and exits
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=5)
        finally:
            if proc.stdout is not None:
                proc.stdout.close()


class UserspaceBackend:
    name = "userspace"

    def __init__(self, python: str = "python"):
        self.python = python
        self.pool = Workers(python)
        self.workers = self.pool.running  # receiver -> (queue, worker): what the reconciler and tests read
        self.platform = None
        self.project = "laglab"
        self.fragments: dict[str, list[str]] = {}  # receiver -> its rules in the chain
        self.written: str | None = None  # the chain as last written (None: read it back first)
        self.warm: set[str] = set()  # receivers whose worker runs before it holds anything (prepare)
        self._batch: bool | None = None  # inside begin()/commit(): the chain is written once, at commit
        self.seeded: int | None = None  # the run's seed: each link's draws from its own seeded generator

    def attach(self, platform) -> None:
        """The lab's containers: the project (chain and queue names) and the bridge's namespace."""
        self.platform = platform
        self.project = platform.project

    @property
    def chain(self) -> str:
        return chain_name(self.project)

    def bridge(self) -> Bridge:
        return self.platform.bridge()

    @staticmethod
    def unsupported(entry: Entry) -> tuple[str, str] | None:
        if entry.shaping.rate and entry.direction is not Direction.EGRESS:
            return "rate", (
                "a rate applies to what a service sends; to limit what it receives, put the rate on each "
                "sender's link to it (PUT /api/shaping/<sender> with its rate and this service as peer)"
            )
        return None

    def plan(self, entries: list[Entry], ips: dict[str, str]) -> dict[str, NamespacePlan]:
        plans = build(entries, ips)
        for service, number in queue_numbers(self.project, list(plans)).items():
            plans[service].queue = number
        seed_links(plans, ips, self.seeded, "hold")
        return plans

    def seed(self, seed: int | None, executor: Executor) -> str | None:
        """Loss, jitter and the other drawn decisions from a generator per link seeded from
        `seed` (None: the host's randomness again). Always taken: the worker is ours."""
        self.seeded = seed
        return None

    def converge(
        self, executor: Executor, service: str, pid: int, plan: NamespacePlan, previous: Applied | None, force: bool
    ) -> Applied:
        if previous is not None and previous.pid != pid:
            previous = None  # restarted container: a new namespace with nothing in it
            self.pool.stop(service)
        bridge = self.bridge() if plan.hold or self.fragments.get(service) or force else None
        if bridge is not None:
            self.fragments[service] = receiver_rules(self.chain, bridge.name, plan, plan.queue)
            self._chain_changed(executor, bridge, force)
        rules = worker_rules(plan)
        if plan.hold:
            self.pool.ensure(executor, service, bridge, plan.queue, rules)
        elif service in self.warm and service in self.workers:
            self.pool.ensure(executor, service, self.bridge(), plan.queue, rules)  # idle, ready
        else:
            self.pool.stop(service)
        if previous is None or force or previous.plan.rates != plan.rates:
            apply_userspace_tc(executor, pid, plan, None if force else (previous.plan if previous else None))
        return Applied(pid, plan, {"rules": rules, "host": self.fragments.get(service, [])})

    def prepare(self, executor: Executor, service: str, plan: NamespacePlan, warm: bool) -> None:
        """A worker for `service`'s queue started before any packet is held (a worker's start is a
        Python process: 150-300 ms, most of a first change's time), then idle until rules come."""
        if warm:
            self.warm.add(service)
            self.pool.ensure(executor, service, self.bridge(), plan.queue, worker_rules(plan))
        else:
            self.warm.discard(service)
            if not plan.hold:
                self.pool.stop(service)

    def release(self, executor: Executor, service: str, applied: Applied) -> None:
        self.pool.stop(service)
        if self.fragments.pop(service, None):
            self._chain_changed(executor, self.bridge(), force=False)

    def begin(self) -> None:
        """One convergence of several receivers: their rules go into the chain in one write at commit
        (each write is an nsenter + iptables-restore, tens of ms on a busy machine)."""
        self._batch = False

    def commit(self, executor: Executor, force: bool) -> None:
        pending, self._batch = self._batch, None
        if pending:
            self._write_chain(executor, self.bridge(), force)

    def _chain_changed(self, executor: Executor, bridge: Bridge, force: bool) -> None:
        if self._batch is None:
            self._write_chain(executor, bridge, force)
        else:
            self._batch = True

    @staticmethod
    def carriers(service: str, own_ip: str | None, applied: dict[str, Applied]) -> list[str]:
        """Its own namespace (rates) and each receiver holding packets from it (or from any source)."""
        return [service] + [s for s, a in applied.items() if s != service and own_ip in a.plan.hold]

    def read_back(self, executor: Executor, service: str, pid: int, applied: Applied | None) -> dict:
        worker = self.workers.get(service)
        out = read_back_kernel(executor, pid)
        host = self.host_rules(executor)
        address = applied.plan.address if applied else None
        # The rules on the lab's bridge that hold what this service receives, and the hooks into the chain.
        out["iptables"] = [r for r in host["rules"] if address and f"-d {address}/32 " in r]
        out["hooks"] = host["hooks"]
        out["worker"] = (
            None
            if not worker or worker[1] is None
            else {
                "pid": worker[1].pid,
                "queue": worker[0],
                "running": worker[1].poll() is None,
                "rules": json.loads(applied.state["rules"]) if applied and applied.state else {},
            }
        )
        return out

    def host_rules(self, executor: Executor) -> dict:
        """The chain's rules and the number of PREROUTING hooks into it, as the bridge's namespace holds them."""
        try:
            bridge = self.bridge()
        except RuntimeError:
            return {"rules": [], "hooks": 0}
        chain = executor.run(["iptables", "-t", "raw", "-S", self.chain], netns_pid=bridge.pid, check=False)
        hooks = executor.run(["iptables", "-t", "raw", "-S", "PREROUTING"], netns_pid=bridge.pid, check=False)
        return {
            "rules": [line for line in chain.splitlines() if line.startswith("-A ")],
            "hooks": sum(1 for line in hooks.splitlines() if line.split() == hook_spec(bridge, self.chain, "-A")),
        }

    def healthy(self) -> bool:
        return not any(proc is not None and proc.poll() is not None for _, proc in self.workers.values())

    def stop(self) -> None:
        for service in list(self.workers):
            self.pool.stop(service)

    # --- the chain in the bridge's namespace, and the workers ---
    def _write_chain(self, executor: Executor, bridge: Bridge, force: bool) -> None:
        """The chain as every receiver's rules say; no rules at all: no chain and no hook."""
        rules = [rule for service in sorted(self.fragments) for rule in self.fragments[service]]
        if not rules:
            if force or self.written != "":
                remove_chain(executor, bridge, self.chain)
                self.written = ""
            return
        wanted = restore_input(self.chain, rules)
        if force or self.written is None:
            # Read back what the namespace holds (a restarted controller, a chain deleted behind our back).
            held = self.host_rules(executor)
            if held["rules"] == rules and held["hooks"] == 1:
                self.written = wanted
        if wanted != self.written or force:
            had_chain = bool(self.written)
            if wanted != self.written:
                executor.run(["iptables-restore", "--noflush"], netns_pid=bridge.pid, stdin=wanted)
                self.written = wanted
            if force or not had_chain:  # a new chain needs its hook; a rewritten one has it already
                self._ensure_hook(executor, bridge)

    def _ensure_hook(self, executor: Executor, bridge: Bridge) -> None:
        present = executor.run(["iptables", "-t", "raw", "-S", "PREROUTING"], netns_pid=bridge.pid)
        hooks = [line for line in present.splitlines() if line.split() == hook_spec(bridge, self.chain, "-A")]
        if not hooks:
            executor.run(["iptables", "-t", "raw", *hook_spec(bridge, self.chain, "-I")[:2], "1",
                          *hook_spec(bridge, self.chain, "-I")[2:]], netns_pid=bridge.pid)  # fmt: skip
        for _ in hooks[1:]:  # never two hooks into the chain
            executor.run(["iptables", "-t", "raw", *hook_spec(bridge, self.chain, "-D")], netns_pid=bridge.pid)


def hook_spec(bridge: Bridge, chain: str, action: str) -> list[str]:
    """The PREROUTING rule that sends the bridge's packets into the chain, with iptables' action."""
    return [action, "PREROUTING", "-i", bridge.name, "-j", chain]


def remove_chain(executor: Executor, bridge: Bridge | None, chain: str) -> None:
    """Every hook into the chain (whatever bridge it names), then the chain itself."""
    pid = bridge.pid if bridge is not None else None
    hooks = executor.run(["iptables", "-t", "raw", "-S", "PREROUTING"], netns_pid=pid, check=False)
    for line in hooks.splitlines():
        words = line.split()
        if words[:2] == ["-A", "PREROUTING"] and words[-2:] == ["-j", chain]:
            executor.run(["iptables", "-t", "raw", "-D", *words[1:]], netns_pid=pid, check=False)
    executor.run(["iptables", "-t", "raw", "-F", chain], netns_pid=pid, check=False)
    executor.run(["iptables", "-t", "raw", "-X", chain], netns_pid=pid, check=False)


def main(argv: list[str]) -> int:
    """`python -m laglab.shaping.userspace remove <project>`: run by `make down` in a one-off container on
    the host's network (the bridge's namespace), so nothing of the lab stays in the host's iptables."""
    if len(argv) != 2 or argv[0] != "remove":
        print("usage: python -m laglab.shaping.userspace remove <compose project>", file=sys.stderr)
        return 2
    remove_chain(Executor(), None, chain_name(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
