"""Defects the fuzzer found in the runs API (issue #22), each against the real app and blueprint: five
POSTs at once start one run; a run deleted while queued is interrupted at once, never `running`."""

import threading

import pytest

from laglab.scenarios.plan import load_text
from laglab.scenarios.run.runner import ScenarioRun

from ..conftest import authorized
from .fakes import run_parts, shaping_manager

SCENARIO = "name: race\n"


@pytest.fixture
def lab(app, tmp_path, monkeypatch):
    the_lab = app.extensions["laglab"]  # its run parts: the real ones over the fakes (fakes.fake_lab)
    release = threading.Event()
    monkeypatch.setattr(ScenarioRun, "_main", _lasting(release))
    monkeypatch.setattr(ScenarioRun, "__init__", _slow_init(ScenarioRun.__init__))
    yield the_lab
    release.set()
    for run in the_lab.runs.values():
        run.wait(10)


def _lasting(release):
    """A run that lasts until the test ends, then closes its files as a real one does."""

    def main(run):
        release.wait(10)
        for series in (run._load_series, run._lag_series, run._link_series):
            series.close()

    return main


def _slow_init(original):
    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        threading.Event().wait(0.02)  # the results folder on a busy disk: room for a second request

    return init


def test_five_posts_at_once_start_exactly_one_run(app, lab):
    barrier = threading.Barrier(5)
    codes = []

    def post():
        with authorized(app) as client:
            barrier.wait()
            codes.append(client.post("/api/runs", json={"scenario": SCENARIO}).status_code)

    threads = [threading.Thread(target=post) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(codes) == [201, 409, 409, 409, 409]
    assert len(lab.runs) == 1


def test_a_run_deleted_while_queued_is_interrupted_at_once(app, lab, client):
    created = client.post("/api/runs", json={"scenario": SCENARIO}).json
    deleted = client.delete(f"/api/runs/{created['id']}")
    assert deleted.status_code == 202 and deleted.json["status"] == "interrupted"
    assert client.get(f"/api/runs/{created['id']}").json["status"] == "interrupted"
    again = client.post("/api/runs", json={"scenario": SCENARIO})
    assert again.status_code == 409 and "still cleaning up" in again.json["error"]  # its cleanup has not run


def test_a_cancelled_run_never_shows_running_and_skips_its_points(tmp_path, monkeypatch):
    points = []
    run = ScenarioRun(run_parts(shaping_manager(tmp_path)), load_text(SCENARIO), tmp_path, SCENARIO)
    run._run_point = points.append
    run.cancel()
    assert run.status == "interrupted"
    run.start()
    run.wait(10)
    assert (run.status, run.reason, run.step, points) == ("interrupted", "cancelled by request", "done", [])
