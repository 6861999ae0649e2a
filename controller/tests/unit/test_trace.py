"""Trace files: CSV with units in the values or in the column names, Mahimahi's delivery
opportunities as a rate per bin, and errors that say the line."""

import pytest

from laglab.scenarios.schema import trace


def test_csv_with_units_in_the_header_and_in_the_cells():
    rows, period = trace.parse_csv("t_ms,delay_ms,loss,rate_kbit\n0,20,,500\n500,40,1%,\n1000,,,\n")
    assert rows == [
        (0.0, {"delay": "20ms", "rate": "500kbit"}),
        (0.5, {"delay": "40ms", "loss": "1%"}),
        (1.0, {}),
    ]
    assert period == 1.5, "the last row holds as long as the one before it"


def test_rtt_is_split_half_each_way():
    rows, _ = trace.parse_csv("t,rtt\n0,180ms\n")
    assert rows == [(0.0, {"delay": "90ms"})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("delay,t\n", "the first column must be the time"),
        ("t,bandwidth\n0,1\n", "unknown column 'bandwidth'"),
        ("t,delay\n0,20ms\n0.05,30ms\n", "line 3: t must grow by at least 0.1s a row"),
        ("t,delay\n0,2 fortnights\n", "line 2: delay: '2 fortnights' is not a time"),
        ("t,delay\nzero,2ms\n", "line 2: 'zero' is not a number of t"),
        ("t,delay\n0,1ms,3\n", "line 2: 3 cells for 2 columns"),
        ("t,rate\n0,3kbit\n", "line 2: rate: '3kbit' is out of range 8kbit..10gbit"),
        ("t,delay\n", "no rows"),
    ],
)
def test_csv_errors_say_the_line(text, message):
    with pytest.raises(trace.TraceError) as caught:
        trace.parse_csv(text)
    assert str(caught.value).startswith(message)


def test_mahimahi_opportunities_become_a_rate_per_bin():
    # 1000 packets in the first second (12 Mbit/s), none in the second, 10 in the third.
    stamps = [i for i in range(1000)] + [2000 + i * 10 for i in range(10)]
    rows, period = trace.parse_mahimahi("\n".join(map(str, stamps)))
    assert rows == [(0.0, {"rate": "12mbit"}), (1.0, {"rate": "8kbit"}), (2.0, {"rate": "120kbit"})]
    assert period == 3.0


def test_mahimahi_refuses_other_text():
    with pytest.raises(trace.TraceError) as caught:
        trace.parse_mahimahi("10\n12.5\n")
    assert str(caught.value) == "line 2: '12.5' is not a millisecond count (Mahimahi format)"


def test_a_file_is_read_by_its_ending(tmp_path):
    (tmp_path / "cell.down").write_text("0\n1\n")
    (tmp_path / "t.csv").write_text("t,delay\n0,5ms\n")
    assert trace.read(tmp_path / "cell.down")[0] == [(0.0, {"rate": "24kbit"})]
    assert trace.read(tmp_path / "t.csv")[0] == [(0.0, {"delay": "5ms"})]


@pytest.mark.parametrize(
    ("bin_seconds", "said"),
    [(0.0, "bin: at least 100ms"), (1e-6, "bin: at least 100ms"), (0.001, "bin: at least 100ms")],
    ids=["0 s (ZeroDivisionError: HTTP 500 before)", "1 us ([0] * 6*10^7 before)", "1 ms (1000 changes a second)"],
)
def test_a_mahimahi_bin_too_small_is_refused_by_name(bin_seconds, said):
    """#54: `bin: 0s` was an HTTP 500, and the same file in scenarios/ broke GET /api/scenarios for every
    scenario; `1us` allocated a list of 6*10^7 counts; `1ms` was accepted as 1000 shaping changes a second."""
    with pytest.raises(trace.TraceError, match=f"^{said}"):
        trace.parse_mahimahi("0\n5\n60000\n", bin_seconds)


def test_a_mahimahi_trace_of_more_bins_than_a_timeline_may_hold_is_refused_before_counting():
    from laglab import limits

    far = (limits.TIMELINE_EVENTS + 1) * 1000  # ms: one more one-second bin than the limit
    with pytest.raises(trace.TraceError, match=r"bins of 1 s: at most \d+ \(limit timeline_events\)"):
        trace.parse_mahimahi(f"0\n{far}\n", 1.0)


def test_a_scenario_with_a_zero_bin_is_a_scenario_error(tmp_path):
    from laglab.scenarios.plan import load_text
    from laglab.scenarios.schema.scenario import ScenarioError

    (tmp_path / "t.trace").write_text("0\n5\n2000\n")
    text = ("name: x\nload: {duration: 10s}\ntimeline:\n  - {at: 1s, trace: {link: [mysql-source, mysql-target], "
            "file: t.trace, format: mahimahi, bin: 0s}}\n")  # fmt: skip
    with pytest.raises(ScenarioError) as caught:
        load_text(text, base_dir=tmp_path)
    assert (caught.value.path, caught.value.message) == (
        "timeline.0.trace.bin",
        "at least 100ms (a shaping change 10 times a second at most)",
    ), caught.value
