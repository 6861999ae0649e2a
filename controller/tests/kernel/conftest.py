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
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from laglab.executor import Executor
from laglab.platforms import Bridge, LabContainer
from laglab.shaping import backends
from laglab.shaping.manager import ShapingManager
from laglab.shaping.userspace import chain_name
from laglab.stats import percentile

from ..polling import wait_until  # noqa: F401 - the suite imports it from here

IN_UML = bool(os.environ.get("LAGLAB_OUT")) and Path("/repo").is_dir()
SERVICES = {"mysql-source": "10.77.0.2", "mysql-target": "10.77.0.3", "loadgen": "10.77.0.4"}
BRIDGE = "br-lab"


def pytest_collection_modifyitems(config, items):
    if IN_UML:
        # scripts/uml runs the suite in two guests at once, one per backend (LAGLAB_BACKENDS); the tests
        # that take no backend run in one of them (LAGLAB_SHARED_TESTS=1), so each test runs once.
        if os.environ.get("LAGLAB_SHARED_TESTS") == "0":
            keep = [item for item in items if "backend" in getattr(item, "fixturenames", ())]
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
        ns, host_end = f"ns-{service}", f"v-{service}"[:15]
        sh("ip", "link", "del", host_end, check=False)  # a deleted namespace's veth goes asynchronously
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", host_end, "master", BRIDGE, "up")
        for argv in (
            # Docker derives a container's MAC from its address: a restarted one keeps it (no stale ARP)
            [
                "ip",
                "link",
                "set",
                "eth0",
                "address",
                "02:42:" + ":".join(f"{int(b):02x}" for b in SERVICES[service].split(".")),
            ],
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
