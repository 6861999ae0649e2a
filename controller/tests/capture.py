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
