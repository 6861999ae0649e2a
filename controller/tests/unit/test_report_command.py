"""`make report RUN=results/<run>`, the README's command to rebuild a report, run as the README says on
a copy of a stored run (issue #27: it crashed for every run with a NameError, because the module's
`__main__` block ran before the functions below it were defined, and no test called the command)."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures"


def test_make_report_rebuilds_a_stored_runs_report(tmp_path):
    run = tmp_path / "20261125T000000Z-stored"
    shutil.copytree(FIXTURES / "run", run)
    done = subprocess.run(
        ["make", "-s", "report", f"RUN={run}"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = run / "report.md"
    assert report.exists() and str(report) in done.stdout
    assert report.read_text().startswith("# "), report.read_text()[:200]


def test_make_report_says_how_to_call_it():
    done = subprocess.run(["make", "-s", "report"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "usage: make report RUN=results/<run>" in done.stdout


def test_a_two_key_sweep_reads_in_words(tmp_path):
    """replicator x load.rate, as dtle-weaknet-max-pressure.yaml sweeps: every row of report.md says
    `DTLE (group max size 1 MiB, ...)` and `50 TPS`, never a Python repr."""
    import json

    run = tmp_path / "20261125T000000Z-two-keys"
    shutil.copytree(FIXTURES / "run", run)
    summary = json.loads((run / "summary.json").read_text())
    replicators = [{"kind": "native", "compression": "uncompressed"},
                   {"kind": "dtle", "group_max_size": 1048576, "group_timeout_ms": "auto", "repl_chan_buffer_size": 600}]  # fmt: skip
    template = summary["points"][0]
    summary["sweep"] = {"replicator": replicators, "load.rate": [50, 300]}
    summary["points"] = [
        {
            **template,
            "point": i + 1,
            "params": {"replicator": r, "load.rate": rate},
            "tps": rate * 0.99,
            "lag_slope": 0.0,
        }
        for i, (r, rate) in enumerate((r, rate) for r in replicators for rate in (50, 300))
    ]
    (run / "summary.json").write_text(json.dumps(summary))
    done = subprocess.run(
        ["make", "-s", "report", f"RUN={run}"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = (run / "report.md").read_text()
    assert "{'" not in text and "':" not in text, [line for line in text.splitlines() if "{'" in line][:3]
    assert "| # | replicator | load rate | RTT asked / measured (ms) |" in text  # a column per swept key
    assert "| 4 | DTLE (group max size 1 MiB, group timeout auto, repl chan buffer size 600) | 300 TPS |" in text
    assert "| 1 | native, uncompressed | 50 TPS |" in text


def overlaps(boxes) -> list[tuple]:
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]


def test_the_sweep_plot_puts_the_numeric_key_on_x_and_no_label_overlaps_another():
    """The categorical key (replicator) becomes the lines, in words; the write rate goes on x; at
    1400 px no tick label overlaps another, nor an axis label its neighbour's panel."""
    import json

    from laglab.scenarios.report import plots

    summary = json.loads((FIXTURES / "run" / "summary.json").read_text())
    replicators = [{"kind": "native", "compression": "uncompressed"},
                   {"kind": "dtle", "group_max_size": 1048576, "group_timeout_ms": "auto", "repl_chan_buffer_size": 600}]  # fmt: skip
    template = summary["points"][0]
    rates = [50, 100, 150, 200, 300, 400, 500, 600, 800]
    summary["sweep"] = {"replicator": replicators, "load.rate": rates}
    summary["points"] = [
        {**template, "params": {"replicator": r, "load.rate": rate}} for r in replicators for rate in rates
    ]
    fig = plots.sweep_figure(summary)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert fig.get_size_inches()[0] * fig.dpi <= 1400
    panels = fig.get_axes()
    for ax in panels:
        assert ax.get_xlabel() == "load rate (TPS)"
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
        assert ticks and not overlaps(ticks), ax.get_ylabel()
        assert [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")] == [
            "native, uncompressed", "DTLE (group max size 1 MiB, group timeout auto, repl chan buffer size 600)"]  # fmt: skip
    link = panels[-1]  # the asked link rate (2 Mbit/s, the same at every point) is drawn on the link panel
    assert [line.get_ydata()[0] for line in link.get_lines()[2:]] == [2.0], "the asked link rate as a line"
    labels = [ax.yaxis.label.get_window_extent(renderer) for ax in panels]
    frames = [ax.get_window_extent(renderer) for ax in panels]
    for i, label in enumerate(labels):  # a y label stays clear of the panel to its left
        assert i == 0 or not label.overlaps(frames[i - 1]), panels[i].get_ylabel()
