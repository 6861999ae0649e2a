"""Domain errors say what went wrong; errors.py alone says which HTTP status answers it (issue #22:
`ShapingError(409, ...)` in the shaping manager, `FaultError(422, ...)` in the fault manager)."""

import re
from pathlib import Path

import pytest

from laglab.errors import STATUS, ApiError, Kind, LabError, status_of

LAGLAB = Path(__file__).resolve().parents[2] / "laglab"


def test_no_domain_module_writes_an_http_status():
    found = []
    for path in LAGLAB.rglob("*.py"):
        if path.parent.name == "api" or path.name in ("errors.py", "openapi.py", "app.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"Error\(\s*[1-5][0-9][0-9]\b|status=[1-5][0-9][0-9]", line):
                found.append(f"{path.relative_to(LAGLAB)}:{number}: {line.strip()}")
    assert found == []


@pytest.mark.parametrize(("kind", "status"), [(Kind.NOT_FOUND, 404), (Kind.CONFLICT, 409), (Kind.INVALID, 422),
                                              (Kind.MALFORMED, 400), (Kind.FAILED, 502), (Kind.TIMED_OUT, 504)])  # fmt: skip
def test_each_kind_has_its_status_and_the_api_answers_it(app, client, kind, status):
    assert STATUS[kind] == status and status_of(LabError(kind, "x: y")) == status
    assert status_of(ApiError(status, "x: y")) == status and ApiError(status, "x").kind is kind

    @app.get("/raise")
    def _raise():
        raise LabError(kind, "field: what is wrong")

    answer = client.get("/raise")
    assert (answer.status_code, answer.json) == (status, {"error": "field: what is wrong", "status": status})


def test_poll_returns_the_first_truthy_value_and_sleeps_through_the_callers_sleep():
    from laglab.deadline import TimedOut, poll

    values, slept = iter([None, 0, "ready"]), []
    assert poll(lambda: next(values), 5, 0.25, sleep=slept.append) == "ready"
    assert slept == [0.25, 0.25]

    class Interrupted(Exception):
        pass

    def cancelled(_seconds):
        raise Interrupted  # a cancelled run's sleep: the wait ends with the run

    with pytest.raises(Interrupted):
        poll(lambda: False, 60, 1.0, sleep=cancelled)
    with pytest.raises(TimedOut, match=r"the replica: not within 0\.01s") as caught:
        poll(lambda: False, 0.01, 0.005, what="the replica")
    assert status_of(caught.value) == 504
    with pytest.raises(RuntimeError, match="its own words"):
        poll(lambda: False, 0.01, 0.005, timed_out=lambda: RuntimeError("its own words"))


def test_poll_tells_the_value_from_whether_it_is_the_answer():
    """#52.3: a value that is falsy can be the answer (an exec's PID of 0 once it is over, as Docker's
    exec inspect says it: `Pid: 0, Running: false`); `done` says which value ends the wait."""
    from laglab.deadline import poll

    answers = iter([{"Pid": 0, "Running": True}, {"Pid": 0, "Running": False}, {"Pid": 42, "Running": True}])
    over = poll(lambda: next(answers), 5, 0.05, sleep=lambda _s: None, done=lambda i: i["Pid"] or not i["Running"])
    assert over == {"Pid": 0, "Running": False}
