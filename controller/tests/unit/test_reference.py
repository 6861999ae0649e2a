"""Published figures beside the measured ones (#24 part 2): a scenario's `reference:` is validated
against its sweep, and report.md holds each published cell against the point that measured it."""

from __future__ import annotations

import textwrap

import pytest

from laglab.scenarios import report
from laglab.scenarios.spec import ScenarioError, load_text

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
    lines = "\n".join(report.reference_lines(summary_of(plan, {("50ms", 1): 105.0, ("50ms", 4): 300.0})))
    assert "[A benchmark](https://example.org/b) (Someone, 2019-02-19). Their set-up: two servers." in lines
    assert "TPS: 1 of 2 measured cells within ±10 % of the published figure; 1 published cells had no point" in lines
    assert "| 50 ms | 1 | 100 | 105 | 1.05 | within |" in lines
    assert "| 50 ms | 4 | 400 | 300 | 0.75 | **outside ±10 %** |" in lines
    assert "| 50 ms | 16 | 1000 | not measured | - |  |" in lines


def test_a_run_without_the_published_settings_shows_the_figures_without_judging():
    plan = load_text(SCENARIO, quick=True)  # load.duration 5s, not the 10s the figures need
    lines = "\n".join(report.reference_lines(summary_of(plan, {("50ms", 1): 50.0})))
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
    assert report.reference_lines({"points": [], "reference": None}) == []
