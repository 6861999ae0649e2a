"""Fixtures shared by unit test modules."""

from __future__ import annotations

import pytest

from laglab.scenarios.runner import ScenarioRun


@pytest.fixture
def scenario_runs(tmp_path):
    """ScenarioRuns of plans, driven without their thread (a test calls their steps); their files are
    closed after the test."""
    made = []

    def make(plan, lab=None, text=""):
        made.append(ScenarioRun(lab, plan, tmp_path, text))
        return made[-1]

    yield make
    for run in made:
        for series in (run._load_series, run._lag_series, run._link_series):
            series.close()
