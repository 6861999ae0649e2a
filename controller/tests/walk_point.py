"""The walk of one scenario point (#37's figure): every laglab function called under
ScenarioRun._run_point in the unit tests' run (the real spec, runner, buffers, summary and shaping
manager over tests/unit/fakes.py; the replicator faked; the shaping manager's, executor's and host
load's own walks counted as one call each): calls, distinct functions, files, and climbs (a return
into runner.py from a function of another file: a callback).

    cd controller && PYTHONPATH=. ../.venv/bin/python -m tests.walk_point /tmp/walk
"""

import pathlib
import sys
import threading

import pytest

from tests.unit import test_replicator_plans as t

COLLAPSED = ("shaping/", "measurement/hostload.py")
calls, stack, climbs, state = [], [], [0], {"inside": False, "hidden": 0}


def prof(frame, event, arg):
    if event not in ("call", "return"):
        return
    f = frame.f_code.co_filename
    if "/laglab/" not in f or "/tests/" in f:
        return
    rel, name = f.split("/laglab/", 1)[1], frame.f_code.co_name
    if state["hidden"]:
        state["hidden"] += 1 if event == "call" else -1
        return
    if event == "call":
        if name == "_run_point" and rel == "scenarios/run/runner.py":
            state["inside"] = True
        if not state["inside"]:
            return
        if stack and rel == "scenarios/run/runner.py" and stack[-1] != rel:
            climbs[0] += 1
        calls.append((rel, name))
        if rel.startswith(COLLAPSED):
            state["hidden"] = 1  # this call's return brings it to 0
            return
        stack.append(rel)
    elif state["inside"] and stack:
        stack.pop()
        if not stack:
            state["inside"] = False


def main(folder: str) -> None:
    threading.setprofile(prof)
    sys.setprofile(prof)
    tmp = pathlib.Path(folder)
    tmp.mkdir(parents=True, exist_ok=True)
    scenario = "name: x\nlink: {rtt: 20ms}\nload: {tool: none, duration: 1s}\nwarmup: 0s\n"
    t.run_scenario(tmp, pytest.MonkeyPatch(), scenario)
    threading.setprofile(None)
    sys.setprofile(None)
    files = {c[0] for c in calls}
    print(
        f"{len(calls)} calls, {len(set(calls))} functions, {len(files)} files, {climbs[0]} climbs back into runner.py"
    )
    for f in sorted(files):
        print("  ", f, sum(1 for c in calls if c[0] == f))


if __name__ == "__main__":
    main(sys.argv[1])
