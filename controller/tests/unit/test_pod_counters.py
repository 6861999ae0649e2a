"""Link counters on Kubernetes (laglab/measurement/pod_counters.py): each pod's loop read as it prints, against
a platform that answers as the Kubernetes one does (tools container, exec streams, failures)."""

from __future__ import annotations

import threading

from laglab.measurement import pod_counters
from laglab.measurement.results import Run
from laglab.platforms.base import LabContainer, PlatformError

from ..polling import wait_until

# Seen in the lab's mysql-target (`ss -Htin`, iproute2 6.1), addresses as a pod's.
DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 4035492   15861    0    0    0     0          0         0  4035492   15861    0    0    0     0       0          0
  eth0: {rx} 9000    0    0    0     0          0         0 {tx} 7000    0    0    0     0       0          0
"""
SS = """ESTAB 0      605    10.0.2.10:3306  10.0.3.11:51922
\t bbr wscale:10,10 rto:216 rtt:12.446/18.5 mss:1448 cwnd:211 bytes_sent:3235530 bytes_retrans:105 bytes_acked:{acked} bytes_received:2468950 segs_out:7132 delivered:7109 app_limited
ESTAB 0      0      10.0.2.10:50414 10.0.1.10:3306 \x20
\t bbr wscale:10,10 rto:204 rtt:0.331/0.276 mss:1448 cwnd:27 bytes_sent:3091 bytes_acked:3092 bytes_received:{received} segs_out:3703
ESTAB 0      0      [::ffff:10.0.2.10]:50418 [::ffff:10.0.1.10]:3306
\t cubic rto:204 bytes_acked:8 bytes_received:100 segs_out:3
"""


def block(rx=1000, tx=2000, acked=3234820, received=1376933) -> str:
    return "MARK\n" + DEV.format(rx=rx, tx=tx) + SS.format(acked=acked, received=received) + "END\n"


def test_a_block_gives_the_pods_eth0_and_its_tcp_bytes_per_peer():
    dev, peers = pod_counters.parse_block(block().removeprefix("MARK\n").removesuffix("END\n"))
    assert dev == {"rx_bytes": 1000, "rx_packets": 9000, "tx_bytes": 2000, "tx_packets": 7000}
    # two sockets to 10.0.1.10 (one IPv4-mapped) add up; acked is what the peer got, received what came
    assert peers == {"10.0.3.11": (3234820, 2468950), "10.0.1.10": (3092 + 8, 1376933 + 100)}


class Execution:
    def __init__(self, blocks: list[str], hold: threading.Event):
        self.blocks, self.hold = blocks, hold

    def chunks(self):
        for text in self.blocks:  # split where a chunk may end: anywhere
            yield text[:7].encode()
            yield text[7:].encode()
        self.hold.wait(10)  # the loop goes on printing until stopped


class Platform:
    """As the Kubernetes platform answers: tools() names the container (or fails), exec_stream runs there."""

    def __init__(self):
        self.blocks: dict[str, list[str]] = {}
        self.broken: dict[str, str] = {}
        self.streams: list[tuple[str, list[str], str]] = []
        self.execs: list[tuple[str, list[str], str]] = []
        self.hold = threading.Event()
        self.services = {"mysql-source": "10.0.1.10", "mysql-target": "10.0.2.10", "loadgen": "10.0.3.11"}

    def list(self, max_age=0.0):
        made = {s: LabContainer(s, f"{s}-0", s, 0, ip, True, entered=False) for s, ip in self.services.items()}
        made["controller"] = LabContainer("controller", "c", "c", 0, "10.0.9.9", True, shapeable=False, entered=False)
        return made

    def tools(self, service):
        if service in self.broken:
            raise PlatformError(self.broken[service])
        return "loadgen" if service == "loadgen" else "laglab-tools"

    def exec_stream(self, service, argv, workdir=None, container=None):
        self.streams.append((service, argv, container))
        return Execution(self.blocks.get(service, []), self.hold)

    def exec(self, service, argv, workdir=None, container=None):
        self.execs.append((service, argv, container))
        return 0, b""


def test_each_pod_counts_in_its_tools_container_and_the_rows_are_dockers(tmp_path, monkeypatch):
    monkeypatch.setattr(pod_counters, "RETRY_SECONDS", 0.05)
    platform = Platform()
    platform.blocks["mysql-target"] = [block(acked=1000), block(rx=1500, acked=5000)]
    platform.broken["mysql-source"] = "throughput: laglab-tools in pod mysql-source-0: ErrImagePull: not found"
    counters = pod_counters.PodCounters(platform, Run(tmp_path, "live"), interval=0.05)
    try:
        counters.sample()  # starts a loop per shapeable pod (not the controller's)
        wait_until(
            lambda: counters.streams["mysql-target"].block and "5000" in counters.streams["mysql-target"].block, 5
        )
        rows = counters.sample()
        assert sorted(counters.streams) == ["loadgen", "mysql-source", "mysql-target"]
        assert (
            "mysql-target",
            ["sh", "-c", pod_counters.LOOP, "laglab-counters", "0.05"],
            "laglab-tools",
        ) in platform.streams
        assert ("loadgen", ["sh", "-c", pod_counters.LOOP, "laglab-counters", "0.05"], "loadgen") in platform.streams
        assert [(r["kind"], r["service"], r["peer"], r["tx_bytes"], r.get("rx_bytes")) for r in rows] == [
            ("container", "mysql-target", "", 2000, 1500),
            ("link", "mysql-target", "loadgen", 5000, 2468950),
            ("link", "mysql-target", "mysql-source", 3100, 1377033),
        ]
        # a pod whose tools container cannot run is tried again, its error said
        wait_until(lambda: sum(s[0] == "mysql-source" for s in platform.streams) == 0 and counters.errors, 5)
        assert (
            counters.problems()
            == "mysql-source: throughput: laglab-tools in pod mysql-source-0: ErrImagePull: not found"
        )
        del platform.broken["mysql-source"]
        wait_until(lambda: any(s[0] == "mysql-source" for s in platform.streams), 5)
        # a pod gone is let go, its loop killed by name
        del platform.services["loadgen"]
        counters.sample()
        assert "loadgen" not in counters.streams
        assert ("loadgen", ["pkill", "-f", "laglab-counters"], "loadgen") in platform.execs
    finally:
        platform.hold.set()
        counters.stop()
    assert (counters.series.path.read_text().splitlines()[0].split(",")[:5]) == [
        "time",
        "epoch",
        "kind",
        "service",
        "peer",
    ]


def test_a_scenarios_verify_step_measures_the_rate_in_the_pods_on_kubernetes():
    """measure.verify_link where the controller enters no namespace: iperf3 through the platform's
    tools containers, judged as on Docker; a tools container that cannot run leaves the rate
    unverified with the cluster's words, and the run goes on."""

    from laglab.scenarios.plan import VerifyPlan
    from laglab.scenarios.run import measure
    from laglab.scenarios.schema.scenario import Verify

    class Pods(Platform):
        def running(self, *services, hint=""):
            listed = self.list()
            return [listed[s] for s in services]

        def exec(self, service, argv, workdir=None, container=None):
            self.execs.append((service, argv, container))
            if argv[0] == "ping":
                return 0, b"64 bytes from 10.0.2.10: icmp_seq=1 ttl=64 time=180.2 ms\n" * 20
            if argv[:2] == ["iperf3", "-c"]:
                return 0, b'{"end": {"sum_received": {"bits_per_second": 1950000.0}}}'
            return 0, b"LISTEN 0 5 *:5201 *:*\n" if argv[0] == "ss" else b""

    platform = Pods()
    plan = VerifyPlan("loadgen", "mysql-target", 180.0, 2e6, Verify())
    result = measure.verify_link(platform, None, plan)
    assert result["ok"] and result["rate_ok"] and result["throughput_mbit"] == 1.95, result
    assert (
        "loadgen",
        ["iperf3", "-c", "10.0.2.10", "-p", "5201", "-t", "2", "-P", "1", "-O", "1", "-J"],
        "loadgen",
    ) in platform.execs
    assert ("mysql-target", ["iperf3", "-s", "-1", "-D", "-p", "5201"], "laglab-tools") in platform.execs
    platform.broken["mysql-target"] = "throughput: laglab-tools in pod mysql-target-0: ErrImagePull: not found"
    result = measure.verify_link(platform, None, plan)
    assert result["rate_ok"] is False and result["ok"] is False
    assert result["rate_note"] == platform.broken["mysql-target"]
