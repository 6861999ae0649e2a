"""The userspace backend (kernels without sch_netem): delay, jitter and loss by an NFQUEUE worker
(nfqueue.py) on the RECEIVER's INPUT (iptables chain LAGLAB, matched by source address): holding
packets on the sender's egress would starve TCP (TCP Small Queues). Rates by htb on the sender.
The backend owns its workers: one per receiving container, settings changed in place over a pipe."""

from __future__ import annotations

import io
import json
import select
import subprocess

from ..executor import Executor
from .backend import CHAIN, DEV, Applied, htb_commands, read_back_kernel
from .params import Shaping
from .plan import Entry, NamespacePlan, build


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


def _wait_ready(proc, timeout: float) -> None:
    """Until the worker says it is bound to its queue: before that, --queue-bypass lets packets through
    unshaped, so a request is answered only once it is in effect."""
    if isinstance(proc.stdout, io.StringIO):  # dry run
        return
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        raise OSError(f"the shaping worker did not start within {timeout:g}s (exit {proc.poll()})")


class UserspaceBackend:
    name = "userspace"
    READY_TIMEOUT = 15.0

    def __init__(self, python: str = "python"):
        self.python = python
        self.workers: dict[str, tuple[int, subprocess.Popen]] = {}

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
    def plan(entries: list[Entry], ips: dict[str, str]) -> dict[str, NamespacePlan]:
        return build(entries, ips)

    def converge(
        self, executor: Executor, service: str, pid: int, plan: NamespacePlan, previous: Applied | None, force: bool
    ) -> Applied:
        if previous is not None and previous.pid != pid:
            previous = None  # restarted container: a new namespace with nothing in it
            self._stop_worker(service)
        rules, chain = worker_rules(plan), iptables_restore_input(plan)
        if previous is None or force or previous.state["chain"] != chain:
            executor.run(["iptables-restore", "--noflush"], netns_pid=pid, stdin=chain)
            self._ensure_jump(executor, pid)
        if plan.hold:
            self._ensure_worker(executor, service, pid, rules)
        else:
            self._stop_worker(service)
        if previous is None or force or previous.plan.rates != plan.rates:
            apply_userspace_tc(executor, pid, plan, None if force else (previous.plan if previous else None))
        return Applied(pid, plan, {"rules": rules, "chain": chain})

    def release(self, executor: Executor, service: str, applied: Applied) -> None:
        self._stop_worker(service)

    @staticmethod
    def carriers(service: str, own_ip: str | None, applied: dict[str, Applied]) -> list[str]:
        """Its own namespace (rates, ingress holds) and each receiver holding packets from it."""
        return [service] + [s for s, a in applied.items() if s != service and own_ip in a.plan.hold]

    def read_back(self, executor: Executor, service: str, pid: int, applied: Applied | None) -> dict:
        worker = self.workers.get(service)
        return {
            **read_back_kernel(executor, pid),
            "worker": None
            if not worker or worker[1] is None
            else {
                "pid": worker[1].pid,
                "running": worker[1].poll() is None,
                "rules": json.loads(applied.state["rules"]) if applied and applied.state else {},
            },
        }

    def healthy(self) -> bool:
        return not any(proc is not None and proc.poll() is not None for _, proc in self.workers.values())

    def stop(self) -> None:
        for service in list(self.workers):
            self._stop_worker(service)

    # --- the hook and the workers ---
    @staticmethod
    def _ensure_jump(executor: Executor, pid: int) -> None:
        present = executor.run(["iptables", "-S", "INPUT"], netns_pid=pid)
        jumps = [line for line in present.splitlines() if line.strip() == f"-A INPUT -j {CHAIN}"]
        if not jumps:
            executor.run(["iptables", "-I", "INPUT", "1", "-j", CHAIN], netns_pid=pid)
        for _ in jumps[1:]:  # never two hooks into the chain
            executor.run(["iptables", "-D", "INPUT", "-j", CHAIN], netns_pid=pid)

    def _ensure_worker(self, executor: Executor, service: str, pid: int, rules: str) -> None:
        current = self.workers.get(service)
        if current and current[0] == pid and current[1] is not None and current[1].poll() is None:
            try:
                current[1].stdin.write(rules + "\n")
                current[1].stdin.flush()
                return
            except (BrokenPipeError, OSError):
                pass
        self._stop_worker(service)
        proc = executor.spawn(
            [self.python, "-m", "laglab.shaping.nfqueue", "--queue", "0", "--rules", rules], pid, talks=True
        )
        self.workers[service] = (pid, proc)
        try:
            _wait_ready(proc, self.READY_TIMEOUT)
        except OSError:
            self._stop_worker(service)
            raise

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
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
