"""The kernel suite runs INSIDE a User-mode Linux guest (scripts/uml): a real 6.1 kernel with sch_netem,
htb, tbf, u32, NFQUEUE. The controller's own shaping code runs as in the controller (backends, plan,
executor, manager); the only thing replaced is the Docker API, by `Namespaces`: each "container" is a
network namespace on a bridge, with a sleeping process whose PID the executor enters.

Figures measured here (asked vs measured, per backend) go to $LAGLAB_OUT/figures.jsonl for the
side-by-side table (scripts/bench-shaping --uml and the README).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import time
from pathlib import Path

import pytest

from laglab.measurement.stats import percentile
from laglab.platforms import Bridge, LabContainer
from laglab.shaping import backends
from laglab.shaping.executor import Executor
from laglab.shaping.manager import ShapingManager
from laglab.shaping.userspace import chain_name

from ..polling import wait_until

IN_UML = bool(os.environ.get("LAGLAB_OUT")) and Path("/repo").is_dir()
SERVICES = {"mysql-source": "10.77.0.2", "mysql-target": "10.77.0.3", "loadgen": "10.77.0.4"}
# Docker derives a container's MAC from its address: a restarted one keeps it (no stale ARP). Two of
# them are one bit apart (mysql-source ...:02, mysql-target ...:03), as in the lab.
MACS = {s: "02:42:" + ":".join(f"{int(b):02x}" for b in address.split(".")) for s, address in SERVICES.items()}
BRIDGE = "br-lab"


def port(service: str) -> str:
    """A namespace's port on the bridge (the host end of its veth)."""
    return f"v-{service}"[:15]


# The userspace backend's longest tests, run in the kernel backend's guest so that both guests end
# together (CI on 2026-12-07: the kernel guest's share took 271 s, the userspace one's 388 s).
BALANCED = {"test_distributions", "test_gilbert_elliott_loses_in_bursts",
            "test_a_seed_loses_the_same_pings_again_and_another_seed_others"}  # fmt: skip


def in_this_guest(item, guest: str) -> bool:
    """Whether a test runs in this guest of scripts/uml's two (LAGLAB_GUEST): each backend's tests in
    its own guest, but the BALANCED userspace ones in the kernel guest."""
    params = getattr(item, "callspec", None)
    backend = params.params.get("backend") if params else None
    if backend is None:
        return True  # no backend: LAGLAB_SHARED_TESTS says where
    moved = backend == "userspace" and item.originalname in BALANCED
    return (backend == guest and not moved) or (guest == "kernel" and moved)


def pytest_collection_modifyitems(config, items):
    if IN_UML:
        # scripts/uml runs the suite in two guests at once (LAGLAB_GUEST), each test once: each
        # backend's tests in its own guest (in_this_guest), the tests that take no backend in one of
        # them (LAGLAB_SHARED_TESTS=1).
        keep = items
        if os.environ.get("LAGLAB_SHARED_TESTS") == "0":
            keep = [item for item in keep if "backend" in getattr(item, "fixturenames", ())]
        guest = os.environ.get("LAGLAB_GUEST")
        if guest:
            keep = [item for item in keep if in_this_guest(item, guest)]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep
        return
    skip = pytest.mark.skip(reason="runs inside User-mode Linux: scripts/uml (make test runs it)")
    for item in items:
        item.add_marker(skip)


def sh(*argv: str, check: bool = True, timeout: float = 120) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


class Namespaces:
    """service -> LabContainer for namespaces on a bridge: what Containers gives from the Docker API.
    The bridge is in the guest's root namespace, held by a sleeping process as dockerd holds the lab's."""

    project = "laglab"

    def __init__(self):
        self.holders: dict[str, subprocess.Popen] = {}
        self.root = subprocess.Popen(["sleep", "1000000"])  # the bridge's namespace (dockerd's in the lab)
        sh("ip", "link", "add", BRIDGE, "type", "bridge", check=False)
        sh("ip", "addr", "add", "10.77.0.1/24", "dev", BRIDGE, check=False)
        sh("ip", "link", "set", BRIDGE, "up")
        for service in SERVICES:
            self.create(service)

    def create(self, service: str) -> None:
        ns, host_end = f"ns-{service}", port(service)
        sh("ip", "link", "del", host_end, check=False)  # a deleted namespace's veth goes asynchronously
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", host_end, "master", BRIDGE, "up")
        for argv in (
            ["ip", "link", "set", "eth0", "address", MACS[service]],
            ["ip", "addr", "add", f"{SERVICES[service]}/24", "dev", "eth0"],
            ["ip", "link", "set", "eth0", "up"],
            ["ip", "link", "set", "lo", "up"],
        ):
            sh("ip", "netns", "exec", ns, *argv)
        self.holders[service] = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "1000000"])

    def destroy(self, service: str) -> None:
        holder = self.holders.pop(service, None)
        if holder is not None:
            holder.kill()
            holder.wait()
        sh("ip", "netns", "del", f"ns-{service}", check=False)

    def restart(self, service: str) -> None:
        """A container restart: a new namespace with nothing in it, a new PID."""
        self.destroy(service)
        self.create(service)

    def list(self) -> dict[str, LabContainer]:
        return {
            s: LabContainer(s, f"uml-{s}", f"id-{s}", p.pid, SERVICES[s], p.poll() is None)
            for s, p in self.holders.items()
        }

    def owns(self, pid: int) -> bool:
        return any(p.pid == pid and p.poll() is None for p in [*self.holders.values(), self.root])

    def bridge(self) -> Bridge:
        return Bridge(BRIDGE, self.root.pid)

    def pid(self, service: str) -> int:
        return self.holders[service].pid

    def close(self) -> None:
        for service in list(self.holders):
            self.destroy(service)
        sh("ip", "link", "del", BRIDGE, check=False)
        self.root.kill()
        self.root.wait()


@pytest.fixture(scope="session")
def namespaces():
    spaces = Namespaces()
    yield spaces
    spaces.close()


# The backends that shape a kernel (chaos-mesh asks Kubernetes to).
BACKENDS = {name: cls for name, cls in backends.BACKENDS.items() if name in ("kernel", "userspace")}
# The backends this guest runs the per-backend tests with (scripts/uml: one per guest; default both).
GUEST_BACKENDS = [b for b in os.environ.get("LAGLAB_BACKENDS", ",".join(BACKENDS)).split(",") if b in BACKENDS]


def make_manager(name: str, namespaces: Namespaces, state: Path) -> ShapingManager:
    executor = Executor(owns=namespaces.owns)
    backend = backends.UserspaceBackend(python="python3") if name == "userspace" else backends.KernelBackend()
    return ShapingManager(namespaces, executor, backend, state)


@pytest.fixture(params=GUEST_BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def manager(backend, namespaces, tmp_path):
    m = make_manager(backend, namespaces, tmp_path / "shaping.json")
    m.start(interval=0.2)
    yield m
    m.stop(clear_kernel=True)
    m.executor.close()


# --- each test starts with the guest as the first one found it ---
CHAINS = chain_name(Namespaces.project).split("-")[0] + "-"  # the userspace backend's chains, any project's


def misplaced_macs() -> list[str]:
    """The namespaces' MACs the bridge has learned on another namespace's port. netem's corrupt flips a
    bit anywhere in the frame, Ethernet header included (sch_netem.c, netem_enqueue: the qdisc sees
    the frame from its MAC header on), so a corrupted frame from mysql-source (...:02) can carry
    mysql-target's MAC (...:03) as its source: the bridge then sends mysql-target's traffic to
    mysql-source's port until mysql-target speaks again (#51: a connect that timed out, 0 of 20 pings
    received, in the two tests after the corrupt one)."""
    wrong = []
    for line in sh("bridge", "fdb", "show", "br", BRIDGE).splitlines():
        fields = line.split()
        device = fields[fields.index("dev") + 1] if "dev" in fields else None
        wrong += [f"{mac} ({s}'s) on {device}" for s, mac in MACS.items() if fields[:1] == [mac] and device != port(s)]
    return wrong


def leftovers(namespaces: Namespaces, reach: bool = True) -> list[str]:
    """What a test may leave in the guest that changes the next one's packets: qdiscs on a namespace's
    eth0 or a bridge port, NFQUEUE rules, the userspace chain and its hooks, a worker still running, a
    MAC on a wrong port; and every namespace must reach every other (one ping each way)."""
    found = [f"bridge fdb: {m}" for m in misplaced_macs()]
    for service in namespaces.holders:
        qdiscs = [q for q in ns_exec(service, "tc", "qdisc", "show", "dev", "eth0").splitlines() if "noqueue" not in q]
        found += [f"{service} eth0: {q}" for q in qdiscs]
        found += [f"{service}: {r}" for r in ns_exec(service, "iptables-save").splitlines() if "NFQUEUE" in r]
        qdiscs = [q for q in sh("tc", "qdisc", "show", "dev", port(service)).splitlines() if "noqueue" not in q]
        found += [f"{port(service)}: {q}" for q in qdiscs]
    rules = [r for r in sh("iptables-save").splitlines() if r.startswith("-A ") and ("NFQUEUE" in r or CHAINS in r)]
    found += [f"bridge: {r}" for r in rules]
    found += [f"worker: {w}" for w in sh("pgrep", "-af", "laglab.shaping.nfqueue", check=False).splitlines()]
    for a, b in ((a, b) for a in namespaces.holders for b in namespaces.holders if a != b and reach):
        if " 1 received" not in ns_exec(a, "ping", "-n", "-c", "1", "-W", "2", SERVICES[b]):
            found.append(f"{a} does not reach {b}")
    return found


def forget(namespaces: Namespaces) -> None:
    """What the bridge and the namespaces learned from a test's frames, forgotten: the bridge's MAC
    table and every neighbour table (ARP has no checksum: a corrupted reply is taken as it is)."""
    sh("ip", "link", "set", BRIDGE, "type", "bridge", "fdb_flush")
    sh("ip", "neigh", "flush", "dev", BRIDGE, check=False)
    for service in namespaces.holders:
        ns_exec(service, "ip", "neigh", "flush", "dev", "eth0")


def scrub(namespaces: Namespaces) -> None:
    """What leftovers() found, removed, so that one test's failure is that test's alone."""
    for service in namespaces.holders:
        for where in ("root", "ingress"):
            ns_exec(service, "tc", "qdisc", "del", "dev", "eth0", where)
            sh("tc", "qdisc", "del", "dev", port(service), where, check=False)
        for table in ("raw", "mangle", "filter"):
            ns_exec(service, "iptables", "-t", table, "-F")
    sh("pkill", "-f", "laglab.shaping.nfqueue", check=False)
    for line in sh("iptables-save", "-t", "raw").splitlines():
        if line.startswith("-A PREROUTING") and CHAINS in line:
            sh("iptables", "-t", "raw", "-D", *line.split()[1:], check=False)
    for line in sh("iptables-save", "-t", "raw").splitlines():
        if line.startswith(":") and CHAINS in line:
            sh("iptables", "-t", "raw", "-F", line[1:].split()[0], check=False)
            sh("iptables", "-t", "raw", "-X", line[1:].split()[0], check=False)
    forget(namespaces)


@pytest.fixture(autouse=True)
def clean_guest(request):
    """Each test that uses the namespaces starts clean (asserted), and whatever it leaves, failed or not,
    is forgotten or removed after it: its own shaping by its manager's stop (that fixture's teardown
    runs first), the bridge's and the neighbours' tables here; anything else fails this test's teardown
    and is removed, so the next test starts clean."""
    if not IN_UML or "namespaces" not in request.fixturenames:
        yield
        return
    namespaces = request.getfixturevalue("namespaces")
    found = leftovers(namespaces)
    assert not found, f"the guest does not start clean: {found}"
    yield
    forget(namespaces)
    found = leftovers(namespaces, reach=False)  # the next test's start pings every pair
    if found:
        scrub(namespaces)
        pytest.fail(f"the test left the guest changed: {found}")


# --- measuring, from inside the namespaces ---
def bridge_rules(chain: str = "") -> dict:
    """The userspace backend's chain in the bridge's namespace and the PREROUTING hooks into it."""
    chain = chain or chain_name(Namespaces.project)
    rules = sh("iptables", "-t", "raw", "-S", chain, check=False)
    hooks = sh("iptables", "-t", "raw", "-S", "PREROUTING", check=False)
    return {
        "rules": [line for line in rules.splitlines() if line.startswith("-A ")],
        "hooks": sum(1 for line in hooks.splitlines() if line.endswith(f"-j {chain}")),
    }


def ns_exec(service: str, *argv: str, timeout: float = 120, check: bool = False) -> str:
    return sh("ip", "netns", "exec", f"ns-{service}", *argv, timeout=timeout, check=check)


def ping(src: str, dst: str, count: int = 50, interval: float = 0.02, user_time: bool = True) -> dict:
    """RTTs in ms (ping -U: user-space timestamps, which see a hold on either side) and the loss,
    duplicate and total counts of one ping run."""
    argv = ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "3"]
    if user_time:
        argv.append("-U")
    out = ns_exec(src, *argv, SERVICES[dst], timeout=count * (interval + 3) + 30)
    times = [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]
    dups = out.count("(DUP!)")
    received = re.search(r"(\d+) received", out)
    sent = re.search(r"(\d+) packets transmitted", out)
    return {
        "times": times,
        "sent": int(sent.group(1)) if sent else count,
        "received": int(received.group(1)) if received else 0,
        "duplicates": dups,
        "median": statistics.median(times) if times else None,
        "p95": percentile(times, 95),
        "p99": percentile(times, 99),
        "mean": statistics.fmean(times) if times else None,
        "stdev": statistics.pstdev(times) if len(times) > 1 else None,
        "output": out,
    }


def iperf3(src: str, dst: str, seconds: int = 4, streams: int = 1) -> float:
    """Mbit/s received, src -> dst (iperf3, first second omitted)."""
    server = subprocess.Popen(["ip", "netns", "exec", f"ns-{dst}", "iperf3", "-s", "-1", "-p", "5201"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not ns_exec(dst, "ss", "-Hltn", "sport = :5201").strip():
            assert time.monotonic() < deadline, "iperf3 server did not listen"
            time.sleep(0.05)
        out = ns_exec(src, "iperf3", "-c", SERVICES[dst], "-p", "5201", "-t", str(seconds), "-O", "1",
                      "-P", str(streams), "-J", timeout=seconds + 60)  # fmt: skip
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        server.kill()
        server.wait()


def record(figure: str, backend: str, **values) -> None:
    """One measured figure for the side-by-side table."""
    out = os.environ.get("LAGLAB_OUT")
    if not out:
        return
    with open(Path("/repo") / out / "figures.jsonl", "a") as f:
        f.write(json.dumps({"figure": figure, "backend": backend, **values}) + "\n")


# --- frames as a bridge port saw them ---
ECHO_FRAME = 98  # bytes of one echo request of ping's default 56 data bytes: Ethernet 14, IPv4 20, ICMP 64


class Frames:
    """tcpdump on one bridge port, one direction ("in": what the namespace sent; "out": what the bridge
    handed it), every frame unfiltered (a filter would miss the corrupted ones), written as it comes
    (-U), each frame handed to tcpdump as it comes (--immediate-mode: else libpcap takes them from the
    kernel a ring block at a time, a block once full or after its timeout, and a file that stood still
    for half a second still had a block to come: a CI run saw 936 of 1000 requests). stop() waits for
    the file to stop growing before it stops tcpdump: its SIGINT drops what is still in the capture
    buffer (seen: 708 of 1903 frames)."""

    def __init__(self, service: str, direction: str, folder: Path):
        self.file = folder / f"{port(service)}-{direction}.pcap"
        argv = ["tcpdump", "-i", port(service), "-Q", direction, "-n", "--immediate-mode", "-U", "-B", "8192",
                "-w", str(self.file)]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started = self.process.stderr.readline()  # "tcpdump: listening on ..." once it captures
        if "listening on" not in started:
            self.process.kill()
            raise RuntimeError(f"tcpdump on {port(service)}: {started.strip()}")

    def stop(self) -> list[bytes]:
        last = [-1]

        def still() -> bool:
            now = self.file.stat().st_size
            same, last[0] = now == last[0], now
            return same

        wait_until(still, timeout=30, interval=0.5, message=f"{self.file.name} to stop growing")
        self.process.send_signal(signal.SIGINT)
        rest = self.process.communicate(timeout=30)[1]
        self.stats = " ".join(rest.split())
        dropped = re.search(r"(\d+) packets? dropped by kernel", rest)
        assert dropped is None or dropped.group(1) == "0", rest  # a capture that missed frames judges nothing
        return pcap_frames(self.file.read_bytes())


def pcap_frames(data: bytes) -> list[bytes]:
    """The frames of a pcap file (the classic format tcpdump -w writes; link type 1, Ethernet)."""
    endian = "<" if data[:4] in (bytes.fromhex("d4c3b2a1"), bytes.fromhex("4d3cb2a1")) else ">"
    assert struct.unpack(endian + "I", data[20:24])[0] == 1, "not Ethernet frames"
    frames, at = [], 24
    while at + 16 <= len(data):
        length = struct.unpack(endian + "I", data[at + 8 : at + 12])[0]
        frames.append(data[at + 16 : at + 16 + length])
        at += 16 + length
    return frames


def checksum_holds(data: bytes) -> bool:
    """RFC 1071: the ones'-complement sum of the 16-bit words, checksum field included, is all ones."""
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def mac_bytes(service: str) -> bytes:
    return bytes.fromhex(MACS[service].replace(":", ""))


def echo_request_intact(frame: bytes, src: str, dst: str) -> bool:
    """An echo request from src to dst with no bit flipped: both MACs and the ethertype as sent, and the
    IPv4 header's and ICMP's checksums hold (a one-bit flip anywhere else fails one of them)."""
    ip, icmp = frame[14:34], frame[34:]
    return (
        len(frame) == ECHO_FRAME
        and frame[:6] == mac_bytes(dst)
        and frame[6:12] == mac_bytes(src)
        and frame[12:14] == b"\x08\x00"
        and checksum_holds(ip)
        and ip[9] == 1
        and ip[12:16] == socket.inet_aton(SERVICES[src])
        and ip[16:20] == socket.inet_aton(SERVICES[dst])
        and icmp[0] == 8
        and checksum_holds(icmp)
    )


def checksums_fail(frame: bytes) -> bool:
    """A frame the receiver's stack drops whoever it reaches: its IPv4 header's or ICMP's checksum fails."""
    return not (checksum_holds(frame[14:34]) and checksum_holds(frame[34:]))
