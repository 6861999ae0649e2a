"""The controller image carries the shipped scenarios (on Kubernetes nothing mounts ./scenarios):
every file of the repository's scenarios/ loads in the image as `GET /api/scenarios` loads it, with
its traces, and none is missing."""

from __future__ import annotations

import json
import subprocess

import pytest

from .conftest import ROOT

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab

LOAD_ALL = """
import json
from pathlib import Path
from laglab.scenarios.plan import load_text
out = {}
for path in sorted(Path("/scenarios").glob("*.yaml")):
    for quick in (False, True):
        plan = load_text(path.read_text(), quick=quick, base_dir=Path("/scenarios"))
    out[path.name] = plan.most_points()
print(json.dumps(out))
"""


def test_every_shipped_scenario_loads_in_the_controller_image_without_a_mount():
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "laglab/controller:dev", "python", "-c", LOAD_ALL],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout)
    assert sorted(loaded) == sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml"))
    assert all(points >= 1 for points in loaded.values()), loaded
