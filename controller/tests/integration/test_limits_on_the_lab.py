"""#35: the running controller (waitress, the real lab) answers a request over a limit at once, naming
it, and stays answering: the 15 KB sweep that held it for 13 s and 1 GiB, a body over 1 MiB, a second
long consistency check."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from laglab import limits

# Judged on what a busy host cannot change: make test runs it on a lab of its own (scripts/test).
pytestmark = pytest.mark.second_lab


def test_a_billion_point_sweep_is_refused_at_once_and_the_controller_stays_small(api, compose):
    values = {key: ", ".join(f"{n}{unit}" for n in range(1, 1001)) for key, unit in (("rate", "mbit"), ("rtt", "ms"))}
    text = f"name: x\nsweep:\n  link.rate: [{values['rate']}]\n  link.rtt: [{values['rtt']}]\n  load.threads: [{', '.join(map(str, range(1, 1001)))}]\n"
    before = compose("exec", "-T", "controller", "sh", "-c", "grep VmRSS /proc/1/status").stdout.split()[1]
    answer = api.post("/api/runs", json={"scenario": text}, timeout=30)
    assert answer.status_code == 422 and "limit points" in answer.json()["error"], answer.text
    after = compose("exec", "-T", "controller", "sh", "-c", "grep VmRSS /proc/1/status").stdout.split()[1]
    assert int(after) - int(before) < 50_000, f"RSS grew from {before} to {after} kB for a refused request"
    assert api.get("/api/runs").json()["runs"] == [] or all(
        r["scenario"] != "x" for r in api.get("/api/runs").json()["runs"]
    )


def test_a_body_over_the_limit_is_413_from_the_controller_and_from_waitress(api):
    big = b'{"scenario": "' + b"x" * limits.BODY_BYTES + b'"}'
    assert post(api, big) == 413

    def chunks():  # no Content-Length: waitress counts what arrives and stops at its own bound
        for _ in range(3 * limits.BODY_BYTES // 65536):
            yield b"x" * 65536

    assert post(api, chunks(), chunked=True) == 413
    assert api.get("/api/health").status_code == 200


def post(api, data, chunked: bool = False) -> int:
    request = urllib.request.Request(api.base + "/api/runs", data=data, method="POST")  # noqa: S310 - the lab's
    request.add_header("Authorization", f"Bearer {api.token}")
    request.add_header("Content-Type", "application/json")
    if chunked:
        request.add_header("Transfer-Encoding", "chunked")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310 - the lab's own controller
            return reply.status
    except urllib.error.HTTPError as error:
        body = error.read()
        # over the API's limit: its own error; over twice that, waitress stops it at the socket
        assert error.code != 413 or chunked or b"limit body" in body, body[:200]
        return error.code


def test_verify_never_measures_through_the_controllers_own_namespace(api):
    answer = api.post("/api/verify", json={"from": "controller", "to": "mysql-target", "throughput": False})
    assert answer.status_code == 409 and answer.json()["error"].startswith("from: controller is the lab's apparatus")
    fine = api.post("/api/verify", json={"from": "loadgen", "to": "mysql-source", "throughput": False})
    assert fine.status_code == 200, fine.text
