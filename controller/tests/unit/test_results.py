import csv
import json
from pathlib import Path

from laglab.measurement import results
from laglab.measurement.results import Run, iso


def test_run_folder_and_streamed_series(tmp_path):
    run = Run(tmp_path, "live", {"flavor_setting": "mysql"})
    assert run.path.parent == tmp_path
    assert run.path.name.endswith("-live")
    meta = json.loads((run.path / "run.json").read_text())
    assert meta["name"] == "live"
    assert meta["flavor_setting"] == "mysql"
    series = run.series("lag.csv", ["time", "lag_seconds"])
    series.append({"time": "t1", "lag_seconds": 0.5, "extra": "ignored"})
    # Readable before close: every row is flushed as it is written.
    rows = list(csv.DictReader((run.path / "lag.csv").read_text().splitlines()))
    assert rows == [{"time": "t1", "lag_seconds": "0.5"}]
    series.append({"time": "t2", "lag_seconds": None})
    series.close()
    rows = list(csv.DictReader((run.path / "lag.csv").read_text().splitlines()))
    assert rows[1] == {"time": "t2", "lag_seconds": ""}


def test_two_runs_in_the_same_second_get_distinct_folders(tmp_path):
    assert Run(tmp_path, "live").path != Run(tmp_path, "live").path


def test_a_folder_another_controller_made_meanwhile_is_not_taken_nor_fatal(tmp_path, monkeypatch):
    """Two labs share a checkout's results/ (make test runs a second one): the other controller's mkdir
    may land between a look and ours. Here every look says "free" (as a lost race would), and the one
    in the way is made first: the run takes the next name instead of failing."""
    monkeypatch.setattr(results, "utc_stamp", lambda epoch=None: "20261207T101950Z")
    (tmp_path / "20261207T101950Z-live").mkdir()
    monkeypatch.setattr(Path, "exists", lambda self: False)
    assert Run(tmp_path, "live").path.name == "20261207T101950Z-live-2"


def test_iso_has_microseconds():
    assert iso(0.25) == "1970-01-01T00:00:00.250000Z"


def test_results_readme_names_every_column_the_code_writes():
    """#36.5: results/README.md listed 11 of the live lag.csv's 17 columns and left out events.csv and
    the live links.csv."""
    from pathlib import Path

    from laglab.measurement import counters, lag
    from laglab.scenarios.run import runner, timeline

    text = (Path(__file__).resolve().parents[3] / "results" / "README.md").read_text()
    for where, columns in (
        ("`<time>-live/lag.csv`", lag.COLUMNS),
        ("`<time>-live/links.csv`", counters.COLUMNS),
        ("`<time>-<scenario>/lag.csv`", runner.LAG_COLUMNS),
        ("`<time>-<scenario>/links.csv`", runner.LINK_COLUMNS),
        ("`<time>-<scenario>/load.csv`", runner.LOAD_COLUMNS),
        ("`<time>-<scenario>/events.csv` (scenarios with a timeline)", timeline.EVENT_COLUMNS),
    ):
        row = f"| {where} | " + ", ".join(f"`{c}`" for c in columns) + " |"
        assert row in text, f"results/README.md: {where} is not listed as the code writes it"
    assert "lag_error_seconds" in runner.LAG_COLUMNS, "a run's lag.csv keeps the reading's error bound"
