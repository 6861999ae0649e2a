"""The one removal of the lab's iptables chains in the bridge's namespace (netfilter.remove_chains):
the hooks into the chain, then the chain and its own sub-chains, nothing of anyone else's."""

from laglab.executor import Executor
from laglab.netfilter import remove_chains

MANGLE = """-P PREROUTING ACCEPT
-N DOCKER-MANGLE
-N LAGLAB-ACCT-0000abcd
-N LAGLAB-ACCT-0000abcd-0
-N LAGLAB-ACCT-0000abcd-1
-N LAGLAB-ACCT-0000abcdef
-A PREROUTING -i br-old -j LAGLAB-ACCT-0000abcd
-A PREROUTING -i br-1234 -j LAGLAB-ACCT-0000abcd
-A PREROUTING -j DOCKER-MANGLE
"""


class ListingExecutor(Executor):
    """A dry run whose `iptables -S` answers as the kernel would with the table above."""

    def run(self, argv, netns_pid=None, check=True, timeout=None, stdin=None):
        super().run(argv, netns_pid=netns_pid, check=check, timeout=timeout, stdin=stdin)
        if argv[-1] == "-S":
            return MANGLE
        if argv[-2:] == ["-S", "PREROUTING"]:
            return "\n".join(line for line in MANGLE.splitlines() if "PREROUTING" in line)
        return ""


def test_hooks_then_the_chain_and_its_sub_chains_and_nothing_else():
    executor = ListingExecutor(dry_run=True)
    remove_chains(executor, None, "mangle", "LAGLAB-ACCT-0000abcd")
    changes = [argv[3:] for argv in executor.ran if argv[3] != "-S"]
    assert changes == [
        ["-D", "PREROUTING", "-i", "br-old", "-j", "LAGLAB-ACCT-0000abcd"],
        ["-D", "PREROUTING", "-i", "br-1234", "-j", "LAGLAB-ACCT-0000abcd"],
        ["-F", "LAGLAB-ACCT-0000abcd"], ["-F", "LAGLAB-ACCT-0000abcd-0"], ["-F", "LAGLAB-ACCT-0000abcd-1"],
        ["-X", "LAGLAB-ACCT-0000abcd"], ["-X", "LAGLAB-ACCT-0000abcd-0"], ["-X", "LAGLAB-ACCT-0000abcd-1"],
    ]  # fmt: skip
    assert all(argv[:3] == ["iptables", "-t", "mangle"] for argv in executor.ran)
