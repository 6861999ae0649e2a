"""The Kubernetes link counters' loop (laglab/measurement/pod_counters.py) checked against the Docker lab's
bridge counters, which count every packet on the lab's bridge (iptables, independent of it): loadgen
(whose image has ss, as the tools container has on Kubernetes) runs the very loop, and mysql-source
sends it 2 MB on one connection that stays open."""

from __future__ import annotations

import os
import subprocess
import threading
import time

from laglab.measurement.pod_counters import PodStream, parse_block

from .conftest import wait_until


class Execution:
    """`docker exec`'s output as it comes, as the Kubernetes exec stream gives it."""

    def __init__(self, argv: list[str]):
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def chunks(self):
        with self.process.stdout:
            while chunk := os.read(self.process.stdout.fileno(), 65536):
                yield chunk
        self.process.wait(timeout=10)


class DockerLab:
    """The Docker lab offered to the loop as the Kubernetes platform offers a pod: exec into a
    service's container (docker exec), whose own container is its tools container here."""

    def __init__(self, containers: dict[str, str]):
        self.containers = containers  # service -> container name
        self.started: list[Execution] = []

    def tools(self, service):
        return None

    def exec_stream(self, service, argv):
        self.started.append(Execution(["docker", "exec", self.containers[service], *argv]))
        return self.started[-1]

    def exec(self, service, argv):
        done = subprocess.run(["docker", "exec", self.containers[service], *argv], capture_output=True, timeout=120)
        return done.returncode, done.stdout + done.stderr


def bridge_bytes(api, sender: str, receiver: str) -> tuple[float, int]:
    rows = api.get("/api/links").json()["latest"]
    row = next(r for r in rows if r["kind"] == "link" and r["service"] == sender and r["peer"] == receiver)
    return row["epoch"], row["tx_bytes"]


def test_a_pods_own_loop_counts_what_the_bridge_counts(api, settings):
    listed = api.get("/api/containers").json()["containers"]
    platform = DockerLab({c["service"]: c["container"] for c in listed})
    source_ip = next(c["ip"] for c in listed if c["service"] == "mysql-source")
    stream = PodStream(platform, "loadgen", interval=0.2).start()
    query = threading.Thread(target=platform.exec, args=("loadgen", [
        "mysql", "-h", "mysql-source", "-uroot", f"-p{settings.MYSQL_ROOT_PASSWORD}", "-N", "-e",
        "SELECT REPEAT('x', 2000000); SELECT SLEEP(6)"]), daemon=True)  # fmt: skip
    try:
        wait_until(lambda: stream.block is not None, timeout=15, message="the loop's first block")
        _, before = bridge_bytes(api, "mysql-source", "loadgen")
        query.start()

        def received():
            got = parse_block(stream.block)[1].get(source_ip, (0, 0))[1]
            return got if got >= 2_000_000 else None

        wait_until(received, timeout=10, message="2 MB received by loadgen's socket")
        # Both counters once the answer is whole (SLEEP sends nothing): the bridge's next sample, then
        # the loop's block after it (the loop prints every 0.2 s).
        whole = time.time() + 0.5
        _, after = wait_until(lambda: (b := bridge_bytes(api, "mysql-source", "loadgen"))[0] > whole and b,
                              timeout=5, message="the bridge counters' next sample")  # fmt: skip
        loop_bytes = received()
        # The bridge counts IP packets (headers and the connection's handshake included), the loop TCP payload.
        ratio = (after - before) / loop_bytes
        print(f"bridge {after - before} B, the pod's loop {loop_bytes} B: {ratio:.4f}")
        assert 1.0 <= ratio <= 1.1, (after - before, loop_bytes, ratio)
    finally:
        stream.stop()
        query.join(timeout=10)
        for execution in platform.started:  # the loop was killed in the container: its docker exec ends
            execution.process.wait(timeout=10)
    code, out = platform.exec("loadgen", ["pgrep", "-f", "laglab-counters"])
    assert code == 1, out  # stopped: no loop left behind in the pod
