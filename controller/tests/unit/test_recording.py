"""Defect: long points silently lost data (lag and link samples were copied out of bounded buffers
after the point). A point's recording streams every sample to the run's files as it arrives."""

import csv
import threading

import pytest

from laglab.measurement.counters import with_rates
from laglab.measurement.lag import LagSample
from laglab.measurement.results import Run
from laglab.scenarios.run.recording import PointRecording


@pytest.fixture
def series(tmp_path):
    """CSV series in a run folder, closed after the test."""
    run, opened = Run(tmp_path, "t"), []

    def make(name, columns):
        opened.append(run.series(name, columns))
        return opened[-1]

    make.path = run.path
    yield make
    for s in opened:
        s.close()


def lag(epoch, value, status="ok"):
    return LagSample(time="t", epoch=epoch, status=status, lag_seconds=value)


def link(epoch, sent, service="mysql-source", peer="mysql-target"):
    return {"time": "t", "epoch": epoch, "kind": "link", "service": service, "peer": peer, "tx_bytes": sent}


def rows_of(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_a_point_longer_than_every_buffer_is_recorded_whole(series):
    lag_csv, link_csv = series("lag.csv", ["point", "epoch", "lag_seconds"]), series("links.csv", ["point", "epoch"])
    rec = PointRecording(1, 1000.0, lag_csv, link_csv, links=(("mysql-source", "mysql-target"),))
    # 60 s warm-up, then 40 minutes measured: lag at 10 Hz growing 0.01 s per second, 1 Mbit/s on the link.
    for i in range(600):
        rec.on_lag(lag(1000 + i / 10, 0.0))
    for s in range(60):
        rec.on_links([link(1000 + s, 125_000 * s)])
    rec.measure_from(1060.0)
    for i in range(24_000):  # more than LAG_WINDOW_SECONDS at 100 ms (9000) and the old link history
        t = 1060 + i / 10
        rec.on_lag(lag(t, 0.01 * (t - 1060)))
    for s in range(60, 2460):
        rec.on_links([link(1000 + s, 125_000 * s)])
    threading.Timer(0.05, lambda: (rec.on_lag(lag(3461, 9.9)), rec.on_links([link(3462, 0)]))).start()
    rec.close(3460.0)
    lag_csv.close()
    link_csv.close()
    figures = rec.figures()
    assert figures["lag_samples"] == 24_000 and figures["gaps"] == 0
    assert abs(figures["lag_slope"] - 0.01) < 1e-6 and abs(figures["max_lag_seconds"] - 23.999) < 1e-3
    assert figures["links_mbit"] == {("mysql-source", "mysql-target"): 1.0}
    assert len(rows_of(series.path / "lag.csv")) == 24_600  # every sample of the point, warm-up included
    assert len(rows_of(series.path / "links.csv")) == 2460


def test_a_reset_counter_counts_from_zero_instead_of_going_negative(series):
    rec = PointRecording(
        1, 0.0, series("lag.csv", ["epoch"]), series("links.csv", ["epoch"]), links=(("a", "b"),), feeds=()
    )
    rec.measure_from(0.0)
    for t, count in ((0, 0), (1, 1000), (2, 2000), (3, 500), (4, 1500)):  # chain re-created between 2 and 3
        rec.on_links([link(t, count, "a", "b")])
    rec.close(4.0, wait=0)
    assert rec.figures()["links_mbit"][("a", "b")] == round(
        3500 * 8 / 1e6 / 4, 4
    )  # 1000 + 1000 + 500 (since the reset) + 1000
    rate = with_rates(
        {"epoch": 3.0, "tx_bytes": 500, "rx_bytes": None}, {"epoch": 2.0, "tx_bytes": 2000, "rx_bytes": None}
    )
    assert rate["tx_bytes_per_second"] == 500.0


def test_samples_before_the_load_and_after_the_window_stay_out(series):
    lag_csv = series("lag.csv", ["point", "epoch"])
    rec = PointRecording(2, 10.0, lag_csv, series("links.csv", ["epoch"]), links=(), feeds=("lag",))
    rec.on_lag(lag(9.9, 5.0))
    rec.measure_from(11.0)
    rec.on_lag(lag(10.5, 7.0, status="gap"))  # warm-up: in the file, not in the figures
    rec.on_lag(lag(11.5, 1.0))
    threading.Timer(0.05, rec.on_lag, args=(lag(12.5, 3.0),)).start()
    rec.close(12.0)
    lag_csv.close()
    figures = rec.figures()
    assert (figures["lag_samples"], figures["max_lag_seconds"], figures["gaps"]) == (1, 1.0, 1)
    assert [r["epoch"] for r in rows_of(series.path / "lag.csv")] == ["10.5", "11.5"]


def test_the_seconds_around_the_window_do_not_dilute_a_links_rate(series):
    """Defect: 95 Mbit/s of sysbench responses read as 79 in a 6 s window, because the counters' slack
    after the end (the load already stopped) was in the denominator."""
    rec = PointRecording(1, 0.0, series("lag.csv", ["epoch"]), series("links.csv", ["epoch"]), links=(("a", "b"),),
                         feeds=())  # fmt: skip

    def sample(t):  # 10 MB/s while the load runs (0 to 8 s), idle after; the counters read at t.3
        rec.on_links([link(t, round(10e6 * min(t, 8.0)), "a", "b")])

    for t in (0.3, 1.3):
        sample(t)
    rec.measure_from(2.0)  # warm-up over
    for t in (2.3, 3.3, 4.3, 5.3, 6.3, 7.3):
        sample(t)
    threading.Timer(0.05, lambda: [sample(t) for t in (8.3, 9.3, 10.3)]).start()
    rec.close(8.0)  # the load ended
    assert rec.figures()["links_mbit"][("a", "b")] == 80.0
