"""The monitoring profile as a user starts it (`scripts/up` with PROFILE=monitoring) on a machine where
Docker Hub is out of reach: Prometheus runs from its Debian stand-in (or the official image where it
can be pulled), scrapes the controller with the shipped configuration and answers a query; Grafana,
which has no Debian package, is left out with a message rather than stopping the profile."""

import json
import os
import subprocess
import urllib.request

import pytest

from .conftest import ROOT, wait_until

PROMETHEUS = "http://127.0.0.1:9090"


@pytest.fixture(scope="module")
def monitoring_up(compose):
    up = subprocess.run([str(ROOT / "scripts/up")], env={**os.environ, "PROFILE": "monitoring"},
                        capture_output=True, text=True, timeout=1800)  # fmt: skip
    try:
        yield up
    finally:
        compose("--profile", "monitoring", "rm", "--stop", "--force", "prometheus", "grafana", check=False)


def query(expression: str) -> dict:
    url = f"{PROMETHEUS}/api/v1/query?query={expression}"
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - the lab's own Prometheus
        return json.load(response)


def test_prometheus_scrapes_the_lag_and_answers_a_query(monitoring_up, compose):
    assert monitoring_up.returncode == 0, monitoring_up.stderr[-3000:]
    images = compose("--profile", "monitoring", "images", "--format", "json", "prometheus").stdout
    grafana_running = "grafana" in compose("--profile", "monitoring", "ps", "--services").stdout
    if not grafana_running:  # where Grafana's image is not to be had, make up said so
        assert "the monitoring profile starts without it" in monitoring_up.stderr, monitoring_up.stderr[-2000:]

    def answered():
        try:
            found = query("laglab_replication_lag_seconds")
        except OSError:
            return None
        results = found["data"]["result"] if found.get("status") == "success" else []
        return [r for r in results if r["metric"].get("replica") == "mysql-target"]

    (series,) = wait_until(answered, timeout=60)
    assert series["metric"]["job"] == "laglab"
    assert float(series["value"][1]) < 5.0, series  # the lab is idle: the replica keeps up
    assert json.loads(images) and "prometheus" in images
