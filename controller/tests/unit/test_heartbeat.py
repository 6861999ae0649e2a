from laglab.lag import applier_lag, heartbeat_age, make_sample, pending_lag

STATUS = {"Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes", "Seconds_Behind_Source": 0}
WRITTEN = [(10, 100.0), (11, 100.1), (12, 100.2), (13, 100.3)]


def test_heartbeat_age_is_now_minus_newest():
    assert heartbeat_age(105.25, 102.0) == 3.25
    assert heartbeat_age(100.0, 100.000001) == 0.0  # DATETIME(6) rounding never gives negative lag


def test_pending_lag_is_age_of_oldest_missing_heartbeat():
    assert pending_lag(100.35, 11, WRITTEN) == 0.15  # 12 (written at 100.2) is the oldest missing
    assert pending_lag(100.35, 13, WRITTEN) == 0.0  # caught up
    assert pending_lag(100.15, 11, WRITTEN) == 0.0  # 12 was written after the target's clock was read
    assert pending_lag(100.35, 11, []) is None


def test_applier_lag_ignores_zero_dates():
    assert applier_lag(1000.5, 1003.75) == 3.25
    assert applier_lag(0, 1003.0) is None  # performance_schema zero date -> UNIX_TIMESTAMP 0
    assert applier_lag(None, None) is None


def test_sample_from_a_healthy_replica():
    sample = make_sample(
        100.35, {"seq": 11, "ts": 100.1}, STATUS, {"committed": 99.0, "applied": 99.004}, None, WRITTEN
    )
    assert sample.status == "ok"
    assert sample.lag_seconds == 0.15
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
