"""Link counters where the controller enters no namespace (Kubernetes): each lab pod reports its own.

A pod's tools container (the platform's tools(): loadgen's image, which has ss; the official MySQL
image has not) runs one long exec, a loop that prints, once a second between MARK and END lines,
the pod's /proc/net/dev and `ss -Htin` (every TCP socket with its tcp_info). From the newest whole
block the controller makes the rows links.csv has on Docker:

- a container row: the pod's eth0 (rx/tx bytes and packets), as on Docker;
- a link row per peer (service -> peer): `tx_bytes` is what the pod's TCP sockets to the peer's
  address had acknowledged (`bytes_acked`), `rx_bytes` what they received. Unlike Docker's bridge
  counters these are TCP payload bytes, without IP and TCP headers (the Docker lab's bridge counted
  1.0015-1.0035x as much for 2 MB on one connection: tests/integration/test_pod_counters.py), and a socket's bytes leave the sum when it closes (the
  rate after that counts from the drop, as for a counter reset). The replication stream, the load's
  connections and iperf3's are long-lived, which is what the link rows are for.

A pod whose loop cannot start (no tools container, the exec refused) is tried again every
RETRY_SECONDS and its error kept (`errors`); a pod gone is let go.
"""

from __future__ import annotations

import logging
import re
import threading
import time

from laglab.measurement.counters import Sampler, read_net_dev
from laglab.measurement.results import Run, iso

log = logging.getLogger("laglab.measurement.pod_counters")
NAME = "laglab-counters"  # $0 of the loop: what `pkill -f` finds
LOOP = 'while echo MARK; do cat /proc/net/dev; ss -Htin; echo END; sleep "$1"; done'
RETRY_SECONDS = 30.0
SOCKET = re.compile(r"^\S")  # a socket's first line; its tcp_info follows, indented
INFO = re.compile(r"\b(bytes_acked|bytes_received):(\d+)")


def _address(endpoint: str) -> str:
    """'10.0.1.10:3306', '[::ffff:10.0.1.10]:3306' -> '10.0.1.10'."""
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    return host.removeprefix("::ffff:")


def parse_block(text: str) -> tuple[dict | None, dict[str, tuple[int, int]]]:
    """One block of the loop -> (eth0's counters, peer address -> (bytes acked, bytes received))."""
    peers: dict[str, tuple[int, int]] = {}
    peer = None
    for line in text.splitlines():
        fields = line.split()
        if SOCKET.match(line) and "|" not in line and len(fields) >= 4 and ":" in fields[-1]:
            peer = _address(fields[-1])  # ss: [state] recv-q send-q local peer
        elif peer is not None and line[:1].isspace():
            got = dict(INFO.findall(line))
            acked, received = peers.get(peer, (0, 0))
            peers[peer] = (acked + int(got.get("bytes_acked", 0)), received + int(got.get("bytes_received", 0)))
            peer = None
    return read_net_dev(text), peers


class PodStream:
    """One pod's counting loop, in its tools container, read as it prints; `block` is the newest whole one."""

    def __init__(self, platform, service: str, interval: float = 1.0, container: str | None = None):
        """`container`: the one to run in (None: ask the platform's tools())."""
        self.platform, self.service, self.interval, self.container = platform, service, interval, container
        self.block: str | None = None
        self.error: str | None = None
        self._execution = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"counters-{service}", daemon=True)

    def start(self) -> PodStream:
        self._thread.start()
        return self

    def _where(self) -> dict:
        """The exec's container argument: the tools container, or none where it is the service's own."""
        container = self.container or self.platform.tools(self.service)
        return {"container": container} if container else {}

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                argv = ["sh", "-c", LOOP, NAME, f"{self.interval:g}"]
                self._execution = self.platform.exec_stream(self.service, argv, **self._where())
                self._read(self._execution.chunks())
                if not self._stop.is_set():
                    self.error = f"{self.service}: the counting loop ended"
            except Exception as error:  # the next attempt says again if it is still so
                self.error = f"{self.service}: {error}"
            if not self._stop.is_set():
                log.warning("link counters of %s: %s (again in %gs)", self.service, self.error, RETRY_SECONDS)
                self._stop.wait(RETRY_SECONDS)

    def _read(self, chunks) -> None:
        pending = ""
        for chunk in chunks:
            if self._stop.is_set():
                return
            pending += chunk.decode(errors="replace")
            while "\nEND\n" in pending:
                whole, _, pending = pending.partition("\nEND\n")
                self.block = whole.rpartition("MARK\n")[2]
                self.error = None

    def stop(self) -> None:
        self._stop.set()
        execution = self._execution
        socket = getattr(execution, "socket", None)
        if socket is not None:  # a Kubernetes exec: closing it ends the loop (its next echo fails)
            try:
                socket.close(timeout=1)
            except Exception as error:  # stopping anyway
                log.debug("closing %s's counting loop: %s", self.service, error)
        try:  # and whatever still runs of it (a Docker exec outlives its reader)
            self.platform.exec(self.service, ["pkill", "-f", NAME], **self._where())
        except Exception as error:
            log.debug("stopping %s's counting loop: %s", self.service, error)
        self._thread.join(timeout=2)


class PodCounters(Sampler):
    def __init__(self, platform, run: Run, interval: float = 1.0):
        super().__init__(run, interval)
        self.platform = platform
        self.streams: dict[str, PodStream] = {}

    @property
    def errors(self) -> dict[str, str]:
        return {s: stream.error for s, stream in self.streams.items() if stream.error}

    def sample(self) -> list[dict]:
        containers = {s: c for s, c in self.platform.list(max_age=1.0).items() if c.running and c.ip and c.shapeable}
        for service in [s for s in self.streams if s not in containers]:
            self.streams.pop(service).stop()
        for service in containers:
            if service not in self.streams:
                self.streams[service] = PodStream(self.platform, service, self.interval).start()
        now = time.time()
        stamp = {"time": iso(now), "epoch": round(now, 6)}
        by_ip = {c.ip: s for s, c in containers.items()}
        rows = []
        for service, stream in sorted(self.streams.items()):
            if stream.block is None:
                continue
            dev, peers = parse_block(stream.block)
            if dev:
                rows.append({**stamp, "kind": "container", "service": service, "peer": "", **dev})
            for address, (acked, received) in sorted(peers.items()):
                if address in by_ip and by_ip[address] != service:
                    rows.append({**stamp, "kind": "link", "service": service, "peer": by_ip[address],
                                 "tx_bytes": acked, "rx_bytes": received})  # fmt: skip
        return self.publish(rows)

    def problems(self) -> str | None:
        return "; ".join(self.errors.values()) or None

    def stop(self) -> None:
        self._join()
        for stream in self.streams.values():
            stream.stop()
        self.streams.clear()
