"""Byte and packet counters per container and per link, sampled once a second into links.csv.

- container rows: the container's eth0 from /proc/<pid>/net/dev (rx/tx bytes and packets): no process.
- link rows (service -> peer): counting-only iptables rules in the lab bridge's namespace (dockerd's),
  where br_netfilter shows every packet between two lab containers: the mangle table's PREROUTING
  jumps to `LAGLAB-ACCT-<crc32(project)>`, which sends each sender's packets to its own chain (`...-N`),
  one rule per receiver. Mangle comes after the raw table, where the userspace backend holds packets, so
  a link's bytes are what crossed it: after the sender's own shaping (rate, kernel netem loss) and the
  userspace backend's loss, when they left the hold. One `iptables-save -c` a second for the whole lab
  (it was one process per container a second: most of the controller's CPU with the cluster profiles up).
  The chains are written whole when the lab's containers change (their counters start again from zero)
  and removed when the controller stops (and by `make down`: `python -m laglab.measurement.counters remove`).
Together with lag.csv (same clock) this plots bandwidth used next to lag.
"""

from __future__ import annotations

import re
import sys
import threading
import time
import zlib

from laglab.measurement.results import Fanout, Run, iso
from laglab.platforms import Bridge, Platform
from laglab.shaping.executor import Executor

COLUMNS = ["time", "epoch", "kind", "service", "peer", "rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]


def read_net_dev(text: str, device: str = "eth0") -> dict | None:
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name.strip() == device:
            f = rest.split()
            return {"rx_bytes": int(f[0]), "rx_packets": int(f[1]), "tx_bytes": int(f[8]), "tx_packets": int(f[9])}
    return None


def chain_name(project: str) -> str:
    return f"LAGLAB-ACCT-{zlib.crc32(project.encode()):08x}"


def acct_rules(chain: str, addresses: list[str]) -> str:
    """The counting chains for these lab addresses, for `iptables-restore --noflush` (declared chains
    are flushed, their counters with them): per sender a chain, in it a rule per receiver, no target."""
    lines = ["*mangle", f":{chain} - [0:0]"]
    senders = sorted(addresses)
    lines += [f":{chain}-{i} - [0:0]" for i in range(len(senders))]
    for i, sender in enumerate(senders):
        lines.append(f"-A {chain} -s {sender}/32 -j {chain}-{i}")
        lines += [f"-A {chain}-{i} -s {sender}/32 -d {receiver}/32" for receiver in senders if receiver != sender]
    return "\n".join([*lines, "COMMIT"]) + "\n"


def parse_acct(chain: str, saved: str) -> dict[tuple[str, str], tuple[int, int]] | None:
    """`iptables-save -c -t mangle` -> (sender, receiver) -> (packets, bytes); None: the chain is not there."""
    if f":{chain} " not in saved:
        return None
    rule = re.compile(rf"^\[(\d+):(\d+)\] -A {re.escape(chain)}-\d+ -s ([\d.]+)/32 -d ([\d.]+)/32$", re.M)
    return {(m.group(3), m.group(4)): (int(m.group(1)), int(m.group(2))) for m in rule.finditer(saved)}


def hook_spec(bridge: Bridge, chain: str, action: str) -> list[str]:
    return [action, "PREROUTING", "-i", bridge.name, "-j", chain]


def remove_acct(executor: Executor, pid: int | None, chain: str) -> None:
    """Every hook into the chain (whatever bridge it names), then its chains."""
    hooks = executor.run(["iptables", "-t", "mangle", "-S", "PREROUTING"], netns_pid=pid, check=False)
    for line in hooks.splitlines():
        words = line.split()
        if words[:2] == ["-A", "PREROUTING"] and words[-2:] == ["-j", chain]:
            executor.run(["iptables", "-t", "mangle", "-D", *words[1:]], netns_pid=pid, check=False)
    listed = executor.run(["iptables", "-t", "mangle", "-S"], netns_pid=pid, check=False)
    chains = [
        w[1] for w in (line.split() for line in listed.splitlines()) if w[:1] == ["-N"] and w[1].startswith(chain)
    ]
    for name in chains:
        executor.run(["iptables", "-t", "mangle", "-F", name], netns_pid=pid, check=False)
    for name in chains:
        executor.run(["iptables", "-t", "mangle", "-X", name], netns_pid=pid, check=False)


def with_rates(row: dict, previous: dict | None) -> dict:
    """The row plus bytes per second since the previous sample of the same container or link."""
    out = dict(row)
    for key in ("rx_bytes", "tx_bytes"):
        rate_key = key.replace("_bytes", "_bytes_per_second")
        out[rate_key] = None
        if previous and row.get(key) is not None and previous.get(key) is not None and row["epoch"] > previous["epoch"]:
            # A counter that went down was reset (the counting chain or the container re-created):
            # what it counts now is all that passed since.
            delta = counter_delta(previous[key], row[key])
            out[rate_key] = round(delta / (row["epoch"] - previous["epoch"]), 1)
    return out


def counter_delta(before: int, after: int) -> int:
    """Bytes counted between two readings of one counter; a counter that went down was reset to 0."""
    return after - before if after >= before else after


class Sampler:
    """What every link counter shares: links.csv, the newest rows with their rates, the feed scenario
    runs subscribe to, and a thread that samples once a `interval` (the subclass's sample())."""

    thread_name = "link-counters"

    def __init__(self, run: Run, interval: float = 1.0):
        self.interval = interval
        self.series = run.series("links.csv", COLUMNS)
        self.latest: list[dict] = []
        self.feed = Fanout("links")  # every sample's rows, as they are taken (scenario runs subscribe)
        self._previous: dict[tuple, dict] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def sample(self) -> list[dict]:
        raise NotImplementedError

    def problems(self) -> str | None:
        """What kept the last sample from being whole, though it was taken (None: nothing)."""
        return None

    def publish(self, rows: list[dict]) -> list[dict]:
        """One sample's rows (sorted here): into links.csv, to the feed, and as `latest` with rates."""
        rows.sort(key=lambda r: (r["service"], r["kind"] != "container", r["peer"]))
        for row in rows:
            self.series.append(row)
        self.feed.publish(rows)
        self.latest = [with_rates(row, self._previous.get((row["kind"], row["service"], row["peer"]))) for row in rows]
        self._previous = {(row["kind"], row["service"], row["peer"]): row for row in rows}
        return rows

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
                self.last_error = self.problems()
            except Exception as error:  # counting must never take the controller down
                self.last_error = f"{type(error).__name__}: {error}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()

    def _join(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        self.series.close()


class Counters(Sampler):
    """The Docker lab's: container rows from /proc/<pid>/net/dev, link rows from the bridge's chains."""

    def __init__(self, platform: Platform, executor: Executor, run: Run, interval: float = 1.0):
        super().__init__(run, interval)
        self.platform, self.executor = platform, executor
        self.chain = chain_name(platform.project)
        self._prepared: tuple[Bridge, tuple[str, ...]] | None = None  # the bridge and addresses counted

    def _prepare(self, bridge: Bridge, addresses: tuple[str, ...]) -> None:
        if self._prepared == (bridge, addresses):
            return
        self.executor.run(
            ["iptables-restore", "--noflush"], netns_pid=bridge.pid, stdin=acct_rules(self.chain, list(addresses))
        )
        hooks = self.executor.run(["iptables", "-t", "mangle", "-S", "PREROUTING"], netns_pid=bridge.pid)
        present = [line for line in hooks.splitlines() if line.split() == hook_spec(bridge, self.chain, "-A")]
        if not present:
            spec = hook_spec(bridge, self.chain, "-I")
            self.executor.run(["iptables", "-t", "mangle", *spec[:2], "1", *spec[2:]], netns_pid=bridge.pid)
        for _ in present[1:]:  # never two hooks: every packet would count twice
            self.executor.run(["iptables", "-t", "mangle", *hook_spec(bridge, self.chain, "-D")], netns_pid=bridge.pid)
        self._prepared = (bridge, addresses)

    def sample(self) -> list[dict]:
        containers = {s: c for s, c in self.platform.list(max_age=1.0).items() if c.running and c.pid > 1 and c.ip}
        now = time.time()
        stamp = {"time": iso(now), "epoch": round(now, 6)}
        rows = []
        for service, container in sorted(containers.items()):
            try:
                with open(f"/proc/{container.pid}/net/dev") as dev:
                    counts = read_net_dev(dev.read())
            except OSError:
                continue
            if counts:
                rows.append({**stamp, "kind": "container", "service": service, "peer": "", **counts})
        by_ip = {c.ip: s for s, c in containers.items()}
        bridge = self.platform.bridge()
        self._prepare(bridge, tuple(sorted(by_ip)))
        counted = parse_acct(
            self.chain, self.executor.run(["iptables-save", "-c", "-t", "mangle"], netns_pid=bridge.pid)
        )
        if counted is None:  # removed behind our back (a make down, a person): written again next time
            self._prepared = None
            counted = {}
        for (sender, receiver), (packets, sent) in sorted(counted.items()):
            if sender in by_ip and receiver in by_ip:
                rows.append({**stamp, "kind": "link", "service": by_ip[sender], "peer": by_ip[receiver],
                             "tx_bytes": sent, "tx_packets": packets})  # fmt: skip
        return self.publish(rows)

    def stop(self) -> None:
        """Stops sampling and removes the counting chains from the bridge's namespace."""
        self._join()
        if self._prepared is not None:
            try:
                remove_acct(self.executor, self._prepared[0].pid, self.chain)
            except Exception as error:  # stopping: say so and go on
                self.last_error = f"removing the counting chains failed: {error}"
            self._prepared = None


def main(argv: list[str]) -> int:
    """`python -m laglab.measurement.counters remove <project>`: run by `make down` in a one-off container on the
    host's network (the bridge's namespace), so no counting chain of the lab stays in the host's iptables."""
    if len(argv) != 2 or argv[0] != "remove":
        print("usage: python -m laglab.measurement.counters remove <compose project>", file=sys.stderr)
        return 2
    remove_acct(Executor(), None, chain_name(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
