"""#52.3: `DELETE /api/runs/<id>` ends a run within 2 s wherever it waits, its load included: during
the catch-up (the replica held by SOURCE_DELAY, so the GTID wait cannot end by itself), during a
sysbench point and during a mysqlslap point (before, one exec nothing could stop: it ran on in loadgen
after the run had ended). Judged from outside: the run's step as the API gives it, and the processes
in loadgen as its /proc lists them (loadgen has no procps: images/loadgen/packages)."""

from __future__ import annotations

import subprocess

import pytest

from laglab.replicators.db import server_dialect

from .conftest import query, wait_until

CATCH_UP = "waiting for the replica to catch up"
PREPARING = "preparing data for native"


def loadgen_tools(compose) -> set[str]:
    """The load tools running in loadgen (their /proc/<pid>/comm), through `docker exec` (a tenth of
    the time `compose exec` takes: the 2 s are judged by polling this)."""
    container = compose("ps", "-q", "loadgen").stdout.strip()
    listed = subprocess.run(["docker", "exec", container, "sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null"],
                            capture_output=True, text=True, timeout=30).stdout  # fmt: skip
    return {name for name in listed.split() if name in ("sysbench", "mysqlslap")}


def run_step(api, run_id: str) -> dict:
    return api.get(f"/api/runs/{run_id}").json()


def start(api, scenario: str) -> str:
    answer = api.post("/api/runs", json={"scenario": scenario}, timeout=30)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def cancelled_within_2_s(api, compose, run_id: str, waiting: str) -> dict:
    """DELETE, then within 2 s (wait_until fails the test after that): the run out of the step it
    waited in, nothing of its load in loadgen; returns the run as it was then."""
    assert api.delete(f"/api/runs/{run_id}").status_code == 202

    def over():
        run = run_step(api, run_id)
        return run["step"] != waiting and not loadgen_tools(compose) and run

    run = wait_until(over, 2.0, 0.05, f"the run to leave {waiting!r} with no load left in loadgen")
    wait_until(lambda: run_step(api, run_id)["step"] == "done", 120, 0.5, "the run's cleanup to end")
    return run


@pytest.fixture
def held_replica(api, target):
    """A replica that applies nothing for an hour: the catch-up waits for good. Put back after any run
    has ended (a run still going would race the delay's STOP/CHANGE/START with its own)."""
    dialect = server_dialect(target)

    def delay(seconds: int) -> None:
        query(target, f"{dialect.stop_replica} SQL_THREAD")
        query(target, dialect.set_source_delay(seconds))
        query(target, f"{dialect.start_replica} SQL_THREAD")

    delay(3600)
    try:
        yield
    finally:
        for run in api.get("/api/runs").json()["runs"]:
            if run["step"] != "done":
                api.delete(f"/api/runs/{run['id']}")
        wait_until(
            lambda: all(r["step"] == "done" for r in api.get("/api/runs").json()["runs"]), 180, 0.5, "runs to end"
        )
        delay(0)


def test_a_run_cancelled_in_the_catch_up_ends_at_once(api, compose, source, held_replica):
    query(source, "DROP TABLE IF EXISTS lab.it_cancel")  # something for the replica to wait for
    run_id = start(api, "name: cancel-catch-up\nload: {rate: 10, duration: 30s}\nwarmup: 0s\n")
    # The first point waits for the replica in its catch-up, or in the data set's preparation (when the
    # sysbench tables had to be made first: their exec ends by itself, then the same wait).
    step = wait_until(
        lambda: (r := run_step(api, run_id))["step"] in (CATCH_UP, PREPARING) and not loadgen_tools(compose) and r["step"],
        300, 0.5, "the run to wait for the held replica",
    )  # fmt: skip
    run = cancelled_within_2_s(api, compose, run_id, step)
    assert run["status"] == "interrupted" and run["step"] != step, run


def test_a_run_cancelled_in_a_sysbench_point_stops_its_sysbench(api, compose):
    run_id = start(api, "name: cancel-sysbench\nload: {rate: 20, duration: 120s}\nwarmup: 0s\n")
    wait_until(lambda: run_step(api, run_id)["step"] == "load (measuring)" and "sysbench" in loadgen_tools(compose),
               300, 0.5, "sysbench to run")  # fmt: skip
    run = cancelled_within_2_s(api, compose, run_id, "load (measuring)")
    assert run["status"] == "interrupted" and run["step"] != "load (measuring)", run
    assert not loadgen_tools(compose)


def test_a_run_cancelled_in_a_mysqlslap_point_stops_its_mysqlslap(api, compose):
    run_id = start(api, "name: cancel-mysqlslap\nload: {tool: mysqlslap, threads: 2, queries: 1000000}\nwarmup: 0s\n")
    wait_until(lambda: "mysqlslap" in loadgen_tools(compose), 300, 0.5, "mysqlslap to run")
    run = cancelled_within_2_s(api, compose, run_id, "load (measuring)")
    assert run["status"] == "interrupted" and run["step"] != "load (measuring)", run
    assert not loadgen_tools(compose)
