"""Each bottleneck model's prediction (scenarios/analysis/bottleneck.py) against figures whose answer is known:
measured here, published, or seen against a real agent."""

from __future__ import annotations

import pytest

from laglab.scenarios.analysis import bottleneck
from laglab.scenarios.analysis.bottleneck import Tolerance, explain, tcp_bound_mbit


def replication_point(n, binlog, link, slope, goodput=1.93, rtt_ms=250.0, replicator=None, ci=None, **extra):
    return {"point": n, "replicator": replicator or {"kind": "native", "compression": "uncompressed"},
            "verification": {"rtt": {"median_ms": rtt_ms}, "rtt_asked_ms": rtt_ms, "throughput_mbit": goodput},
            "binlog_mbit": binlog, "link_mbit": link, "lag_slope": slope, "lag_slope_ci": ci,
            "load": {"threads": 8, "rate_tps": 0}, **extra}  # fmt: skip


def test_asynchronous_replication_predicts_the_lag_slope_from_binlog_rate_and_goodput():
    # Measured in this lab (2 Mbit/s, 250 ms, native): 50 and 100 TPS held, 200 TPS grew 0.348 s/s.
    summary = {"points": [replication_point(1, 0.719, 0.7735, 0.0), replication_point(2, 1.43, 1.5576, -0.002),
                          replication_point(3, 2.696, 2.0347, 0.348)]}  # fmt: skip
    first, _second, third = explain(summary)
    assert first["bound"] == "load" and first["agrees"] and first["predicted"]["lag_slope"] == 0
    # Wire bytes per binlog byte from the points whose link had room: (1.0758 + 1.0892) / 2.
    assert third["predicted"]["wire_factor"] == pytest.approx(1.083, abs=0.001)
    # 1 - 1.93 / (2.696 x 1.083) = 0.339
    assert third["predicted"]["lag_slope"] == pytest.approx(0.339, abs=0.001)
    assert third["bound"] == "link" and third["agrees"] is True and third["words"].startswith("the link binds")


def test_lag_that_grows_while_the_link_has_room_is_not_the_network():
    # Seen against a real DTLE agent at 2 Mbit/s and 250 ms: at 200 TPS lag grew 0.36 s/s while the
    # link carried 0.98 Mbit/s.
    dtle = {"kind": "dtle", "group_max_size": 1048576}
    summary = {"points": [replication_point(1, 0.5, 0.49, 0.0, replicator=dtle),
                          replication_point(2, 1.0, 0.98, 0.36, replicator=dtle)]}  # fmt: skip
    found = explain(summary)[1]
    assert found["predicted"]["lag_slope"] == 0 and found["agrees"] is False
    assert found["words"].startswith(
        "**not the network**: the link carried 0.98 Mbit/s of its 1.93 Mbit/s while lag grew 0.360 s/s"
    )
    assert "the applier or the replicator bounds this point" in found["words"]


def test_the_tolerance_is_the_scenarios():
    # Lag grew at 0.15 s/s where the link allows 0.284 (factor 1 assumed: one point).
    point = replication_point(1, 2.696, 2.0347, 0.15, ci={"slope": 0.15, "low": 0.14, "high": 0.16})
    found = explain({"points": [point]})[0]
    assert found["agrees"] is False and found["words"].startswith("lag grew slower than the link allows")
    loose = {"points": [point], "bottleneck_tolerance": {"pct": 50.0, "slope": 0.01}}
    assert explain(loose)[0]["agrees"] is True


def test_a_full_link_binds_even_when_lag_grows_faster_than_its_goodput_predicts():
    # Seen here at 141 TPS: predicted 0.062 from iperf3's goodput, measured 0.081 (0.073 to 0.087),
    # the link carrying all of it: the link binds, harder than predicted, not something else.
    summary = {"points": [replication_point(1, 1.4, 1.508, 0.0),
                          replication_point(2, 1.91, 2.0, 0.081, ci={"slope": 0.081, "low": 0.073, "high": 0.087})]}  # fmt: skip
    found = explain(summary)[1]
    assert found["bound"] == "link" and found["agrees"] is True
    assert "steeper than the goodput alone explains" in found["words"] and "not the network" not in found["words"]


def test_without_a_rate_the_tcp_send_buffer_bounds_one_stream_at_distance():
    # 4 MiB / 100 ms = 335.5 Mbit/s per stream; 8 streams 2684 (measured here: 2180 with the defaults).
    assert tcp_bound_mbit(1, 0.1, 4 * 2**20) == pytest.approx(335.544, abs=0.001)
    assert tcp_bound_mbit(8, 0.1, 64 * 2**20) == pytest.approx(42949.673, abs=0.01)
    point = replication_point(1, 400.0, 340.0, 0.15, goodput=None, rtt_ms=100.0)
    found = explain({"points": [point]}, {"tcp_buffers": {"wmem_max": 4 * 2**20}})[0]
    assert found["bound"] == "tcp buffers" and found["predicted"]["capacity_mbit"] == pytest.approx(335.544)
    assert found["predicted"]["lag_slope"] == pytest.approx(1 - 335.544 / 400, abs=0.001) and found["agrees"]
    bigger = explain({"points": [point]}, {"tcp_buffers": {"wmem_max": 64 * 2**20}})[0]
    assert bigger["predicted"]["lag_slope"] == 0 and bigger["agrees"] is False  # then lag should not grow


@pytest.mark.parametrize(
    ("threads", "seconds", "agrees", "start"),
    [(1, 51.671, True, "the round trip binds"), (4, 13.936, True, "the round trip binds"),
     (64, 1.808, False, "**not the round trip**: 1.81 s measured, 2.3 x")],
)  # fmt: skip
def test_a_synchronous_cluster_takes_queries_times_rtt_over_clients(threads, seconds, agrees, start):
    # Percona 2017, Galera with one node 100 ms away, 500 single-row inserts.
    point = {"point": 1, "cluster": {"kind": "galera", "delay_ms": 100.0}, "load_seconds": seconds,
             "load": {"threads": threads, "queries": 500}, "verification": {}}  # fmt: skip
    found = explain({"points": [point]})[0]
    assert found["predicted"]["load_seconds"] == pytest.approx(500 * 0.1 / threads, abs=0.001)
    assert found["agrees"] is agrees and found["words"].startswith(start), found["words"]


@pytest.mark.parametrize(
    ("tps", "bound", "start"),
    [(38.0, "round trip", "the round trip binds: 38 TPS against 4 threads / 100 ms = 40 TPS"),
     (120.0, "load", "**faster than semi-sync allows**"),
     (12.0, "round trip", "under the round-trip bound (12 of 40 TPS)")],
)  # fmt: skip
def test_semi_sync_commits_wait_a_round_trip(tps, bound, start):
    point = replication_point(1, 0.5, 0.55, 0.0, rtt_ms=100.0, tps=tps,
                              replicator={"kind": "native", "semi_sync": True})  # fmt: skip
    point["load"] = {"threads": 4, "rate_tps": 0}
    found = explain({"points": [point]})[0]
    assert found["model"] == "semi-sync replication" and found["predicted"]["max_tps"] == 40.0
    assert found["bound"] == bound and found["words"].startswith(start), found["words"]


def test_a_client_across_the_link_is_bound_by_the_cap_over_its_bytes_per_transaction():
    # 100 Mbit/s to the client, 2 kB (0.016 Mbit) per transaction: at most 6000 TPS.
    def point(tps, carried):
        return {"point": 1, "tps": tps, "qps": tps * 16, "link_mbit": 1.0, "reverse_link_mbit": carried,
                "load": {"threads": 16}, "verification": {"rtt": {"median_ms": 0.1}, "rate_asked_mbit": 100.0,
                                                          "throughput_mbit": 96.0}}  # fmt: skip

    summary = {"link_between": ["loadgen", "mysql-source"], "points": [point(5800.0, 92.8)]}
    found = explain(summary)[0]
    assert found["bound"] == "link" and found["agrees"] and found["predicted"]["max_tps"] == 6000.0, found
    summary["points"] = [point(900.0, 14.4)]  # the link mostly idle: the CPU, not the network
    found = explain(summary)[0]
    assert found["agrees"] is False and found["bound"] == "cpu"
    assert found["words"].startswith("**under every network bound**"), found["words"]


def test_the_report_section_names_the_points_that_disagree():
    summary = {"points": [replication_point(1, 0.5, 0.49, 0.0), replication_point(2, 1.0, 0.98, 0.36)]}
    text = "\n".join(bottleneck.lines(summary))
    assert "**Prediction and measurement disagree in point(s) 2**" in text
    assert "| 1 | asynchronous replication | load | yes | the link has room" in text
    assert f"tolerance of {Tolerance().pct:g} %" in text
