"""Measuring a link from inside the lab, the way the reference experiments checked their shaping:
RTT with ping (-U: user-space timestamps, so a delay held on the receiving side is seen) and
throughput with iperf3 in both directions, each run in the containers' network namespaces."""

from __future__ import annotations

import contextlib
import json
import re
import statistics
import time

from laglab.deadline import TimedOut, poll
from laglab.measurement.stats import percentile
from laglab.shaping.executor import CommandError, Executor


def ping_stats(output: str, count: int | None = None) -> dict:
    """RTT figures from ping's output; with the `count` sent, `lost`: the sequence numbers that got no
    answer, in order (a seeded run loses the same ones every time)."""
    times = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", output))
    lost = {}
    if count:
        answered = {int(n) for n in re.findall(r"icmp_seq=(\d+) ttl=\d+ time=", output)}
        lost = {"sent": count, "lost": [n for n in range(1, count + 1) if n not in answered]}
    if not times:
        return {"samples": 0, **lost}
    p99 = percentile(times, 99)
    return {
        "samples": len(times),
        "min_ms": times[0],
        "median_ms": round(statistics.median(times), 3),
        "p99_ms": p99,
        "max_ms": times[-1],
        **lost,
    }


def ping_argv(to_ip: str, count: int) -> list[str]:
    return ["ping", "-U", "-n", "-c", str(count), "-i", "0.05", "-W", "5", to_ip]


def measure_rtt(executor: Executor, from_pid: int, to_ip: str, count: int) -> dict:
    out = executor.run(ping_argv(to_ip, count), netns_pid=from_pid, check=False, timeout=count * 6 + 10)
    return ping_stats(out, count)


def rtt_between(platform, executor: Executor, src, to_ip: str, count: int) -> dict:
    """RTT from a service's container: in its network namespace where the controller enters them
    (Docker), else with ping run in it through the platform's exec (Kubernetes: the pod's image
    must have ping; loadgen's has, the official MySQL image has not, and then the answer says so)."""
    if src.entered:
        return measure_rtt(executor, src.pid, to_ip, count)
    code, out = platform.exec(src.service, ping_argv(to_ip, count))
    stats = ping_stats(out.decode(errors="replace"), count)
    if not stats["samples"] and code != 0:
        stats["error"] = f"ping in {src.service}: exit {code}: {out.decode(errors='replace').strip()[-200:]}"
    return stats


IPERF_PORT = 5201
SIDE_CHAIN = "LAGLAB_VERIFY"


def side_traffic_rules(to_ip: str) -> str:
    """A counting-only chain for the sender's OUTPUT: everything it sends to `to_ip`, and of that what goes
    to iperf3's port. What is left is the link's other traffic during the measurement (the replicator's
    own, e.g. DTLE's NATS messages between its agents), which shares the shaped rate with iperf3."""
    return (
        f"*filter\n:{SIDE_CHAIN} - [0:0]\n-A {SIDE_CHAIN} -d {to_ip}/32 -p tcp --dport {IPERF_PORT}\n"
        f"-A {SIDE_CHAIN} -d {to_ip}/32\nCOMMIT\n"
    )


def parse_side_traffic(text: str) -> tuple[int, int] | None:
    """`iptables -L LAGLAB_VERIFY -n -v -x -Z` -> (iperf3 bytes, all bytes), or None if unreadable."""
    counts = [
        int(f[1])
        for f in (line.split() for line in text.splitlines())
        if len(f) >= 2 and f[0].isdigit() and f[1].isdigit()
    ]
    return (counts[0], counts[1]) if len(counts) == 2 else None


def measure_throughput(
    executor: Executor,
    from_pid: int,
    to_pid: int,
    to_ip: str,
    seconds: int,
    reverse: bool,
    streams: int = 1,
    side: dict | None = None,
) -> float | None:
    """Mbit/s received, from -> to (reverse: to -> from), over `streams` parallel TCP streams. `side`
    (forward only): filled with `other_mbit`, the rest of the traffic from -> to during the measurement."""
    server = executor.spawn(["iperf3", "-s", "-1", "-p", str(IPERF_PORT)], to_pid)
    counting = side is not None and not reverse and _count_side_traffic(executor, from_pid, to_ip)
    started = time.monotonic()
    try:
        _wait_listening(executor, to_pid, IPERF_PORT)
        argv = iperf_argv(to_ip, seconds, streams, reverse)
        out = executor.run(argv, netns_pid=from_pid, check=False, timeout=seconds + 31)
        if counting:
            side.update(_side_traffic(executor, from_pid, time.monotonic() - started))
        return iperf_mbit(out)
    finally:
        if counting:
            _uncount_side_traffic(executor, from_pid)
        if server is not None:
            server.kill()
            server.wait(timeout=5)


def iperf_argv(to_ip: str, seconds: int, streams: int, reverse: bool) -> list[str]:
    """The iperf3 client: `streams` TCP streams for `seconds`, JSON out. Leaves out the first second
    (TCP slow start at a high RTT is not the link's rate)."""
    return ["iperf3", "-c", to_ip, "-p", str(IPERF_PORT), "-t", str(seconds), "-P", str(streams), "-O", "1", "-J",
            *(["-R"] if reverse else [])]  # fmt: skip


def iperf_mbit(out: str | bytes) -> float | None:
    """Mbit/s received, from iperf3 -J's output (None when it has no result: it failed)."""
    try:
        return round(json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6, 3)
    except (ValueError, KeyError, TypeError):
        return None


def throughput_in_pods(platform, src, dst, seconds: int, reverse: bool, streams: int = 1) -> float | None:
    """iperf3 between two pods where the controller enters no namespace (Kubernetes): the server in
    the receiving pod, the client in the sending one, each in its pod's tools container (the
    platform's tools(): loadgen's image, sharing the pod's network), through the API's exec. The
    link's other traffic is not counted there (no iptables without NET_ADMIN). PlatformError when the
    tools container cannot run or iperf3's server does not start."""
    from laglab.platforms import PlatformError

    server, client = platform.tools(dst.service), platform.tools(src.service)
    # -D: the server goes to the background and the exec returns; -1: it serves one test and ends.
    code, out = platform.exec(dst.service, ["iperf3", "-s", "-1", "-D", "-p", str(IPERF_PORT)], container=server)
    if code != 0:
        raise PlatformError(
            f"throughput: iperf3 -s in {dst.service}: exit {code}: {out.decode(errors='replace')[-200:]}"
        )
    try:
        with contextlib.suppress(TimedOut):  # not listening: the client's connect error says so
            poll(lambda: platform.exec(dst.service, ["ss", "-Hltn", f"sport = :{IPERF_PORT}"], container=server)[1].strip(),
                 5.0, interval=0.1)  # fmt: skip
        code, out = platform.exec(src.service, iperf_argv(dst.ip, seconds, streams, reverse), container=client)
        return iperf_mbit(out)
    finally:  # a server whose client never came is still waiting
        platform.exec(dst.service, ["pkill", "-x", "iperf3"], container=server)


def _count_side_traffic(executor: Executor, pid: int, to_ip: str) -> bool:
    """Counting is a diagnosis: where iptables refuses, the measurement goes on without it."""
    _uncount_side_traffic(executor, pid)
    try:
        executor.run(["iptables-restore", "--noflush"], netns_pid=pid, stdin=side_traffic_rules(to_ip))
        executor.run(["iptables", "-I", "OUTPUT", "1", "-j", SIDE_CHAIN], netns_pid=pid)
    except CommandError:
        return False
    return True


def _side_traffic(executor: Executor, pid: int, elapsed: float) -> dict:
    counts = parse_side_traffic(
        executor.run(["iptables", "-L", SIDE_CHAIN, "-n", "-v", "-x"], netns_pid=pid, check=False) or ""
    )
    if counts is None or elapsed <= 0:
        return {"other_mbit": None}
    iperf, everything = counts
    return {"other_mbit": round(max(0, everything - iperf) * 8 / 1e6 / elapsed, 3)}


def _uncount_side_traffic(executor: Executor, pid: int) -> None:
    executor.run(["iptables", "-D", "OUTPUT", "-j", SIDE_CHAIN], netns_pid=pid, check=False)
    executor.run(["iptables", "-F", SIDE_CHAIN], netns_pid=pid, check=False)
    executor.run(["iptables", "-X", SIDE_CHAIN], netns_pid=pid, check=False)


def _wait_listening(executor: Executor, pid: int, port: int, timeout: float = 5.0) -> None:
    """Polls until something listens on `port` in `pid`'s namespace (the iperf3 server just spawned)."""
    if executor.dry_run:
        return
    with contextlib.suppress(TimedOut):  # not listening yet: iperf3's own connect error says so
        poll(lambda: executor.run(["ss", "-Hltn", f"sport = :{port}"], netns_pid=pid, check=False).strip(),
             timeout, interval=0.02)  # fmt: skip
