"""Byte and packet counters per container and per link, sampled once a second into links.csv.

- container rows: the container's eth0 from /proc/<pid>/net/dev (rx/tx bytes and packets).
- link rows (service -> peer): a counting-only iptables chain LAGLAB_ACCT hooked into each
  container's OUTPUT, one rule per peer address: what the service sent to that peer.
Together with lag.csv (same clock) this plots bandwidth used next to lag.
"""

from __future__ import annotations

import threading
import time

from .executor import Executor
from .platforms import Platform
from .results import Fanout, Run, iso

CHAIN = "LAGLAB_ACCT"
COLUMNS = ["time", "epoch", "kind", "service", "peer", "rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]


def read_net_dev(text: str, device: str = "eth0") -> dict | None:
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name.strip() == device:
            f = rest.split()
            return {"rx_bytes": int(f[0]), "rx_packets": int(f[1]), "tx_bytes": int(f[8]), "tx_packets": int(f[9])}
    return None


def parse_acct(text: str) -> dict[str, tuple[int, int]]:
    """`iptables -L LAGLAB_ACCT -n -v -x` -> destination address -> (packets, bytes)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].isdigit() and f[1].isdigit():
            out[f[7].removesuffix("/32")] = (int(f[0]), int(f[1]))
    return out


def acct_rules(peer_ips: list[str]) -> str:
    lines = ["*filter", f":{CHAIN} - [0:0]", *(f"-A {CHAIN} -d {ip}/32" for ip in sorted(peer_ips)), "COMMIT"]
    return "\n".join(lines) + "\n"


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


class Counters:
    def __init__(self, platform: Platform, executor: Executor, run: Run, interval: float = 1.0):
        self.platform, self.executor, self.interval = platform, executor, interval
        self.series = run.series("links.csv", COLUMNS)
        self.latest: list[dict] = []
        self.feed = Fanout("links")  # every sample's rows, as they are taken (scenario runs subscribe)
        self._prepared: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._previous: dict[tuple, dict] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def _prepare(self, service: str, pid: int, peers: tuple[str, ...]) -> None:
        if self._prepared.get(service) == (pid, peers):
            return
        self.executor.run(["iptables-restore", "--noflush"], netns_pid=pid, stdin=acct_rules(list(peers)))
        hooks = self.executor.run(["iptables", "-S", "OUTPUT"], netns_pid=pid)
        if f"-A OUTPUT -j {CHAIN}" not in hooks.splitlines():
            self.executor.run(["iptables", "-I", "OUTPUT", "1", "-j", CHAIN], netns_pid=pid)
        self._prepared[service] = (pid, peers)

    def sample(self) -> list[dict]:
        lab = {s: c for s, c in self.platform.list(max_age=1.0).items() if c.running and c.pid > 1 and c.ip}
        now = time.time()
        stamp = {"time": iso(now), "epoch": round(now, 6)}
        rows = []
        for service, container in sorted(lab.items()):
            try:
                with open(f"/proc/{container.pid}/net/dev") as dev:
                    counts = read_net_dev(dev.read())
            except OSError:
                continue
            if counts:
                rows.append({**stamp, "kind": "container", "service": service, "peer": "", **counts})
            peers = {c.ip: s for s, c in lab.items() if s != service}
            self._prepare(service, container.pid, tuple(sorted(peers)))
            acct = parse_acct(self.executor.run(["iptables", "-L", CHAIN, "-n", "-v", "-x"], netns_pid=container.pid))
            for ip, (packets, sent) in sorted(acct.items()):
                if ip in peers:
                    rows.append(
                        {
                            **stamp,
                            "kind": "link",
                            "service": service,
                            "peer": peers[ip],
                            "tx_bytes": sent,
                            "tx_packets": packets,
                        }
                    )
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
                self.last_error = None
            except Exception as error:  # counting must never take the controller down
                self.last_error = f"{type(error).__name__}: {error}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="link-counters", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
