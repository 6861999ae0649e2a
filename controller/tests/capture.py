"""Packet captures as a support engineer takes them, for the tests and benchmarks that check shaping
independently of the controller: tcpdump in a container's network namespace from a throw-away
container sharing it (`docker run --network container:<name>`, netshoot style), run from the host.

Every container shares the host's clock, so the capture timestamps of the same packet in the
sender's and the receiver's namespaces give its one-way delay.
"""

from __future__ import annotations

import re
import subprocess
import threading

ECHO_REQUESTS = "icmp[icmptype] == icmp-echo"


class Capture:
    """tcpdump -tt on eth0 of `container` for `seconds`; `start()` returns once it is listening."""

    def __init__(self, container: str, seconds: float, bpf: str = ECHO_REQUESTS, image: str = "laglab/loadgen:dev"):
        self.seconds = seconds
        self.argv = ["docker", "run", "--rm", "--network", f"container:{container}", "--cap-add", "NET_RAW",
                     "--cap-add", "NET_ADMIN", image, "timeout", str(seconds), "tcpdump", "-i", "eth0", "-n", "-tt",
                     "-l", "-p", bpf]  # fmt: skip
        self.output = ""
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr:  # tcpdump says "listening on eth0 ..." once the capture runs
            if "listening on" in line:
                self._listening.set()
                break
        self.output, _ = proc.communicate(timeout=self.seconds + 60)
        self._listening.set()

    def start(self, timeout: float = 60.0) -> Capture:
        self._thread.start()
        if not self._listening.wait(timeout):
            raise RuntimeError(f"tcpdump did not start within {timeout:g}s: {' '.join(self.argv)}")
        return self

    def echo_times(self) -> dict[int, float]:
        """ICMP echo request sequence number -> capture time (epoch seconds), once the capture ended."""
        self._thread.join(self.seconds + 90)
        return {
            int(m.group(2)): float(m.group(1)) for m in re.finditer(r"^([\d.]+) IP .*seq (\d+),", self.output, re.M)
        }


def one_way_ms(sent: dict[int, float], arrived: dict[int, float]) -> list[float]:
    """Per packet seen at both ends: arrival minus departure, in ms."""
    return [1000 * (arrived[seq] - sent[seq]) for seq in sent if seq in arrived]


def read_pcap(path, bpf: str = "", image: str = "laglab/loadgen:dev") -> str:
    """`tcpdump -r FILE -n -tt -S [bpf]`: a pcap the lab wrote, read by tcpdump itself (this host has none;
    a throw-away loadgen container with the file's folder mounted read-only). -S: absolute TCP sequence
    numbers, so one segment has one name in both sides' files."""
    from pathlib import Path

    path = Path(path).resolve()
    argv = ["docker", "run", "--rm", "-v", f"{path.parent}:/pcap:ro", image, "tcpdump", "-r", f"/pcap/{path.name}",
            "-n", "-tt", "-S", *bpf.split()]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-1000:]
    return done.stdout


def packet_times(text: str) -> dict[str, float]:
    """Each IP packet of `tcpdump -n -tt -S` output by its line less the time, which is the same in both
    sides' files for the same packet (absolute sequence numbers, TCP's timestamp option, ICMP's id and
    seq), at its first sighting -> capture time (epoch seconds)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^([\d.]+) (IP .*)$", line)
        if match:
            out.setdefault(match.group(2), float(match.group(1)))
    return out


def echo_requests_sent_at(text: str) -> dict[str, tuple[float, float]]:
    """From `tcpdump -n -tt -x icmp` output: each echo request ('id/seq') -> (its capture time, the send
    time ping wrote into its payload). iputils ping puts a struct timeval at the start of the data (on a
    64-bit Linux: tv_sec then tv_usec, 8 bytes each, little-endian on x86); -x dumps from the IP header
    (20 bytes without options), then the ICMP header (8): the timeval is bytes 28-43."""
    out: dict[str, tuple[float, float]] = {}
    current, hexes = None, []

    def done() -> None:
        if current is not None and len(hexes) >= 44:
            data = bytes(hexes)
            sent = int.from_bytes(data[28:36], "little") + int.from_bytes(data[36:44], "little") / 1e6
            out.setdefault(current[0], (current[1], sent))

    for line in text.splitlines():
        head = re.match(r"^([\d.]+) IP .*ICMP echo request, id (\d+), seq (\d+)", line)
        dump = re.match(r"^\s+0x[0-9a-f]+:\s+((?:[0-9a-f]{2,4}\s?)+)", line)
        if dump and current is not None:
            hexes += bytes.fromhex(dump.group(1).replace(" ", ""))
        elif not line.startswith((" ", "\t")):
            done()
            current, hexes = (f"{head.group(2)}/{head.group(3)}", float(head.group(1))) if head else None, []
    done()
    return out
