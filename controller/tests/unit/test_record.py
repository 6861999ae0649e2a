"""A point's and a run's record (#52.1, scenarios/analysis/record.py): the runner writes exactly the
declared record, a writer that spells a figure another way fails where it writes, and summary.json is
validated when it is read back, any earlier version's included."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from laglab.cli import cli
from laglab.scenarios.analysis.record import NotASummary, PointRecord, RunRecord, read_summary
from laglab.scenarios.report import markdown as report

from .fakes import point_record
from .test_outcome import measured, run_of, written

STORED = Path(__file__).parent / "fixtures" / "run"  # a run's folder as an earlier laglab wrote it


def test_the_runner_writes_exactly_the_declared_record(tmp_path):
    doc, _md, _html = written(tmp_path, run_of([measured(), measured(lag=3.0)]))
    record = RunRecord.model_validate(doc)  # strict: every field declared, none missing, none extra
    assert [p.point for p in record.points] == [1, 1] and record.points[1].outcome.verdict == "FAIL"
    assert record.as_json() == doc  # summary.json is the record's serialisation, nothing else


def test_a_figure_spelled_another_way_fails_where_it_is_written():
    with pytest.raises(ValidationError, match="max_lag_secs"):
        point_record(max_lag_secs=1.0)
    with pytest.raises(ValidationError, match="max_lag_seconds"):
        point_record(max_lag_seconds="1.2 s")
    with pytest.raises(ValidationError, match="lag_samples"):
        PointRecord.model_validate({k: v for k, v in point_record().as_json().items() if k != "lag_samples"})


def test_an_earlier_versions_summary_is_read_and_a_wrong_one_is_refused_naming_the_field(tmp_path):
    assert read_summary(STORED)["points"]  # written before the record was declared: fields missing, read
    folder = tmp_path / "run"
    shutil.copytree(STORED, folder)
    doc = json.loads((folder / "summary.json").read_text())
    doc["points"][0]["max_lag_seconds"] = "high"
    (folder / "summary.json").write_text(json.dumps(doc))
    with pytest.raises(NotASummary, match=r"summary.json: points\.0\.max_lag_seconds: Input should be a valid number"):
        report.render(folder)
    ran = CliRunner().invoke(cli, ["report", str(folder)])
    assert ran.exit_code == 2 and "points.0.max_lag_seconds" in ran.output, ran.output
    (folder / "summary.json").write_text("{")
    with pytest.raises(NotASummary, match="not JSON"):
        read_summary(folder)
