"""Both shaping backends on one real kernel with sch_netem (User-mode Linux, scripts/uml): what the
lab's shaping integration tests check on the Docker lab, here for `kernel` and `userspace` alike,
measured with ping and iperf3 inside the namespaces."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import statistics
import subprocess
import threading
import time

import pytest

from laglab.errors import status_of
from laglab.measurement.stats import percentile
from laglab.shaping.manager import ShapingError
from laglab.shaping.params import parse_request

from ..probes import CONNECT, LISTEN
from .conftest import (
    BACKENDS,
    ECHO_FRAME,
    MACS,
    SERVICES,
    Frames,
    bridge_rules,
    checksums_fail,
    echo_request_intact,
    forget,
    iperf3,
    leftovers,
    mac_bytes,
    make_manager,
    misplaced_macs,
    ns_exec,
    ping,
    port,
    record,
    sh,
    wait_until,
)

SRC, DST, OTHER = "mysql-source", "mysql-target", "loadgen"


def tolerance(asked_ms: float) -> float:
    """|RTT - asked| allowed: 1 ms or 2 % (the lab's target on a real kernel), plus 1.5 ms for User-mode
    Linux itself (its timers and a Python worker in a kernel that runs as a process). The figures go to
    the side-by-side table; the lab's own fidelity is measured on its real kernel by bench-shaping."""
    return max(1.0, 0.02 * asked_ms) + 1.5


def delay_held(got: dict, asked_ms: float) -> bool:
    """A ping run shows the asked delay, judged as physics allows: a busy guest only adds delay, so the
    median may not fall short of what was asked (a delay not in force, or the previous one, does), and
    the quickest reply, the one the host delayed least, shows the link itself. A symmetric bound on the
    median failed a CI run on a busy machine: 42.9 ms for 40 asked, the quickest replies at 40.x."""
    times = got["times"]
    return (
        bool(times) and got["median"] >= asked_ms - tolerance(asked_ms) and min(times) <= asked_ms + tolerance(asked_ms)
    )


def binomial_tolerance(asked: float, packets: int, sigmas: float = 4.0) -> float:
    """|measured - asked| allowed for a ratio of independent draws: 4 sigma of the binomial. The old
    fixed margins were about 3.2 sigma each, six of them a run: about one false failure in a hundred
    CI runs. Any real defect (not applied, applied twice, the wrong way round) is many sigma away."""
    return sigmas * math.sqrt(asked * (1 - asked) / packets)


@pytest.mark.parametrize("one_way_ms", [10, 50, 125])
def test_delay_on_a_link_is_the_rtt_both_ways(manager, backend, one_way_ms):
    manager.put(SRC, parse_request({"delay": f"{one_way_ms}ms", "peer": DST}))
    manager.put(DST, parse_request({"delay": f"{one_way_ms}ms", "peer": SRC}))
    asked = 2 * one_way_ms
    got = ping(SRC, DST, count=60, interval=0.02)
    record("delay", backend, asked_ms=asked, median_ms=got["median"], p95_ms=got["p95"], p99_ms=got["p99"])
    assert got["received"] == 60
    assert delay_held(got, asked), got["times"][:10]
    # No bound on the tail: a busy host only adds delay, so a p95 says how busy the host was as much as
    # what the backend does (#51: the userspace worker's p95 39.4 ms for 20 asked while a package install
    # ran beside the guests, its quickest pings on time). The tail is bench-shaping's figure (recorded).


def test_one_link_only_per_peer_isolation(manager, backend):
    manager.put(SRC, parse_request({"delay": "40ms", "peer": DST}))
    shaped, other = ping(SRC, DST, count=30), ping(SRC, OTHER, count=30)
    record("isolation", backend, asked_ms=40, shaped_ms=shaped["median"], other_ms=other["median"])
    assert delay_held(shaped, 40)
    assert other["median"] < 2.0, "the other link must stay unshaped"


@pytest.mark.parametrize("mbit", [2, 10, 50])
def test_rate_is_what_iperf3_measures(manager, backend, mbit):
    manager.put(OTHER, parse_request({"rate": f"{mbit}mbit", "peer": DST}))
    got = iperf3(OTHER, DST, seconds=4)
    record("rate", backend, asked_mbit=mbit, measured_mbit=round(got, 3))
    assert 0.85 * mbit <= got <= 1.02 * mbit, got


def test_rate_with_delay_layers(manager, backend):
    """netem + tbf (kernel) or hold + htb (userspace) on one service: both act."""
    manager.put(OTHER, parse_request({"delay": "20ms", "rate": "10mbit"}))
    pinged = ping(OTHER, DST, count=20)
    got = iperf3(OTHER, DST, seconds=4)
    record("rate+delay", backend, asked_mbit=10, measured_mbit=round(got, 3), asked_ms=20, median_ms=pinged["median"])
    assert delay_held(pinged, 20), pinged["times"]
    assert 8.0 <= got <= 10.2, got


def test_a_change_is_applied_in_place_without_losing_a_packet(manager, backend):
    manager.put(SRC, parse_request({"delay": "20ms", "peer": DST}))
    result: dict = {}
    pinger = threading.Thread(target=lambda: result.update(ping(SRC, DST, count=300, interval=0.01)))
    pinger.start()
    changes = []
    for delay in ("40ms", "20ms", "60ms", "30ms", "50ms"):
        time.sleep(0.4)
        started = time.monotonic()
        manager.put(SRC, parse_request({"delay": delay, "peer": DST}))
        changes.append(time.monotonic() - started)
    pinger.join()
    lost = result["sent"] - result["received"]
    record("change_in_place", backend, changes=len(changes), lost=lost, control_ms_max=round(1000 * max(changes), 1))
    assert lost == 0, f"{lost} of {result['sent']} pings lost across {len(changes)} live changes"
    assert delay_held(ping(SRC, DST, count=20), 50)


def test_a_change_reaches_the_next_packets(manager, backend):
    """Live control on a real kernel: from put() to the first echo request that sees the new delay (ping
    -D -U, one request about every 1 ms), raises and lowers; as netem, a lowered delay shows on the next packet too. The
    figures go to bench-shaping --uml; the test asks only that every change shows within 0.5 s."""
    manager.put(SRC, parse_request({"delay": "20ms", "peer": DST}))
    # Ten pings at 10 ms started 1 ms apart: one `ping -i 0.002` sends every 10 ms once replies are in
    # flight (iputils' MININTERVAL), and the figure would be its cadence (as scripts/bench-shaping).
    probes = f"for i in 0 1 2 3 4 5 6 7 8 9; do ping -U -D -n -i 0.01 {SERVICES[DST]} & sleep 0.001; done; wait"
    argv = ["ip", "netns", "exec", f"ns-{SRC}", "sh", "-c", probes]
    pinger = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    replies: list[tuple[float, float]] = []  # (when the request left, rtt ms)

    def read():
        for line in pinger.stdout:
            m = re.match(r"^\[(\d+\.\d+)\].*time=([\d.]+) ms", line)
            if m:
                replies.append((float(m.group(1)) - float(m.group(2)) / 1000, float(m.group(2))))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    latencies, answers, missed = [], [], 0
    try:
        wait_until(lambda: len(replies) > 20, 10, message="pings to flow")
        for i in range(16):
            ms = 60 if i % 2 == 0 else 20
            sent = time.time()
            manager.put(SRC, parse_request({"delay": f"{ms}ms", "peer": DST}), readback=False)  # as the API
            answers.append((time.time() - sent) * 1000)
            time.sleep(0.5)
            seen = [left for left, rtt in list(replies) if left >= sent - 0.05 and abs(rtt - ms) <= 5]
            if seen:
                latencies.append((min(seen) - sent) * 1000)
            else:
                missed += 1
    finally:
        os.killpg(pinger.pid, signal.SIGTERM)  # the shell and its pings
        pinger.wait(5)
        reader.join(5)
        pinger.stdout.close()
    record("control_latency", backend, changes=16, missed=missed,
           p50_ms=round(statistics.median(latencies), 1) if latencies else None,
           p99_ms=round(percentile(latencies, 99), 1) if latencies else None,
           answer_p50_ms=round(statistics.median(answers), 1), answer_p99_ms=round(percentile(answers, 99), 1))  # fmt: skip
    assert missed == 0, f"{missed} of 16 changes not seen within 0.5 s ({latencies})"


def test_a_trace_at_100ms_bins_is_in_force_on_time(manager, backend):
    """A trace replayed as the timeline replays it (its links prepared; wait for the row's time, then
    one change of both halves of the link): how long after its time each row was in force
    (ShapingManager.change's own stamp, before the state is saved). The first change starts holding
    the link (the userspace backend writes its chain then: one iptables-restore, ~10 ms on a host,
    100-400 ms in UML), so it is made and timed apart, before the rows' clock starts. Figures to
    bench-shaping --uml; the test asks the rows in force within a bin (100 ms: the median within half
    of one, nine in ten within one) and the link at the last row's delay."""

    def both_halves(delay_ms: int):
        return [(SRC, parse_request({"delay": f"{delay_ms // 2}ms", "peer": DST})),
                (DST, parse_request({"delay": f"{delay_ms // 2}ms", "peer": SRC}))]  # fmt: skip

    manager.prepare([SRC, DST])  # as TimelineRun.prepare, before the window: the userspace workers run
    started = time.time()
    first = (manager.change(both_halves(30)) - started) * 1000
    rows, late = 40, []
    t0 = time.time() + 0.5
    for i in range(rows):
        due = t0 + i * 0.1
        time.sleep(max(0.0, due - time.time()))
        late.append((manager.change(both_halves(20 if i % 2 == 0 else 40)) - due) * 1000)
    record("trace_100ms", backend, rows=rows, first_change_ms=round(first, 1), p50_ms=round(statistics.median(late), 1),
           p99_ms=round(percentile(late, 99), 1), max_ms=round(max(late), 1))  # fmt: skip
    # A busy guest only makes a change later (a CI run: one row 132 ms late, the host itself slow): the
    # rows as a whole are judged, the median within half a bin and nine in ten within a bin.
    assert statistics.median(late) < 50 and percentile(late, 90) < 100, f"rows late by (ms): {sorted(late)[-6:]}"
    assert delay_held(ping(SRC, DST, count=20), 40)


def test_switching_between_service_wide_and_per_peer_layouts(manager, backend):
    manager.put(SRC, parse_request({"delay": "30ms"}))
    assert delay_held(ping(SRC, DST, count=20), 30)
    manager.put(SRC, parse_request({"delay": "60ms", "peer": DST}))  # adds up with the service-wide 30
    assert delay_held(ping(SRC, DST, count=20), 90)
    assert delay_held(ping(SRC, OTHER, count=20), 30)
    manager.delete(SRC, DST)
    assert delay_held(ping(SRC, DST, count=20), 30)
    manager.delete(SRC)
    assert ping(SRC, DST, count=20)["median"] < 2.0
    assert "netem" not in ns_exec(SRC, "tc", "qdisc", "show", "dev", "eth0")
    assert ns_exec(SRC, "tc", "filter", "show", "dev", "eth0").strip() == ""  # no stale u32 filter


def test_plain_ping_sees_the_delay(manager, backend):
    """No -U: the kernel's receive timestamp. The userspace backend holds packets on the bridge, before
    they reach the receiver's namespace, so ping needs no user-space timestamps to see the delay."""
    manager.put(SRC, parse_request({"delay": "40ms", "peer": DST}))
    got = ping(SRC, DST, count=40, interval=0.02, user_time=False)
    record("plain ping", backend, asked_ms=40, median_ms=got["median"], p95_ms=got["p95"])
    assert got["received"] == 40
    assert delay_held(got, 40), got["times"][:10]


def test_clearing_leaves_nothing_behind(manager, backend, namespaces):
    manager.put(SRC, parse_request({"delay": "25ms", "rate": "20mbit", "peer": DST}))
    manager.put(OTHER, parse_request({"loss": "5%"}))
    manager.clear()
    assert ping(SRC, DST, count=20)["median"] < 2.0
    for service in (SRC, DST, OTHER):
        qdiscs = ns_exec(service, "tc", "qdisc", "show", "dev", "eth0")
        assert "netem" not in qdiscs and "htb" not in qdiscs and "tbf" not in qdiscs, (service, qdiscs)
        assert "NFQUEUE" not in ns_exec(service, "iptables", "-S"), service
    assert bridge_rules() == {"rules": [], "hooks": 0}  # nothing left in the bridge's namespace either
    assert manager.reconciler.workers == {}


def test_loss_ratio(manager, backend):
    manager.put(SRC, parse_request({"loss": "20%", "peer": DST}))
    got = ping(SRC, DST, count=1000, interval=0.002)
    ratio = 1 - got["received"] / got["sent"]
    record("loss", backend, asked=0.20, measured=round(ratio, 4), packets=got["sent"])
    assert abs(ratio - 0.20) <= binomial_tolerance(0.20, got["sent"]), ratio  # 0.051


def test_jitter_spreads_the_rtt(manager, backend):
    manager.put(SRC, parse_request({"delay": "50ms", "jitter": "10ms", "peer": DST}))
    got = ping(SRC, DST, count=200, interval=0.05)
    record(
        "jitter",
        backend,
        asked_ms=50,
        asked_jitter_ms=10,
        mean_ms=round(got["mean"], 2),
        stdev_ms=round(got["stdev"], 2),
        iqr_ms=round(percentile(got["times"], 75) - percentile(got["times"], 25), 2),
        median_ms=round(got["median"], 2),
        min_ms=round(min(got["times"]), 2),
    )
    # Judged as physics allows (#51: a mean of 53.0 ms for 50 +- 10 asked failed on a busy host): none
    # early, the quickest at the jitter's low end, the median not short of the middle. Too wide a jitter
    # or none at all fails the spread below; the middle too low fails the median.
    times = got["times"]
    assert min(times) >= 40 - 1.0 and min(times) <= 40 + tolerance(40), sorted(times)[:5]
    assert got["median"] >= 50 - tolerance(50), got["median"]
    # The spread on the interquartile range: uniform +-10 ms gives 10 ms (the userspace backend never
    # reorders a source's packets, a late one holds back the next, which narrows it). A busy guest
    # delays a few pings by scheduler ticks: that moved the standard deviation (7.76 ms in a CI run
    # whose host was busy, 5.7 alone), not the quartiles. Without jitter it is a few tenths of a ms.
    iqr = percentile(times, 75) - percentile(times, 25)
    assert 3.0 <= iqr <= 13.0, iqr


def shortest(got: dict) -> float | None:
    """The shortest RTT of a ping run: what a delay in force is judged on where the guest may be busy.
    A busy guest (two UML guests, a Python worker, on 2 cores) only adds to a ping, never takes from
    it: seen in CI, a 5-ping median of 47.3 ms for 40 asked. Not applied (0.1 ms) or applied twice
    (80 ms) are as far off by the shortest as by the median."""
    return min(got["times"]) if got["times"] else None


def test_duration_reverts_by_itself(manager, backend):
    manager.put(SRC, parse_request({"delay": "40ms", "peer": DST, "duration": "3s"}))
    assert abs(shortest(ping(SRC, DST, count=5)) - 40) <= tolerance(40)
    wait_until(lambda: not manager.desired.entries, 5, message="the entry to expire")
    wait_until(lambda: ping(SRC, DST, count=3)["median"] < 2.0, 5, message="the delay to go")


def test_a_restarted_container_gets_its_shaping_back(manager, backend, namespaces):
    manager.put(SRC, parse_request({"delay": "30ms"}))
    manager.put(DST, parse_request({"delay": "10ms"}))
    namespaces.restart(DST)

    # the supervisor re-applies both ends (a worker in the new namespace takes a moment to start)
    def reapplied():
        rtt = shortest(ping(SRC, DST, count=5))
        return rtt is not None and abs(rtt - 40) <= tolerance(40)

    wait_until(reapplied, 10, message="the re-applied delay")
    got = ping(SRC, DST, count=20)
    assert abs(shortest(got) - 40) <= tolerance(40) and got["received"] == 20, got["times"]


def test_reconcile_after_a_crash_leaves_exactly_the_desired_state(backend, namespaces, tmp_path):
    state = tmp_path / "shaping.json"
    first = make_manager(backend, namespaces, state)
    first.start(interval=0.2)
    first.put(SRC, parse_request({"delay": "35ms", "peer": DST}))
    first._stop.set()  # the controller is killed: no cleanup runs, the kernel keeps what it had
    first._thread.join(timeout=10)  # its supervisor dies with it (else it may start a worker as we kill them)
    first.executor.close()  # its tc -batch children end with it (their stdin closes)
    for _, proc in list(first.reconciler.workers.values()):
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    second = make_manager(backend, namespaces, state)
    second.start(interval=0.2)
    try:
        assert delay_held(ping(SRC, DST, count=20), 35)
        if backend == "userspace":
            held = bridge_rules()
            assert held["hooks"] == 1 and len(held["rules"]) == 1, held  # one hook, one rule: nothing twice
        else:
            assert ns_exec(SRC, "tc", "qdisc", "show", "dev", "eth0").count("netem") == 1
    finally:
        second.stop(clear_kernel=True)
        second.executor.close()


def test_both_backends_answer_the_same_for_the_same_request(namespaces, tmp_path):
    answers = {}
    for name in BACKENDS:
        m = make_manager(name, namespaces, tmp_path / f"{name}.json")
        m.start(interval=0.2)
        try:
            answers[name] = m.put(
                SRC, parse_request({"delay": "30ms", "jitter": "2ms", "loss": "1%", "rate": "5mbit", "peer": DST})
            )["desired"]
        finally:
            m.stop(clear_kernel=True)
            m.executor.close()
    assert answers["kernel"] == answers["userspace"]


# --- netem's vocabulary, on both backends ---
def test_reorder_sends_that_share_ahead(manager, backend):
    manager.put(SRC, parse_request({"delay": "10ms", "reorder": "25%", "peer": DST}))
    got = ping(SRC, DST, count=400, interval=0.002)
    early = sum(1 for t in got["times"] if t < 5.0) / len(got["times"])
    record("reorder", backend, asked=0.25, measured=round(early, 4), packets=got["sent"])
    assert abs(early - 0.25) <= binomial_tolerance(0.25, len(got["times"])), early  # reordered packets skip the delay


def test_distributions(manager, backend):
    for distribution in ("normal", "pareto", "paretonormal"):
        manager.put(SRC, parse_request({"delay": "40ms", "jitter": "8ms", "distribution": distribution, "peer": DST}))
        got = ping(SRC, DST, count=200, interval=0.02)
        record("distribution", backend, distribution=distribution, asked_ms=40, asked_jitter_ms=8,
               mean_ms=round(got["mean"], 2), stdev_ms=round(got["stdev"], 2))  # fmt: skip
        # Robust figures: a busy guest adds a few late replies, which move a mean and a stdev (a CI run:
        # normal, mean 48.2 and stdev 16.2 for 40 +- 8 asked) and hardly a median or the quartiles. For
        # 40 +- 8 the median is 40 (normal) to 37.8 (netem's pareto, alpha 3); the quartiles' spread over
        # 1.349 is 8 (normal) to 3.3 (pareto); with no jitter in force it is about 0.1.
        quartiles = statistics.quantiles(got["times"], n=4)
        spread = (quartiles[2] - quartiles[0]) / 1.349
        assert 34 <= got["median"] <= 46 and 2 <= spread <= 14, (distribution, got["median"], spread)


def test_correlated_jitter(manager, backend):
    """Recorded for both; asserted on the userspace backend only: netem 6.1 takes its correlated draw
    modulo the jitter range, so its neighbouring delays are as far apart as uncorrelated ones."""
    steps = {}
    for correlation in (None, "90%"):
        body = {"delay": "50ms", "jitter": "10ms", "peer": DST, **({"correlation": correlation} if correlation else {})}
        manager.put(SRC, parse_request(body))
        times = ping(SRC, DST, count=200, interval=0.02)["times"]
        # The median step between neighbours: a busy host delays some pings by scheduler ticks, which
        # moved the mean step (#51: 4.92 against 7.26 uncorrelated, with a core kept busy) and hardly
        # the median.
        steps[correlation] = statistics.median(abs(a - b) for a, b in itertools.pairwise(times))
    record("correlation", backend, asked=0.9, median_step_ms=round(steps["90%"], 2),
           uncorrelated_step_ms=round(steps[None], 2))  # fmt: skip
    if backend == "userspace":
        assert steps["90%"] < 0.6 * steps[None], steps


def gilbert_elliott_sigma(p: float, r: float, packets: int) -> float:
    """The standard deviation of the loss ratio over `packets` draws of netem's two-state chain (loss
    in the bad state only): pi(1-pi)/n times (1+lambda)/(1-lambda), lambda = 1-p-r the chain's lag-one
    correlation. Losses come in bursts, so the ratio spreads far wider than a binomial's."""
    pi, lam = p / (p + r), 1 - p - r
    return math.sqrt(pi * (1 - pi) * (1 + lam) / (1 - lam) / packets)


def test_gilbert_elliott_loses_in_bursts(manager, backend):
    p, r, packets = 0.05, 0.25, 4000
    manager.put(SRC, parse_request({"gemodel": {"p": "5%", "r": "25%"}, "peer": DST}))
    got = ping(SRC, DST, count=packets, interval=0.002)
    seqs = {int(m) for m in re.findall(r"icmp_seq=(\d+)", got["output"])}
    lost = [seq not in seqs for seq in range(1, got["sent"] + 1)]
    runs = [len(r) for r in "".join("x" if x else "." for x in lost).split(".") if r]
    ratio, mean_run = sum(lost) / len(lost), statistics.fmean(runs) if runs else 0.0
    # 5 sigma of the chain's formula (0.070 here). Measured over six runs in one guest: kernel 0.1695
    # +- 0.021, userspace 0.165 +- 0.016, against the formula's 0.014: netem's draws in User-mode Linux
    # spread half as much again, and 4 sigma (0.056) failed about one CI run in a hundred. A wrong chain
    # still fails: p and r swapped reads 0.83, a half-lossy bad state 0.083; plain loss fails the runs.
    allowed = 5 * gilbert_elliott_sigma(p, r, packets)
    record("gemodel", backend, asked_ratio=round(p / (p + r), 4), measured=round(ratio, 4), allowed=round(allowed, 4),
           asked_run=1 / r, mean_run=round(mean_run, 2), packets=got["sent"])  # fmt: skip
    assert abs(ratio - p / (p + r)) <= allowed, (ratio, allowed)
    assert 2.5 <= mean_run <= 6.0, mean_run  # runs of 1 / r = 4 packets, where random loss gives 1.2


def test_duplicate(manager, backend):
    manager.put(SRC, parse_request({"duplicate": "10%", "peer": DST}))
    got = ping(SRC, DST, count=1000, interval=0.002)
    ratio = got["duplicates"] / got["sent"]
    record("duplicate", backend, asked=0.10, measured=round(ratio, 4), packets=got["sent"])
    assert abs(ratio - 0.10) <= binomial_tolerance(0.10, got["sent"]), ratio  # 0.038


def test_corrupt_flips_a_bit_in_the_asked_share_of_frames(manager, backend, tmp_path):
    """Judged on the frames themselves (tcpdump on the bridge's ports), each backend where it corrupts:
    netem on the sender's egress, so the frames mysql-source's namespace hands the bridge show it; the
    userspace worker on the bridge, so the echo requests that reach mysql-target's port intact are
    counted against those sent (br_netfilter drops a frame whose IPv4 header fails its checksum on the
    bridge; that one never reaches the port and is counted as corrupted). #51: counting at the
    receiver's stack read 5.4 % for 10 % asked: it cannot see what the bridge dropped, and takes a
    flipped source MAC for intact."""
    manager.put(SRC, parse_request({"corrupt": "10%", "peer": DST}))
    sent, delivered = Frames(SRC, "in", tmp_path), Frames(DST, "out", tmp_path)
    got = ping(SRC, DST, count=1000, interval=0.002)
    requests = [f for f in sent.stop() if len(f) == ECHO_FRAME]
    arrived = [f for f in delivered.stop() if len(f) == ECHO_FRAME]
    assert len(requests) >= 0.95 * got["sent"], (len(requests), got["sent"])  # the capture saw the run
    if backend == "kernel":
        corrupted = sum(not echo_request_intact(f, SRC, DST) for f in requests)
    else:
        assert all(echo_request_intact(f, SRC, DST) for f in requests)  # sent intact: the bridge corrupts
        # By ICMP sequence number: a request the sender's capture holds that never reached the receiver's
        # port intact (one missing from the sender's capture is not counted either way).
        intact = {f[40:42] for f in arrived if echo_request_intact(f, SRC, DST)}
        corrupted = sum(f[40:42] not in intact for f in requests)
    ratio = corrupted / len(requests)
    unanswered = got["sent"] - got["received"]
    record("corrupt", backend, asked=0.10, measured=round(ratio, 4), sent=got["sent"], frames=len(requests),
           arrived=len(arrived), unanswered=unanswered, capture=[sent.stats, delivered.stats])  # fmt: skip
    assert abs(ratio - 0.10) <= binomial_tolerance(0.10, len(requests)), (ratio, len(requests))
    # A frame that fails its IP or ICMP checksum is answered by nobody (a flip in its source MAC still is).
    checked = requests if backend == "kernel" else arrived
    assert unanswered >= sum(checksums_fail(f) for f in checked), (unanswered, got["output"][-300:])


SEND_FRAME = "import socket, sys; s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('eth0', 0)); s.send(bytes.fromhex(sys.argv[1]))"


def test_a_frame_with_another_services_mac_misleads_the_bridge_and_is_forgotten(namespaces):
    """What a corrupted frame can do (a flip in mysql-source's MAC, ...:02, gives mysql-target's, ...:03):
    a frame from mysql-source's namespace with mysql-target's MAC as its source moves that MAC to
    mysql-source's port, and the bridge sends mysql-target's traffic there. The clean-guest check sees
    it, and what the fixture does after each test (forget) undoes it."""
    frame = bytes.fromhex("ff" * 6) + mac_bytes(DST) + bytes.fromhex("88b5") + bytes(46)  # local experimental
    ns_exec(SRC, "python3", "-c", SEND_FRAME, frame.hex(), check=True)
    misled = wait_until(misplaced_macs, 5, 0.05, "the bridge to learn mysql-target's MAC on mysql-source's port")
    assert misled == [f"{MACS[DST]} ({DST}'s) on {port(SRC)}"], misled
    forget(namespaces)
    assert misplaced_macs() == []
    assert leftovers(namespaces) == []


def test_userspace_refuses_a_rate_on_ingress_naming_what_to_do(namespaces, tmp_path):
    m = make_manager("userspace", namespaces, tmp_path / "u.json")
    with pytest.raises(ShapingError) as caught:
        m.put(SRC, parse_request({"rate": "10mbit", "direction": "ingress"}))
    assert status_of(caught.value) == 422 and "put the rate on each sender's link to it" in caught.value.message


def test_the_harness_is_a_netem_kernel():
    assert "netem" in sh("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", check=False) + sh(
        "tc", "qdisc", "show", "dev", "lo"
    )
    sh("tc", "qdisc", "del", "dev", "lo", "root", check=False)


def test_a_seed_loses_the_same_pings_again_and_another_seed_others(manager, backend):
    """#40: two runs with one seed lose the same sequence numbers; two seeds differ. The userspace
    worker draws each link's decisions from its own seeded generator; this guest's tc (iproute2 6.1)
    has no netem `seed`, which the kernel backend says instead of pretending."""

    def lost() -> list[int]:
        manager.put(SRC, parse_request({"loss": "30%", "peer": DST}))
        got = ping(SRC, DST, count=40, interval=0.01)
        manager.clear()  # the next put is a new rule: its generator starts from the seed again
        answered = {int(n) for n in re.findall(r"icmp_seq=(\d+) ttl=\d+ time=", got["output"])}
        return [n for n in range(1, 41) if n not in answered]

    note = manager.seed(1234)
    if backend == "kernel":
        assert note.startswith("not seeded: this host's netem takes no seed") and 'What is "seed"?' in note, note
        manager.put(SRC, parse_request({"loss": "30%", "peer": DST}))
        assert " seed " not in ns_exec(SRC, "tc", "qdisc", "show", "dev", "eth0")  # nothing half-taken
        return
    assert note is None
    first, second = lost(), lost()
    manager.seed(4321)
    other = lost()
    record("seeded loss (pings lost of 40)", backend, seed_1234=len(first), again=len(second), seed_4321=len(other))
    print(f"seed 1234 lost {first}, again {second}; seed 4321 lost {other}")
    assert first == second and 3 <= len(first) <= 25, first  # 30 % of 40, drawn, not a fixed pattern
    assert other != first
    manager.seed(None)


def connect_ms(src: str, dst: str, port: int, count: int = 10) -> list[float]:
    return json.loads(ns_exec(src, "python3", "-c", CONNECT, SERVICES[dst], str(port), str(count), check=True))


def test_ports_shape_only_their_packets(manager, backend):
    """#40.1: 20 ms each way on port 3306 only: a connect to 3306 takes the round trip, one to 3307 and
    a ping do not. Judged as physics allows: a busy guest only adds delay, so the shaped port's quickest
    connect may not come in under the asked RTT, and the unshaped port's quickest shows no hold."""
    listener = subprocess.Popen(["ip", "netns", "exec", f"ns-{DST}", "python3", "-c", LISTEN, "3306", "10"],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
    other_listener = subprocess.Popen(["ip", "netns", "exec", f"ns-{DST}", "python3", "-c", LISTEN, "3307", "10"],
                                      stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert listener.stdout.readline().strip() == other_listener.stdout.readline().strip() == "listening"
        for a, b in ((SRC, DST), (DST, SRC)):
            manager.put(a, parse_request({"delay": "20ms", "peer": b, "ports": [3306], "protocol": "tcp"}))
        shaped, other = connect_ms(SRC, DST, 3306), connect_ms(SRC, DST, 3307)
        ping_ms = ping(SRC, DST, count=10)["times"]
        record("ports: connect ms (3306 shaped, 3307 not, ping)", backend,
               shaped_min=round(min(shaped), 2), other_min=round(min(other), 2), ping_min=round(min(ping_ms), 2))  # fmt: skip
        assert min(shaped) >= 40 - tolerance(40), shaped
        assert min(other) < 20 and min(ping_ms) < 20, (other, ping_ms)
    finally:
        for process in (listener, other_listener):
            process.kill()
            process.wait()
            process.stdout.close()


def test_a_capture_shows_the_delay_where_the_backend_holds_packets(manager, backend, tmp_path):
    """#40.3: `Captures` (what POST /api/captures and a `capture:` step use) with the real tcpdump, 20 ms
    each way, 20 pings. The receiver's capture time minus the send time ping wrote in the payload is the
    one-way delay on both backends. Between the two files: the userspace backend holds packets on the
    bridge, so the receiver sees each 20 ms after the sender's eth0 did; netem holds them on the sender's
    egress before eth0, so both files see a packet at nearly one time."""
    from laglab.measurement.captures import Captures

    from ..capture import echo_requests_sent_at

    for a, b in ((SRC, DST), (DST, SRC)):
        manager.put(a, parse_request({"delay": "20ms", "peer": b}))
    capture = Captures(manager.platform, manager.executor, manager, tmp_path).start(SRC, DST, 60)
    ping(SRC, DST, count=20, interval=0.05)
    capture.stop()
    assert capture.wait(20) and capture.error is None, capture.as_json()
    sent, arrived = (echo_requests_sent_at(sh("tcpdump", "-r", str(capture.folder / f"{s}.pcap"), "-n", "-tt", "-x",
                                              "icmp")) for s in (SRC, DST))  # fmt: skip
    assert len(arrived) == 20 and len(sent) == 20, (len(sent), len(arrived))
    one_way = [1000 * (arrived[k][0] - arrived[k][1]) for k in arrived]
    between = [1000 * (arrived[k][0] - sent[k][0]) for k in arrived]
    record("capture: one-way ms (payload to receiver; sender's file to receiver's)", backend,
           one_way_min=round(min(one_way), 2), between_files_median=round(statistics.median(between), 2))  # fmt: skip
    assert statistics.median(one_way) >= 20 - tolerance(20) and min(one_way) <= 20 + tolerance(20), sorted(one_way)
    if backend == "userspace":
        assert statistics.median(between) >= 20 - tolerance(20) and min(between) <= 20 + tolerance(20), between
    else:
        assert statistics.median(between) < 2.0, between
    rows = (capture.folder / "shaping.csv").read_text()
    assert f"{SRC}->{DST},delay 20ms" in rows and f"{DST}->{SRC},delay 20ms" in rows, rows
