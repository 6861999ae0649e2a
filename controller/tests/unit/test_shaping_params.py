import pytest

from laglab.shaping.params import Impairment, ParamError, format_rate, parse_rate, parse_request, parse_time


@pytest.mark.parametrize(("text", "seconds"), [("125ms", 0.125), ("1.5s", 1.5), ("500us", 0.0005), ("0ms", 0.0)])
def test_time_units(text, seconds):
    assert parse_time("delay", text) == pytest.approx(seconds)


@pytest.mark.parametrize("bare", ["20", "0", " 100 ", 20, 0.5, 250])
def test_a_bare_number_is_refused_naming_the_units(bare):
    """#36: `laglab fault kill mysql-source --for 20` restarted it after 20 us (tc's unit); `shape --delay
    100` was 0.1 ms. A time needs its unit wherever a person types one."""
    with pytest.raises(ParamError) as caught:
        parse_time("duration", bare)
    assert "has no unit" in caught.value.message and "(units: us, ms, s)" in caught.value.message


@pytest.mark.parametrize(
    ("text", "bits"), [("2mbit", 2e6), ("256kbit", 256e3), ("1gbit", 1e9), ("100kbps", 800e3), ("8kbit", 8e3)]
)
def test_rate_units(text, bits):
    assert parse_rate("rate", text) == bits


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
        ({"delay": "-1ms"}, "delay", "'-1ms' is not a time (units: us, ms, s)"),
        ({"loss": "101%"}, "loss", "'101%' is out of range 0%..100%"),
        ({"rate": "20gbit"}, "rate", "'20gbit' is out of range 8kbit..10gbit"),
        ({"rate": 5}, "rate", "expected a rate like '2mbit', got 5"),
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
