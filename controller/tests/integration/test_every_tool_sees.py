"""Shaping as a support engineer checks it, with the tools they use and nothing of the lab's own:
plain `ping` (the kernel's receive timestamp, no -U) from inside the containers, `tcpdump` in the
receiving container's namespace against one in the sender's (one-way delay from the two captures of
the same packets), and TCP throughput under delay (8 streams, and one stream window-bound rather than
collapsed). Whichever backend runs; on this project's machines the userspace one."""

import re
import statistics
import subprocess

import pytest

from tests.capture import Capture, one_way_ms


@pytest.fixture(autouse=True)
def clean(api):
    api.delete("/api/shaping", timeout=60)
    yield
    api.delete("/api/shaping", timeout=60)


def put(api, service, body):
    response = api.put(f"/api/shaping/{service}", json=body, timeout=60)
    assert response.status_code == 200, response.text


def plain_ping(settings, src: str, dst: str, count: int = 100) -> list[float]:
    """Plain ping (no -U) from `src`'s network namespace: a throw-away container sharing it, since the
    server images have no ping (what a support engineer does with netshoot)."""
    argv = ["docker", "run", "--rm", "--network", f"container:{settings.COMPOSE_PROJECT_NAME}-{src}-1",
            "laglab/loadgen:dev", "ping", "-n", "-c", str(count), "-i", "0.02", "-W", "3", dst]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False).stdout
    times = [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]
    assert len(times) == count, out[-500:]
    return times


# Judged as physics allows: a busy host only adds delay. A 2-core machine (itself a VM) that also runs
# the lab's servers, recorder, load and the cluster profiles sees some pings come 1-20 ms late, and in a
# busy hour most of them (a CI run: the median 2 ms over for 60 asked, with the quickest on time). So
# none may come early (a hold point that plain ping does not see reads ~0.1 ms; one undone reads 0), the
# median may not fall short, and the quickest reply, the one the host delayed least, shows the link
# itself (a delay applied twice reads double). The fidelity target (p99 within 1 ms or 2 %) is
# bench-shaping's to measure and print.


def within(times: list[float], asked: float) -> None:
    """None early, the median not short of what was asked, the quickest within 1 ms or 2 % of it (ping
    prints whole ms >= 100)."""
    allowed = max(1.0, 0.02 * asked)
    median = statistics.median(times)
    assert min(times) >= asked - allowed, sorted(times)[:3]
    assert median >= asked - allowed, (median, sorted(times)[:3])
    assert min(times) <= asked + allowed, (sorted(times)[:3], median)


def test_plain_ping_sees_a_service_delay_from_every_container(api, settings):
    put(api, "mysql-target", {"delay": "60ms"})  # everything mysql-target sends, its echo replies too
    for src in ("loadgen", "mysql-source"):
        within(plain_ping(settings, src, "mysql-target"), 60.0)
    unshaped = plain_ping(settings, "loadgen", "mysql-source", count=20)
    assert statistics.median(unshaped) < 2.0, "a service's delay stays on that service's packets"


def test_plain_ping_sees_a_link_delay_both_ways(api, settings):
    put(api, "loadgen", {"delay": "30ms", "peer": "mysql-target"})
    put(api, "mysql-target", {"delay": "30ms", "peer": "loadgen"})
    within(plain_ping(settings, "loadgen", "mysql-target"), 60.0)
    assert statistics.median(plain_ping(settings, "loadgen", "mysql-source", count=20)) < 2.0


def test_tcpdump_in_the_receiver_sees_the_packets_arrive_late(api, settings):
    put(api, "loadgen", {"delay": "40ms", "peer": "mysql-target"})  # loadgen -> mysql-target only
    captures = [
        Capture(f"{settings.COMPOSE_PROJECT_NAME}-{service}-1", 15).start() for service in ("loadgen", "mysql-target")
    ]
    plain_ping(settings, "loadgen", "mysql-target", count=100)
    sent, arrived = (c.echo_times() for c in captures)
    one_way = one_way_ms(sent, arrived)
    assert len(one_way) >= 95, (len(sent), len(arrived))
    within(one_way, 40.0)


def test_tcp_keeps_its_throughput_under_delay(api):
    put(api, "loadgen", {"delay": "50ms", "peer": "mysql-target"})
    put(api, "mysql-target", {"delay": "50ms", "peer": "loadgen"})

    def verify(streams):
        body = {"from": "loadgen", "to": "mysql-target", "count": 20, "seconds": 5, "streams": streams}
        response = api.post("/api/verify", json=body, timeout=180)
        assert response.status_code == 200, response.text
        return response.json()["measured"]

    eight = verify(8)
    # A busy host only adds delay (a CI run with the cluster profiles up: median 103, quickest 101 ms): the
    # median may not fall short of the asked RTT, and the quickest ping shows the link itself.
    assert eight["rtt"]["median_ms"] >= 98.0 and eight["rtt"]["min_ms"] <= 102.0, eight["rtt"]
    assert eight["forward_mbit"] >= 1000, eight  # 8 streams through the workers at 100 ms RTT
    one = verify(1)
    # One stream is bound by its window at 100 ms (hundreds of Mbit/s here), not collapsed as a hold on
    # the sender's egress collapses it (TCP Small Queues: 0.4 Mbit/s).
    assert one["forward_mbit"] >= 100, one


def test_make_downs_removal_leaves_no_rule_of_the_project_on_the_host():
    """What `make down` runs after the containers are gone (scripts/down), for a project whose
    controller was killed while shaping: its chain and every hook into it go, other rules stay."""
    from laglab.shaping.userspace import chain_name

    chain, other = chain_name("laglab-it-down"), chain_name("laglab-it-other")

    def raw(*argv):
        return subprocess.run(["iptables", "-t", "raw", *argv], capture_output=True, text=True, check=True).stdout

    for name in (chain, other):
        raw("-N", name)
        raw("-A", name, "-i", "br-it0", "-d", "10.99.0.3/32", "-j", "NFQUEUE", "--queue-num", "5", "--queue-bypass")
        raw("-I", "PREROUTING", "1", "-i", "br-it0", "-j", name)
    raw("-I", "PREROUTING", "1", "-i", "br-it1", "-j", chain)  # two hooks, as a crash could leave
    try:
        subprocess.run(
            ["docker", "run", "--rm", "--network", "host", "--cap-add", "NET_ADMIN", "laglab/controller:dev",
             "python", "-m", "laglab.shaping.userspace", "remove", "laglab-it-down"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        listed = raw("-S")
        assert chain not in listed, listed
        assert f"-A PREROUTING -i br-it0 -j {other}" in listed and f"-N {other}" in listed
    finally:
        subprocess.run(["docker", "run", "--rm", "--network", "host", "--cap-add", "NET_ADMIN",
                        "laglab/controller:dev", "python", "-m", "laglab.shaping.userspace", "remove",
                        "laglab-it-other"], capture_output=True, timeout=120, check=False)  # fmt: skip
        assert other not in raw("-S")


def ping_run(settings, count=2000) -> tuple[dict[int, float], int]:
    """Plain ping from loadgen's namespace to mysql-target, 2 ms apart: (seq -> RTT of the first reply,
    duplicate replies)."""
    argv = ["docker", "run", "--rm", "--network", f"container:{settings.COMPOSE_PROJECT_NAME}-loadgen-1",
            "laglab/loadgen:dev", "ping", "-n", "-c", str(count), "-i", "0.002", "-W", "2", "mysql-target"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False).stdout
    seqs: dict[int, float] = {}
    for m in re.finditer(r"icmp_seq=(\d+) .*time=([\d.]+) ms", out):
        seqs.setdefault(int(m.group(1)), float(m.group(2)))
    return seqs, out.count("(DUP!)")


COUNT = 3000  # pings 2 ms apart per impairment


@pytest.mark.parametrize(
    ("body", "figure", "asked", "tolerance"),
    [
        ({"loss": "20%"}, "lost", 0.20, 0.03),
        ({"loss": "20%", "correlation": "50%"}, "lost", 0.20, 0.04),  # correlated: the ratio still holds
        ({"duplicate": "10%"}, "duplicated", 0.10, 0.03),
        ({"corrupt": "10%"}, "lost", 0.10, 0.03),  # a flipped bit fails the receiver's checksum: no reply
        ({"delay": "10ms", "reorder": "25%"}, "early", 0.25, 0.04),
        # bursts make the ratio vary more: ~80 bad periods in 3000 packets, 2 points of standard deviation
        ({"gemodel": {"p": "5%", "r": "25%"}}, "lost", 0.05 / 0.30, 0.06),
    ],
)
def test_each_impairment_is_what_was_asked_on_the_lab(api, settings, body, figure, asked, tolerance):
    put(api, "loadgen", {**body, "peer": "mysql-target"})
    seqs, dups = ping_run(settings, COUNT)
    measured = {
        "lost": 1 - len(seqs) / COUNT,
        "duplicated": dups / COUNT,
        "early": sum(1 for t in seqs.values() if t < 5.0) / max(1, len(seqs)),
    }[figure]
    assert abs(measured - asked) <= tolerance, (body, measured)
    if "gemodel" in body:  # bursts: runs of 1 / r = 4 lost packets, where random loss gives 1.2
        lost = "".join("." if seq in seqs else "x" for seq in range(1, COUNT + 1))
        runs = [len(r) for r in lost.split(".") if r]
        assert 2.5 <= statistics.fmean(runs) <= 6.0, runs[:20]
