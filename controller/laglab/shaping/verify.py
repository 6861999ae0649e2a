"""Measuring a link from inside the lab, the way the reference experiments checked their shaping:
RTT with ping (-U: user-space timestamps, so a delay held on the receiving side is seen) and
throughput with iperf3 in both directions, each run in the containers' network namespaces."""

from __future__ import annotations

import json
import re
import statistics
import time

from ..executor import Executor
from ..stats import percentile


def ping_stats(output: str) -> dict:
    times = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", output))
    if not times:
        return {"samples": 0}
    p99 = percentile(times, 99)
    return {
        "samples": len(times),
        "min_ms": times[0],
        "median_ms": round(statistics.median(times), 3),
        "p99_ms": p99,
        "max_ms": times[-1],
    }


def measure_rtt(executor: Executor, from_pid: int, to_ip: str, count: int) -> dict:
    out = executor.run(
        ["ping", "-U", "-n", "-c", str(count), "-i", "0.05", "-W", "5", to_ip],
        netns_pid=from_pid,
        check=False,
        timeout=count * 6 + 10,
    )
    return ping_stats(out)


def measure_throughput(
    executor: Executor, from_pid: int, to_pid: int, to_ip: str, seconds: int, reverse: bool, streams: int = 1
) -> float | None:
    """Mbit/s received, from -> to (reverse: to -> from), over `streams` parallel TCP streams."""
    server = executor.spawn(["iperf3", "-s", "-1", "-p", "5201"], to_pid)
    try:
        _wait_listening(executor, to_pid, 5201)
        argv = [
            "iperf3",
            "-c",
            to_ip,
            "-p",
            "5201",
            "-t",
            str(seconds),
            "-P",
            str(streams),
            # Leave out the first second (TCP slow start at a high RTT is not the link's rate).
            "-O",
            "1",
            "-J",
            *(["-R"] if reverse else []),
        ]
        out = executor.run(argv, netns_pid=from_pid, check=False, timeout=seconds + 31)
        try:
            return round(json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6, 3)
        except (ValueError, KeyError):
            return None
    finally:
        if server is not None:
            server.kill()
            server.wait(timeout=5)


def _wait_listening(executor: Executor, pid: int, port: int, timeout: float = 5.0) -> None:
    """Polls until something listens on `port` in `pid`'s namespace (the iperf3 server just spawned)."""
    if executor.dry_run:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if executor.run(["ss", "-Hltn", f"sport = :{port}"], netns_pid=pid, check=False).strip():
            return
        time.sleep(0.02)
