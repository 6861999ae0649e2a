"""The iptables chains the lab writes in the bridge's namespace (the host's, on Docker): the userspace
backend's in the raw table (shaping/userspace.py) and the link counters' in mangle (counters.py). One
way to remove them: when the controller stops, and from `make down` (`python -m laglab.netfilter
remove <project>`, in a one-off container on the host's network), so nothing of the lab stays in the
host's iptables after a controller that was killed."""

from __future__ import annotations

import sys

from .executor import Executor


def remove_chains(executor: Executor, pid: int | None, table: str, chain: str) -> None:
    """Every PREROUTING hook into `chain` (whatever bridge it names), then the chain and its own
    sub-chains (`<chain>-N`), flushed first so that none is still referenced when deleted."""
    hooks = executor.run(["iptables", "-t", table, "-S", "PREROUTING"], netns_pid=pid, check=False)
    for line in hooks.splitlines():
        words = line.split()
        if words[:2] == ["-A", "PREROUTING"] and words[-2:] == ["-j", chain]:
            executor.run(["iptables", "-t", table, "-D", *words[1:]], netns_pid=pid, check=False)
    listed = executor.run(["iptables", "-t", table, "-S"], netns_pid=pid, check=False)
    chains = [w[1] for w in (line.split() for line in listed.splitlines())
              if w[:1] == ["-N"] and (w[1] == chain or w[1].startswith(f"{chain}-"))]  # fmt: skip
    for name in chains:
        executor.run(["iptables", "-t", table, "-F", name], netns_pid=pid, check=False)
    for name in chains:
        executor.run(["iptables", "-t", table, "-X", name], netns_pid=pid, check=False)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "remove":
        print("usage: python -m laglab.netfilter remove <compose project>", file=sys.stderr)
        return 2
    from . import counters
    from .shaping import userspace

    executor = Executor()
    remove_chains(executor, None, "raw", userspace.chain_name(argv[1]))
    remove_chains(executor, None, "mangle", counters.chain_name(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
