from laglab.measurement.lag import applier_lag, frontier_lag, heartbeat_age, make_sample

STATUS = {"Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes", "Seconds_Behind_Source": 0}
WRITTEN = [(10, 100.0), (11, 100.1), (12, 100.2), (13, 100.3)]


def test_heartbeat_age_is_now_minus_newest():
    assert heartbeat_age(105.25, 102.0) == 3.25
    assert heartbeat_age(100.0, 100.000001) == 0.0  # DATETIME(6) rounding never gives negative lag


def test_frontier_lag_is_between_newest_held_and_oldest_missing():
    # Target holds 11 (written 100.1); 12 (100.2) is the oldest missing: frontier ~100.15.
    assert frontier_lag(100.35, 11, 100.1, WRITTEN) == 0.2
    assert frontier_lag(100.35, 13, 100.3, WRITTEN) == 0.0  # caught up
    assert frontier_lag(100.15, 11, 100.1, WRITTEN) == 0.0  # 12 was written after the target's clock was read
    assert frontier_lag(100.35, 11, 100.1, []) is None


def test_constant_link_delay_is_read_exactly_when_sampled_mid_interval():
    # Heartbeats every 100 ms, each taking 200 ms to arrive; sample at 0.45 s (half an interval off).
    written = [(i, i * 0.1) for i in range(10)]
    on_target = 2  # written 0.2, arrived 0.4; 3 (0.3) arrives 0.5
    assert frontier_lag(0.45, on_target, 0.2, written) == 0.2


def test_applier_lag_ignores_zero_dates():
    assert applier_lag(1000.5, 1003.75) == 3.25
    assert applier_lag(0, 1003.0) is None  # performance_schema zero date -> UNIX_TIMESTAMP 0
    assert applier_lag(None, None) is None


def test_sample_from_a_healthy_replica():
    sample = make_sample(
        100.35, {"seq": 11, "ts": 100.1}, STATUS, {"committed": 99.0, "applied": 99.004}, None, WRITTEN
    )
    assert sample.status == "ok"
    assert sample.lag_seconds == 0.2
    assert sample.heartbeat_age_seconds == 0.25
    assert sample.heartbeat_seq == 11
    assert sample.applier_lag_seconds == 0.004
    assert (sample.io_running, sample.sql_running, sample.seconds_behind_source) == ("Yes", "Yes", 0)


def test_sample_falls_back_to_heartbeat_age_before_any_write_is_known():
    sample = make_sample(100.35, {"seq": 11, "ts": 100.1}, STATUS, None, None, [])
    assert sample.lag_seconds == 0.25


def test_gaps_carry_their_reason():
    assert make_sample(1.0, None, STATUS, None, None).reason == "no heartbeat on mysql-target yet"
    down = make_sample(100.35, {"seq": 11, "ts": 100.1}, STATUS, None, '(2003, "Can\'t connect")', WRITTEN)
    assert (down.status, down.reason) == ("gap", 'mysql-source: (2003, "Can\'t connect")')
    assert (
        make_sample(100.35, {"seq": 11, "ts": 100.1}, None, None, None, WRITTEN).reason
        == "mysql-target is not a replica"
    )


def test_mariadb_status_names():
    status = {"Slave_IO_Running": "Yes", "Slave_SQL_Running": "No", "Seconds_Behind_Master": None}
    sample = make_sample(100.35, {"seq": 13, "ts": 100.3}, status, None, None, WRITTEN)
    assert (sample.io_running, sample.sql_running, sample.seconds_behind_source) == ("Yes", "No", None)


def test_the_lag_split_of_a_transaction_seen_queued_is_exact():
    from laglab.measurement.lag import LagSplit

    split = LagSplit()
    split.observe("u:7", 100.0, 100.4)  # committed at 100.0, queued 0.4 s later (the network)
    assert split.split("u:7", 100.0, 101.5, 101.6) == (0.4, 1.1, 0.1)  # then 1.1 s in the relay log
    assert (split.exact, split.estimated) == (1, 0)


def test_the_lag_split_borrows_the_transit_of_the_nearest_queued_one_and_adds_up():
    from laglab.measurement.lag import LagSplit

    split = LagSplit()
    split.observe("u:5", 100.0, 100.3)
    split.observe("u:9", 102.0, 102.2)
    transit, queue, apply = split.split("u:8", 101.0, 101.9, 102.0)
    assert (transit, queue, apply) == (0.3, 0.6, 0.1), "u:5 is the nearest queued before u:8"
    assert round(transit + queue + apply, 6) == 102.0 - 101.0
    assert split.split("u:1", 99.0, 99.5, 99.6) is None, "nothing seen queued before it"
    assert split.split("u:9", 0, 0, 0) is None, "performance_schema's zero dates"


def test_the_sampler_reads_the_replica_status_every_second_and_performance_schema_every_100_ms(tmp_path, monkeypatch):
    """At a 10 ms heartbeat SHOW REPLICA STATUS every sample was most of the recorder's CPU: its
    Seconds_Behind_Source moves in whole seconds; the applier timestamps feed the lag split."""
    from laglab.measurement import lag
    from laglab.measurement.results import Run
    from laglab.replicators.db import Dialect, Endpoint

    from .fakes import FakeConnection

    def answer(sql, args):
        if "heartbeat" in sql:
            return [{"now": 1000.0, "seq": 1, "ts": 999.99}]
        if "REPLICA STATUS" in sql:
            return [{"Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes", "Seconds_Behind_Source": 0}]
        return []

    conn = FakeConnection(answer)
    clock = [0.0]
    monkeypatch.setattr(lag, "connect", lambda *a, **k: conn)
    monkeypatch.setattr(lag, "server_dialect", lambda c: Dialect("mysql"))
    monkeypatch.setattr(lag.time, "monotonic", lambda: clock[0])
    endpoint = Endpoint("mysql-target", 3306, "root", "pw", "mysql-target")
    recorder = lag.LagRecorder(endpoint, endpoint, 0.01, 60, Run(tmp_path, "live"))
    for tick in range(300):  # 3 s of 10 ms samples
        clock[0] = tick * 0.01
        recorder._sample()
    recorder.series.close()
    status = sum("REPLICA STATUS" in sql for sql in conn.log)
    timestamps = sum("performance_schema" in sql for sql in conn.log)
    assert status == 3 and 29 <= timestamps <= 31, (status, timestamps)
    assert all(s.sql_running == "Yes" for s in recorder.samples)  # samples in between carry the last status


def test_the_window_counts_back_from_the_newest_sample_and_after_an_epoch():
    from laglab.measurement.lag import LagSample, window

    samples = [LagSample(time="", epoch=float(e), status="ok") for e in range(100, 111)]
    assert [s.epoch for s in window(samples, 3)] == [107.0, 108.0, 109.0, 110.0]
    assert [s.epoch for s in window(samples, 3, after=108.0)] == [109.0, 110.0]
    assert window([], 3) == []


def test_the_frontier_uses_the_writes_return_times_and_says_its_error():
    """Issue #23: the controller's clock alone. The held heartbeat's time is when its write returned
    (from what was written), not the row's time; the error is half the gap between the two writes."""
    from laglab.measurement.lag import frontier, unapplied

    written = [(10, 100.05), (11, 100.15), (12, 100.25), (13, 100.35)]  # returned 50 ms after each row's ts
    assert unapplied(written, 11) == [(11, 100.15), (12, 100.25)]
    assert unapplied(written, 13) == [(13, 100.35)]
    assert frontier(100.4, 11, 100.1, unapplied(written, 11)) == (0.2, 0.05)
    assert frontier(100.4, 13, 100.3, unapplied(written, 13)) == (0.0, 0.0)


def test_a_replica_whose_clock_is_off_reads_the_same_lag():
    """The server's NOW(6) only says how far its clock is off: 5 s ahead or 3 s behind, the same lag."""
    readings = {}
    for skew in (0.0, 5.0, -3.0):
        heartbeat = {"seq": 11, "ts": 100.1, "server_now": 100.35 + skew}
        sample = make_sample(100.35, heartbeat, STATUS, None, None, WRITTEN, read_error=0.002)
        readings[skew] = (sample.lag_seconds, sample.heartbeat_age_seconds, sample.lag_error_seconds)
        assert sample.clock_offset_seconds == skew
    assert readings == {skew: (0.2, 0.25, 0.052) for skew in (0.0, 5.0, -3.0)}


def test_further_replicas_are_read_each_on_its_own_connection_and_let_go(tmp_path, monkeypatch):
    """A scaled mysql-target (Kubernetes): the recorder reads every replica the watch reports against
    the same heartbeats, each with its own connection and figures; one no longer running is let go."""
    from laglab.measurement import lag
    from laglab.measurement.results import Run
    from laglab.replicators.db import Dialect, Endpoint

    from .fakes import FakeConnection

    held = {"mysql-target": 5, "mysql-target-1": 3, "mysql-target-2": 5}
    conns: dict[str, FakeConnection] = {}

    def connect(endpoint, **kwargs):
        def answer(sql, args):
            if "heartbeat" in sql:
                return [{"server_now": 0.0, "seq": held[endpoint.name], "ts": 0.0}]
            if "REPLICA STATUS" in sql:
                return [{"Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes", "Seconds_Behind_Source": 0}]
            return []

        conns[endpoint.name] = FakeConnection(answer)
        return conns[endpoint.name]

    monkeypatch.setattr(lag, "connect", connect)
    monkeypatch.setattr(lag, "server_dialect", lambda c: Dialect("mysql"))
    monkeypatch.setattr(lag.time, "time", lambda: 100.0)
    target = Endpoint("mysql-target-0.mysql-target", 3306, "root", "pw", "mysql-target")
    recorder = lag.LagRecorder(Endpoint("mysql-source", 3306, "root", "pw", "mysql-source"), target, 0.1, 60,
                               Run(tmp_path, "live"))  # fmt: skip
    recorder._written.extend([(3, 97.0), (4, 98.0), (5, 99.0)])  # written and returned on the controller's clock
    further = [Endpoint(f"mysql-target-{k}.mysql-target", 3306, "root", "pw", f"mysql-target-{k}") for k in (1, 2)]
    recorder.follow([*further, target])  # mysql-target itself is the main reader's
    recorder._sample()
    latest = recorder.latest()
    assert sorted(latest) == ["mysql-target", "mysql-target-1", "mysql-target-2"]
    assert latest["mysql-target"]["lag_seconds"] == 0.0 and latest["mysql-target-2"]["lag_seconds"] == 0.0
    # mysql-target-1 holds seq 3: the lag is now - the middle of (3's return, 4's return)
    assert latest["mysql-target-1"]["lag_seconds"] == 2.5 and latest["mysql-target-1"]["replica"] == "mysql-target-1"
    assert recorder.replica("mysql-target-1")[-1].heartbeat_seq == 3 and recorder.replica("mysql-target-9") is None
    assert recorder.replica("mysql-target") is recorder.samples and len(recorder.samples) == 1
    recorder.follow(further[:1])
    recorder._sample()
    assert (
        sorted(recorder.latest()) == ["mysql-target", "mysql-target-1"] and len(recorder.replica("mysql-target-1")) == 2
    )
    recorder.series.close()
    rows = (recorder.run.path / "lag.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["mysql-target", "mysql-target-1", "mysql-target-2",
                                                   "mysql-target", "mysql-target-1"], rows  # fmt: skip


def test_a_full_disk_under_the_live_lag_csv_does_not_take_the_lag_from_a_run(tmp_path):
    """#54: the sampler appended to the live lag.csv before it published the sample, so with results/
    full (ENOSPC, as Linux answers the write) a run in progress silently received no lag. The run's
    subscriber gets every sample; the refusal is logged once, and rows are kept again after it."""
    from laglab.measurement.lag import LagRecorder, LagSample
    from laglab.measurement.results import Run
    from laglab.replicators.db import Endpoint

    source, target = (
        Endpoint("127.0.0.1", 1, "u", "p", "mysql-source"),
        Endpoint("127.0.0.1", 2, "u", "p", "mysql-target"),
    )
    recorder = LagRecorder(source, target, 0.1, 60, Run(tmp_path, "live"))
    try:
        got = []
        recorder.feed.subscribe(got.append)
        samples = iter([LagSample(time=f"t{n}", epoch=float(n), status="ok", lag_seconds=0.1 * n) for n in range(3)])
        recorder.reader.read = lambda *args: next(samples)
        kept = recorder.series.append
        full = {"on": True}

        def append(row):
            if full["on"]:
                raise OSError(28, "No space left on device")
            kept(row)

        recorder.series.append = append
        recorder._sample()
        recorder._sample()
        full["on"] = False
        recorder._sample()
        assert [s.time for s in got] == ["t0", "t1", "t2"]  # the run saw every one
        rows = (recorder.series.path).read_text().splitlines()
        assert rows[-1].split(",")[1] == "t2" and len(rows) == 2, rows  # header and the row after the disk came back
    finally:
        recorder.series.close()
