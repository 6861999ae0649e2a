"""Published figures beside the measured ones (#24 part 2): a scenario's `reference:` is validated
against its sweep, and report.md holds each published cell against the point that measured it."""

from __future__ import annotations

import textwrap

import pytest

from laglab.scenarios.plan import load_text
from laglab.scenarios.report import published
from laglab.scenarios.schema.scenario import ScenarioError

SCENARIO = textwrap.dedent("""
    name: ref
    load: {rate: 100, duration: 10s}
    sweep:
      link.rtt: [50ms, 100ms]
      load.threads: [1, 4]
    quick:
      load.duration: 5s
    reference:
      source: {title: A benchmark, author: Someone, url: "https://example.org/b", date: 2019-02-19,
               setup: two servers}
      metric: tps
      tolerance_pct: 10
      when: {load.duration: 10s}
      figures:
        - at: {link.rtt: 50ms}
          by: load.threads
          values: {1: 100, 4: 400, 16: 1000}
""")


def summary_of(plan, measured: dict) -> dict:
    points = [{"point": p.index + 1, "params": p.params, "tps": measured.get((p.params["link.rtt"], p.params["load.threads"]))}
              for p in plan.points]  # fmt: skip
    return {"points": points, "reference": plan.scenario.reference.for_summary(plan.scenario)}


def test_each_published_cell_is_held_against_its_point_with_the_ratio_and_the_tolerance():
    plan = load_text(SCENARIO)
    lines = "\n".join(published.reference_lines(summary_of(plan, {("50ms", 1): 105.0, ("50ms", 4): 300.0})))
    assert "[A benchmark](https://example.org/b) (Someone, 2019-02-19). Their set-up: two servers." in lines
    assert "TPS: 1 of 2 measured cells within ±10 % of the published figure; 1 published cells had no point" in lines
    assert "| 50 ms | 1 | 100 | 105 | 1.05 | within |" in lines
    assert "| 50 ms | 4 | 400 | 300 | 0.75 | **outside ±10 %** |" in lines
    assert "| 50 ms | 16 | 1000 | not measured | - |  |" in lines


def test_a_run_without_the_published_settings_shows_the_figures_without_judging():
    plan = load_text(SCENARIO, quick=True)  # load.duration 5s, not the 10s the figures need
    lines = "\n".join(published.reference_lines(summary_of(plan, {("50ms", 1): 50.0})))
    assert "Not comparable: load.duration is 5s, not 10s." in lines
    assert "| 50 ms | 1 | 100 | 50 | 0.5 |  |" in lines and "outside" not in lines


def test_a_reference_names_only_swept_keys():
    bad = SCENARIO.replace("by: load.threads", "by: load.rate")
    with pytest.raises(
        ScenarioError, match=r"reference.figures.0: load.rate is not a swept key \(swept: link.rtt, load.threads\)"
    ):
        load_text(bad)
    with pytest.raises(ScenarioError, match=r"reference\.source\.url"):
        load_text(SCENARIO.replace("https://example.org/b", "example.org"))


def test_no_reference_no_section():
    assert published.reference_lines({"points": [], "reference": None}) == []


def test_a_searchs_published_figure_is_held_against_its_knee():
    """A search has no fixed cells: the published figure (the DTLE report's 1.8 Mbit/s of binlog that
    native replication sustains) is held against the knee's own probe, the last sustained one, found
    by a key inside the swept replicator section."""
    from laglab.scenarios.report.published import reference_cells, reference_lines

    def probe(n, rate, verdict, binlog):
        return {"point": n, "params": {"replicator": {"kind": "native", "compression": "uncompressed"}, "load.rate": rate},
                "binlog_mbit": binlog, "probe": {"value": rate, "verdict": verdict}}  # fmt: skip

    summary = {
        "points": [probe(1, 50, "sustained", 0.7), probe(2, 100, "sustained", 1.45), probe(3, 200, "not sustained", 2.8),
                   probe(4, 119, "undecided", 1.6), probe(5, 119, "sustained", 1.65), probe(6, 130, "not sustained", 1.8)],
        "knees": [{"at": {"replicator": {"kind": "native", "compression": "uncompressed"}}, "knee": 119,
                   "points": [1, 2, 3, 4, 5, 6]}],
        "reference": {"source": {"title": "t", "author": "a", "url": "https://x", "date": "2021-03-19", "setup": "s"},
                      "metric": "binlog_mbit", "tolerance_pct": 25, "not_comparable": [],
                      "figures": [{"at": {"replicator.compression": "uncompressed"}, "by": "replicator.kind",
                                   "values": {"native": 1.8}}]},
    }  # fmt: skip
    (cell,) = reference_cells(summary)
    assert cell["measured"] == 1.65 and round(cell["ratio"], 3) == 0.917 and cell["within"] is True
    text = "\n".join(reference_lines(summary))
    assert "Measured: at each search's knee (its last sustained probe)." in text
    assert "| uncompressed | native | 1.8 | 1.65 | 0.92 | within |" in text


def test_a_published_bound_agrees_with_any_measurement_on_its_side():
    """ "DTLE's delay stays under 2 s at every RTT" is a bound: 0.4 s agrees, 2.2 s is within the 25 %
    tolerance, 3 s does not."""
    from laglab.scenarios.report.published import reference_cells, reference_lines

    def point(n, rtt, lag):
        return {"point": n, "params": {"replicator": {"kind": "dtle"}, "link.rtt": rtt}, "max_lag_seconds": lag}

    summary = {
        "points": [point(1, "0ms", 0.4), point(2, "100ms", 2.2), point(3, "250ms", 3.0)],
        "reference": {"source": {"title": "t", "author": "a", "url": "https://x", "date": "2021-03-19", "setup": "s"},
                      "metric": "max_lag_seconds", "tolerance_pct": 25, "not_comparable": [],
                      "figures": [{"at": {"replicator.kind": "dtle"}, "by": "link.rtt", "kind": "at most",
                                   "values": {"0ms": 2.0, "100ms": 2.0, "250ms": 2.0}}]},
    }  # fmt: skip
    assert [c["within"] for c in reference_cells(summary)] == [True, True, False]
    assert "| dtle | 250 ms | ≤ 2 | 3 | 1.5 | **outside ±25 %** |" in "\n".join(reference_lines(summary))


def test_shapes_carry_over_where_absolute_figures_do_not():
    """Percona 2019's 1 Gb series saturates at 64 threads (TPS within 5 % of its highest), compression
    buys 1.754 x when the link binds, TLS costs one client 0.905: measured on this run's own cells."""
    from laglab.scenarios.report.published import reference_lines, shape_rows

    def point(protocol, threads, tps):
        return {"point": 1, "params": {"load.protocol": protocol, "link.rate": "100mbit", "load.threads": threads},
                "tps": tps}  # fmt: skip

    series = {1: 40.0, 4: 150.0, 16: 270.0, 32: 285.0, 64: 292.0, 128: 293.0}
    summary = {
        "points": [point("plain", t, v) for t, v in series.items()]
        + [point("compressed", 128, 540.0), point("tls", 1, 30.0)],
        "reference": {"source": {"title": "t", "author": "a", "url": "https://x", "date": "2019-02-19", "setup": "s"},
                      "metric": "tps", "tolerance_pct": 25, "not_comparable": [], "figures": [], "shapes": [
                          {"name": "saturation", "published": 64, "ratio": None, "saturation": {
                              "at": {"load.protocol": "plain", "link.rate": "100mbit"}, "by": "load.threads",
                              "within_pct": 5}},
                          {"name": "compressed / plain", "published": 1.754, "saturation": None, "ratio": {
                              "of": {"load.protocol": "compressed", "load.threads": 128},
                              "to": {"load.protocol": "plain", "load.threads": 128}}},
                          {"name": "tls / plain", "published": 0.905, "saturation": None, "ratio": {
                              "of": {"load.protocol": "tls", "load.threads": 1},
                              "to": {"load.protocol": "plain", "load.threads": 1}}}]},
    }  # fmt: skip
    saturation, compressed, tls = shape_rows(summary)
    assert saturation["measured"] == 32.0 and saturation["within"] is False  # 285 >= 0.95 x 293 already at 32
    assert round(compressed["measured"], 3) == 1.843 and compressed["within"] is True
    assert tls["measured"] == 0.75 and tls["within"] is True  # 0.829 of the published: within 25 %
    text = "\n".join(reference_lines(summary))
    assert "| saturation | 64 | 32 | 0.5 | **outside ±25 %** |" in text
    assert "; 2 of 3 measured shapes within it." in text


def test_a_shape_is_a_ratio_or_a_saturation():
    with pytest.raises(ScenarioError, match=r"reference.shapes.0.ratio: a shape is either a ratio"):
        load_text(
            "name: x\nsweep: {load.threads: [1, 4]}\nreference:\n  source: {title: t, author: a, url: https://x, "
            "date: 2019-02-19, setup: s}\n  metric: tps\n  shapes: [{name: n, published: 1}]\n"
        )
    with pytest.raises(ScenarioError, match=r"reference.shapes.0: load.protocol is not a swept key"):
        load_text(
            "name: x\nsweep: {load.threads: [1, 4]}\nreference:\n  source: {title: t, author: a, url: https://x, "
            "date: 2019-02-19, setup: s}\n  metric: tps\n  shapes: [{name: n, published: 1, ratio: "
            "{of: {load.protocol: tls}, to: {load.protocol: plain}}}]\n"
        )
