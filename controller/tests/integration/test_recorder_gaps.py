"""The recorder records a stopped target as a gap with its reason, and resumes by itself."""

import time

import pytest

from .conftest import wait_until

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab


def test_target_stop_is_a_gap_then_recording_resumes(api, compose):
    before = api.get("/api/health").json()["recorder"]
    assert before["running"]
    compose("stop", "mysql-target")
    stopped_at = time.time()
    try:

        def gaps_since_stop():
            window = api.get("/api/lag?seconds=10").json()["samples"]
            found = [s for s in window if s["epoch"] > stopped_at + 0.5]
            return found if len(found) >= 10 else None

        gaps = wait_until(gaps_since_stop, 15, 0.2, "samples must keep coming while the target is down")
        assert all(s["status"] == "gap" for s in gaps)
        assert all(s["reason"].startswith("mysql-target: ") for s in gaps), {s["reason"] for s in gaps}
    finally:
        compose("start", "mysql-target")
    restarted_at = time.time()

    def ok_again():
        latest = api.get("/api/lag?seconds=1").json()["latest"]
        return latest and latest["epoch"] > restarted_at and latest["status"] == "ok" and latest["lag_seconds"] < 0.5

    wait_until(ok_again, 90, interval=0.5, message="ok lag samples after the target came back")
    health = api.get("/api/health").json()["recorder"]
    assert health["running"]
    assert health["samples"] >= before["samples"]
    # The target is a replica again (healthcheck: both threads running) before the next test.
    wait_until(
        lambda: "healthy" in compose("ps", "mysql-target", "--format", "{{.Status}}").stdout, 120, 1, "target healthy"
    )
