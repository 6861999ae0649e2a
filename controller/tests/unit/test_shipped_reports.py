"""Every shipped scenario's report, read as a newcomer would (issue #27), without golden images: a small
run folder is made for each from the scenario's own plan (its real points and parameters; measured
figures made up, varying per point), `report.render` writes report.md and the plots, and then

- report.md holds no Python repr (`{'`, `':`) and gives each swept key a column of values in words;
- the sweep plot's x axis is the numeric swept key with its unit (a categorical key makes the lines);
- no tick label overlaps another, and no y label the panel to its left (matplotlib's bounding boxes).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from laglab.scenarios.plan import load_file
from laglab.scenarios.report import markdown as report
from laglab.scenarios.report import plots, words
from laglab.scenarios.report import search as report_search

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures"
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))


def made_up_run(scenario: Path, folder: Path) -> dict:
    """A run folder for the scenario's full plan: the stored fixture's files, one point per planned point."""
    plan = load_file(scenario)
    clustered = plan.points[0].scenario.cluster is not None
    shutil.copytree(FIXTURES / ("cluster-run" if clustered else "run"), folder)
    summary = json.loads((folder / "summary.json").read_text())
    template = summary["points"][0]
    if plan.search is not None:
        return made_up_search(plan, folder, summary, template)
    points = []
    for point in plan.points:
        s, i = point.scenario, point.index
        made = {**template, "point": i + 1, "params": point.params, "tps": 50.0 + 7 * i, "qps": 300.0 + 40 * i}
        if clustered:
            delay = s.cluster.delay * 1000 if s.link.matrix is None else 80.0 + i
            made["cluster"] = {**template["cluster"], "kind": s.replicator.kind, "delay_ms": delay}
            made["load"] = {**template["load"], "threads": s.load.threads}
            made["load_seconds"] = 50.0 / (1 + s.load.threads) + delay / 100
        else:
            made.update(max_lag_seconds=0.2 * (i + 1), p95_lag_seconds=0.1 * (i + 1), lag_slope=0.001 * i,
                        link_mbit=1.0 + 0.1 * i)  # fmt: skip
        points.append(made)
    reference = plan.scenario.reference
    summary.update(scenario=plan.scenario.name, sweep=dict(plan.sweep), points=points,
                   reference=None if reference is None else reference.for_summary(plan.scenario))  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    return summary


def made_up_search(plan, folder: Path, summary: dict, template: dict) -> dict:
    """A searched scenario's run: three probes per search (sustained at the start, not at twice it,
    sustained between), each with its interval, and the knee of each."""
    search, points, knees = plan.search, [], []
    for group in plan.points:
        start = search.knee_search().start
        values = [start, search.rounding(start * 2), search.rounding(start * 1.5)]
        numbers = []
        for value, verdict in zip(values, ("sustained", "not sustained", "sustained"), strict=True):
            probe = plan.probe(group, value, 1, index=len(points))
            slope = 0.001 if verdict == "sustained" else 0.2
            points.append({**template, "point": probe.index + 1, "params": probe.params, "lag_slope": slope,
                           "lag_slope_ci": {"slope": slope, "low": slope - 0.002, "high": slope + 0.002, "seconds": 30,
                                            "effective": 12.0},
                           "probe": {"search": group.index + 1, "param": search.param, "value": search.value(value),
                                     "window_factor": 1, "verdict": verdict, "why": "made up"}})  # fmt: skip
            numbers.append(probe.index + 1)
        knees.append({"search": group.index + 1, "at": group.params, "param": search.param,
                      "goal": "highest" if search.highest else "lowest", "until": search.until,
                      "resolution": search.resolution, "knee": search.value(values[2]),
                      "bracket": [search.value(values[2]), search.value(values[1])], "state": "found", "probes": 3,
                      "undecided": 0, "points": numbers, "final": True})  # fmt: skip
    summary.update(scenario=plan.scenario.name, sweep=dict(plan.sweep), points=points, knees=knees,
                   search=search.model_dump(mode="json", by_alias=True), reference=None)  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    return summary


def overlapping(boxes) -> list[tuple]:
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]


def check_figure(fig, x_label: str | None) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert fig.get_size_inches()[0] * fig.dpi <= 1400
    panels = fig.get_axes()
    for ax in panels:
        if x_label is not None:
            assert ax.get_xlabel() == x_label
        for axis in (ax.get_xticklabels(), ax.get_yticklabels()):
            boxes = [t.get_window_extent(renderer) for t in axis if t.get_text() and t.get_visible()]
            assert not overlapping(boxes), f"{ax.get_title() or ax.get_ylabel()}: tick labels overlap"
    frames = [ax.get_window_extent(renderer) for ax in panels]
    for i, ax in enumerate(panels):
        label = ax.yaxis.label.get_window_extent(renderer)
        left = [f for f in frames[:i] if f.y0 < label.y1 and f.y1 > label.y0 and f.x1 <= label.x1]
        assert not any(label.overlaps(f) for f in left), f"{ax.get_ylabel()}: the y label runs into a panel"
    plt.close(fig)


@pytest.mark.parametrize("scenario", SHIPPED, ids=lambda p: p.stem)
def test_a_shipped_scenarios_report_reads_in_words_with_the_right_axes(scenario, tmp_path):
    run = tmp_path / f"20261125T000000Z-{scenario.stem}"
    summary = made_up_run(scenario, run)
    text = report.render(run).read_text()
    assert "{'" not in text and "':" not in text, [line for line in text.splitlines() if "{'" in line or "':" in line][
        :3
    ]
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for point in summary["points"]:
        if point["params"] and not point.get("cluster"):  # a column per swept key, its value in words
            row = next(r for r in rows if r.startswith(f"| {point['point']} | "))
            cells = [c.strip() for c in row.split("|")[2 : 2 + len(summary["sweep"])]]
            assert cells == [words.value(k, point["params"][k]) for k in summary["sweep"]], row
    if summary.get("knees"):  # a search: its knee in words, every probe, and the probes' plot
        param = summary["knees"][0]["param"]
        for knee in summary["knees"]:
            assert f"the {knee['goal']} {words.axis(param)} that holds: **{words.value(param, knee['knee'])}**" in text
        probes = [r for r in rows if r.endswith("| made up |")]
        assert len(probes) == len(summary["points"]), probes
        assert (run / "search.png").exists() and not (run / "sweep.png").exists()
        unit = words.number(param, summary["points"][0]["params"][param])[1]
        check_figure(report_search.figure(summary), f"{words.axis(param)} ({unit})")
        return
    if any(p.get("cluster") for p in summary["points"]):
        assert (run / "cluster.png").exists()
        check_figure(plots.cluster_figure(summary), "mysqlslap concurrency")
        return
    sweep = list(summary["sweep"])
    if not sweep:
        assert not (run / "sweep.png").exists()
        return
    assert (run / "sweep.png").exists()
    key = plots.x_axis_key(summary["points"], sweep)
    numeric = [k for k in sweep if all(words.number(k, p["params"][k]) is not None for p in summary["points"])]
    assert key == (numeric[-1] if numeric else None)
    if key is None:
        check_figure(plots.sweep_figure(summary), "point")
        return
    unit = words.number(key, summary["points"][0]["params"][key])[1]
    check_figure(plots.sweep_figure(summary), f"{words.axis(key)} ({unit})" if unit else words.axis(key))


def test_every_shipped_scenario_is_covered():
    assert len(SHIPPED) >= 16


def test_an_asserted_limit_is_a_reference_line_and_one_far_above_is_named_not_drawn(tmp_path):
    summary = made_up_run(ROOT / "scenarios/replication-latency-sweep.yaml", tmp_path / "run")
    for p in summary["points"]:
        p["assertions"] = [{"assertion": "max_lag_seconds < 1", "passed": True}]
    fig = plots.sweep_figure(summary)
    max_lag = fig.get_axes()[0]
    assert [line.get_ydata()[0] for line in max_lag.get_lines()[1:]] == [1.0]
    plt.close(fig)
    for p in summary["points"]:
        p["assertions"] = [{"assertion": "max_lag_seconds < 300", "passed": True}]
    fig = plots.sweep_figure(summary)
    max_lag = fig.get_axes()[0]
    assert len(max_lag.get_lines()) == 1  # the data only: 300 s would flatten a curve under 2 s
    assert any("asserted < 300 (above)" in t.get_text() for t in max_lag.texts)
    plt.close(fig)
