"""Optional profiles whose images have no Debian stand-in stop `make up` before anything starts,
naming the images to provide (here no registry is reachable, so this is what users on such a host see).
The monitoring profile is not one of them any more: Prometheus has a stand-in and Grafana is left out
(test_monitoring.py)."""

import os
import subprocess

import pytest

from .conftest import ROOT

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab

PROFILES = {
    "dtle": ["actiontech/dtle:4.22.11.0", "hashicorp/consul:1.15"],
    "dm": ["pingcap/dm:v8.5.3", "pingcap/tidb:v8.5.3"],
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_profile_without_its_images_stops_before_starting_anything(profile, settings):
    present = [
        i
        for i in PROFILES[profile]
        if subprocess.run(["docker", "image", "inspect", i], capture_output=True).returncode == 0
    ]
    if present:
        pytest.skip(f"{present} present on this engine: the refusal path cannot be exercised")
    # The lab's containers (its project): another lab may start and stop its own meanwhile (make test's).
    listing = ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={settings.COMPOSE_PROJECT_NAME}"]
    before = subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split()
    done = subprocess.run(
        [str(ROOT / "scripts/up")], env={**os.environ, "PROFILE": profile}, capture_output=True, text=True, timeout=600
    )
    assert done.returncode != 0
    assert f"profile {profile} needs" in done.stderr, done.stderr[-2000:]
    for image in PROFILES[profile]:
        assert image in done.stderr
    assert subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split() == before, (
        "nothing was started"
    )


def test_unknown_profile_is_refused():
    done = subprocess.run(
        [str(ROOT / "scripts/up")], env={**os.environ, "PROFILE": "oracle"}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "PROFILE: 'oracle' is not a profile of this lab" in done.stderr
