import pytest

from laglab.shaping.params import Impairment, ParamError, format_rate, parse_rate, parse_request, parse_time


@pytest.mark.parametrize(("text", "seconds"), [("125ms", 0.125), ("1.5s", 1.5), ("500us", 0.0005), ("0ms", 0.0)])
def test_time_units(text, seconds):
    assert parse_time("delay", text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("10min", 600), ("0.5min", 30), ("24h", 86400), ("2hours", 7200)]
)
def test_minutes_and_hours_as_pumba_and_tcconfig_take_them(text, seconds):
    """#53: `--for 10m` and docs/scenarios.md's `load.duration: 24h` were refused. tcconfig's README lists
    h/hour/hours and m/min/mins/minute/minutes; `m` never meets `ms`: the longest unit is matched."""
    assert parse_time("duration", text) == seconds
    assert parse_time("delay", "10ms") == 0.01
    with pytest.raises(ParamError, match=r"'2m' is out of range 0ms..60s"):
        parse_time("delay", "2m")  # a two-minute delay is a delay out of range, not 2 ms


@pytest.mark.parametrize("bare", ["20", "0", " 100 ", 20, 0.5, 250])
def test_a_bare_number_is_refused_naming_the_units(bare):
    """#36: `laglab fault kill mysql-source --for 20` restarted it after 20 us (tc's unit); `shape --delay
    100` was 0.1 ms. A time needs its unit wherever a person types one."""
    with pytest.raises(ParamError) as caught:
        parse_time("duration", bare)
    assert "has no unit" in caught.value.message and "(units: us, ms, s, m, h)" in caught.value.message


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("2mbit", 2e6), ("256kbit", 256e3), ("1gbit", 1e9), ("8kbit", 8e3), ("2Mbit", 2e6),  # tc's bits, any case
        ("2Mbit/s", 2e6), ("512kbit/s", 512e3), ("1 Gbit/s", 1e9),  # as the report prints them
        ("2Mbps", 2e6), ("100Kbps", 100e3), ("1Gbps", 1e9),  # tcconfig's `tcset eth0 --rate 100Kbps`: bits
        ("2MB/s", 16e6), ("100kB/s", 800e3), ("2MBps", 16e6),  # a capital B: bytes
    ],
)  # fmt: skip
def test_rate_units(text, bits):
    assert parse_rate("rate", text) == bits


@pytest.mark.parametrize(
    ("text", "as_bytes", "as_bits", "write"),
    [
        ("2mbps", "16 Mbit/s", "2 Mbit/s", "write 2Mbit/s or 2MB/s"),
        ("100kbps", "800 kbit/s", "100 kbit/s", "write 100kbit/s or 100kB/s"),
        ("10bps", "80 bit/s", "10 bit/s", "write 10bit/s or 10B/s"),
        ("2MBPS", "16 Mbit/s", "2 Mbit/s", "write 2Mbit/s or 2MB/s"),
    ],
)
def test_a_rate_that_reads_two_ways_is_refused_naming_both(text, as_bytes, as_bits, write):
    """#53: `--rate 2Mbps` shaped a 16 Mbit/s link (tc(8): bps, kbps, mbps are bytes/s, compared without
    case) where the customer's 2 Mbps is megabits (tcconfig: "[G/M/K bps]"; TLDP's tcng HOWTO, table 1).
    tcconfig's capitalised Mbps now means megabits; tc's lowercase spelling is never guessed."""
    with pytest.raises(ParamError) as caught:
        parse_rate("rate", text)
    message = caught.value.detail
    assert f"tc takes {text[-4:] if text[-4] in 'kmgtKMGT' else text[-3:]} as bytes/s ({as_bytes})" in message, message
    assert f"as bits/s ({as_bits})" in message and message.endswith(write), message


def test_request_round_trip_in_tc_units():
    request = parse_request(
        {"delay": "125ms", "jitter": "5ms", "loss": "0.5%", "rate": "2mbit", "peer": "mysql-target"}
    )
    assert request.peer == "mysql-target" and request.direction == "egress" and request.duration is None
    assert request.shaping.to_json() == {"delay": "125ms", "jitter": "5ms", "loss": "0.5%", "rate": "2mbit"}
    assert parse_request({"delay": "1s", "duration": "60s"}).duration == 60.0


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"delay": "61s"}, "delay", "'61s' is out of range 0ms..60s"),
        ({"delay": "-1ms"}, "delay", "'-1ms' is not a time (units: us, ms, s, m, h)"),
        ({"loss": "101%"}, "loss", "'101%' is out of range 0%..100%"),
        ({"rate": "20gbit"}, "rate", "'20gbit' is out of range 8kbit..10gbit"),
        ({"rate": 5}, "rate", "expected a rate like '2Mbit/s', got 5"),
        ({"jitter": "5ms"}, "jitter", "needs a delay"),
        ({"delay": "1ms", "direction": "up"}, "direction", "'up' is not one of egress, ingress, both"),
        ({"delay": "1ms", "peer": "../etc"}, "peer", "'../etc' is not a service name"),
        ({"delay": "1ms", "duration": "0s"}, "duration", "'0s' is out of range 1s..86400s"),
        (
            {},
            "body",
            "nothing to apply: give at least one of delay, jitter, loss, gemodel, rate, duplicate, corrupt, reorder",
        ),
        ([], "body", "expected a JSON object"),
    ],
)
def test_bad_fields_are_named(body, field, message):
    with pytest.raises(ParamError) as caught:
        parse_request(body)
    assert (caught.value.field, caught.value.detail) == (field, message)
    assert caught.value.message == f"{field}: {message}"


def test_unknown_field_is_named():
    with pytest.raises(ParamError) as caught:
        parse_request({"delay": "1ms", "latency": "5ms"})
    assert caught.value.field == "latency"


def test_format_rate():
    assert format_rate(2e6) == "2mbit"
    assert format_rate(256e3) == "256kbit"
    assert format_rate(10e9) == "10gbit"
    assert Impairment().empty


def test_a_reorder_without_a_delay_is_accepted_as_netem_accepts_it():
    """Fuzzer: `{"reorder": 99}` was valid by the document and a 422 from the server."""
    request = parse_request({"reorder": 99})
    assert request.shaping.reorder == 0.99 and request.shaping.delay == 0.0
