"""The knee search (scenarios/search.py) against a synthetic system whose knee is known: lag that stays
flat up to the knee and grows linearly past it, with noise that wanders (autocorrelated) as a real
lag series does."""

from __future__ import annotations

import random

import pytest

from laglab.scenarios.search import NOT_SUSTAINED, SUSTAINED, UNDECIDED, Criterion, KneeSearch, slope_interval


def lag_series(slope: float, seconds: int, noise: float, rng: random.Random, hz: int = 10) -> list[tuple[float, float]]:
    """`seconds` of samples at `hz`: a trend of `slope` s/s plus an AR(1) wander of scale `noise`."""
    out, wander = [], 0.0
    for i in range(seconds * hz):
        wander = 0.9 * wander + rng.gauss(0, noise)
        out.append((1000.0 + i / hz, max(0.0, 0.2 + slope * i / hz + wander)))
    return out


def system(knee: float, noise: float = 0.02, window: int = 60, seed: int = 7):
    rng = random.Random(seed)

    def probe(value: float, factor: int) -> list[tuple[float, float]]:
        slope = 0.0 if value <= knee else 0.05 * (value - knee) / knee
        return lag_series(slope, window * factor, noise, rng)

    return probe


def run(search: KneeSearch, probe, criterion: Criterion) -> KneeSearch:
    while (asked := search.next()) is not None:
        value, factor = asked
        slope = slope_interval(probe(value, factor))
        search.record(value, criterion.verdict(slope), slope)
    return search


@pytest.mark.parametrize("knee", [137.0, 480.0, 55.0])
def test_the_knee_is_found_within_the_resolution(knee):
    search = run(KneeSearch(50, 1000, resolution=0.05), system(knee), Criterion.parse("lag_slope < 0.005"))
    result = search.result()
    assert result["state"] == "found", result
    low, high = result["bracket"]
    # Past the knee the slope is 0.05 * (value - knee) / knee: it reaches the limit 0.005 at 1.1 x knee.
    # Near that edge the interval straddles the limit: the answer may sit a little under it, never over.
    edge = 1.1 * knee
    assert low <= edge * 1.01 and high >= edge * 0.97 and (high - low) / low <= 0.05, result
    assert result["probes"] <= search.most_probes()


def test_the_lowest_link_that_carries_a_load_is_found_shrinking_from_the_top():
    # A link rate in Mbit/s: at or above 3.2 the load is carried, below it lag grows.
    rng = random.Random(3)

    def probe(value, factor):
        slope = 0.0 if value >= 3.2 else 0.05 * (3.2 - value) / 3.2
        return lag_series(slope, 60 * factor, 0.02, rng)

    search = run(KneeSearch(0.5, 100, resolution=0.05, highest=False), probe, Criterion.parse("lag_slope < 0.005"))
    low_ok, failed = search.result()["bracket"]
    # The slope reaches the limit at 0.9 x 3.2 = 2.88 Mbit/s: the slowest link that carries the load.
    assert failed <= 2.88 * 1.03 and low_ok >= 2.88 * 0.99 and (low_ok - failed) / low_ok <= 0.05


def test_a_noisy_probe_is_undecided_and_measured_again_twice_as_long():
    criterion = Criterion.parse("lag_slope < 0.005")
    rng = random.Random(11)
    noisy = slope_interval(lag_series(0.004, 20, 0.08, rng))
    assert criterion.verdict(noisy) == UNDECIDED  # the interval straddles the limit
    search = KneeSearch(50, 1000)
    value, _factor = search.next()
    search.record(value, UNDECIDED, noisy)
    assert search.next() == (50, 2)  # the same value, a window twice as long
    search.record(50, UNDECIDED)
    # Twice undecided counts as not sustained: nothing is claimed to hold that was not shown to.
    assert search.result()["state"] == "nothing in the range holds" and search.next() is None


def test_clear_cases_are_decided_and_the_interval_widens_with_autocorrelation():
    criterion = Criterion.parse("lag_slope < 0.005")
    rng = random.Random(5)
    flat = slope_interval(lag_series(0.0, 60, 0.02, rng))
    growing = slope_interval(lag_series(0.05, 60, 0.02, rng))
    assert criterion.verdict(flat) == SUSTAINED and criterion.verdict(growing) == NOT_SUSTAINED
    assert growing.low < 0.05 < growing.high
    assert flat.effective < flat.seconds  # wandering noise is worth fewer independent seconds


def test_the_whole_range_holding_and_nothing_holding_are_said_so():
    criterion = Criterion.parse("lag_slope < 0.005")
    assert run(KneeSearch(50, 1000), system(5000), criterion).result()["state"] == "the whole range holds"
    assert run(KneeSearch(50, 1000), system(10), criterion).result()["state"] == "nothing in the range holds"


def test_bad_searches_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="from/to"):
        KneeSearch(100, 50)
    with pytest.raises(ValueError, match="resolution"):
        KneeSearch(50, 100, resolution=5)
    with pytest.raises(ValueError, match="until: the search decides on lag_slope"):
        Criterion.parse("max_lag_seconds < 3")
    with pytest.raises(ValueError, match="until: 'lag_slope > 1'"):
        Criterion.parse("lag_slope > 1")
