"""/metrics text, parsed back with the Prometheus client's own parser."""

from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from laglab.api.metrics import render
from laglab.measurement.lag import LagSample
from laglab.shaping.params import parse_request

from .fakes import fake_lab


def lab_of_state(tmp_path):
    """The lab's state as /metrics reads it: a complete lab of fakes (fakes.fake_lab: the real shaping
    and fault managers over the fake platform) holding two shapings, a partition and a pause; its
    recorder and counters holding their latest figures as their threads leave them; a load running."""
    from laglab.app import Places

    lab = fake_lab(Places(tmp_path / "results", tmp_path, tmp_path / "shaping.json"),
                   load=SimpleNamespace(running=True, rows=[{"qps": 300.0}]))  # fmt: skip
    lab.shaping.put(
        "mysql-source", parse_request({"delay": "125ms", "loss": "0.5%", "rate": "2mbit", "peer": "mysql-target"})
    )
    lab.shaping.put("loadgen", parse_request({"delay": "10ms"}))
    lab.shaping.partition(["mysql-source"], ["mysql-target"])
    lab.faults.settle_timeout = 5
    lab.faults.inject("mysql-target", "pause")
    lab.recorder.samples.append(
        LagSample(
            "t",
            1.0,
            "ok",
            lag_seconds=0.25,
            seconds_behind_source=0,
            transit_seconds=0.2,
            queue_seconds=0.04,
            apply_seconds=0.01,
        )
    )
    lab.counters.latest = [
        {"kind": "link", "service": "mysql-source", "peer": "mysql-target", "tx_bytes": 1000},
        {"kind": "container", "service": "mysql-source", "peer": "", "tx_bytes": 5000, "rx_bytes": 7000},
    ]
    return lab


def samples(text: str) -> dict:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_follow_the_lab_state(tmp_path):
    run = SimpleNamespace(
        status="running",
        plan=SimpleNamespace(scenario=SimpleNamespace(name="latency-sweep")),
        point=SimpleNamespace(index=2),
        id="r1",
    )
    got = samples(render(lab_of_state(tmp_path), {"r1": run}).decode())
    assert got[("laglab_replication_lag_seconds", (("replica", "mysql-target"),))] == 0.25
    assert got[("laglab_seconds_behind_source", (("replica", "mysql-target"),))] == 0
    link = (("peer", "mysql-target"), ("service", "mysql-source"))
    assert got[("laglab_shaping_delay_seconds", link)] == 0.125
    assert got[("laglab_shaping_rate_bits_per_second", link)] == 2e6
    assert got[("laglab_shaping_loss_ratio", link)] == 0.005
    assert got[("laglab_shaping_delay_seconds", (("peer", ""), ("service", "loadgen")))] == 0.01
    assert got[("laglab_link_bytes_total", (("direction", "tx"), *link))] == 1000
    assert got[("laglab_link_bytes_total", (("direction", "rx"), ("peer", ""), ("service", "mysql-source")))] == 7000
    assert got[("laglab_load_qps", ())] == 300.0
    assert got[("laglab_run_info", (("id", "r1"), ("point", "3"), ("scenario", "latency-sweep")))] == 1
    for part, value in (("transit", 0.2), ("queue", 0.04), ("apply", 0.01)):
        assert got[("laglab_replication_lag_split_seconds", (("part", part), ("replica", "mysql-target")))] == value
    assert got[("laglab_faults_active", (("action", "pause"), ("service", "mysql-target")))] == 1
    assert got[("laglab_partitions", ())] == 1
