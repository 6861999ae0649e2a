"""The timeline against the real shaping and fault managers over a fake platform (tests/unit/fakes.py):
steps in time order, their undo after a duration, repeats, trace rows, what stop() undoes, and the
events it reports."""

import dataclasses
import inspect
import time

import pytest

from laglab.deadline import WALL
from laglab.faults import FaultManager
from laglab.measurement.captures import Captures
from laglab.scenarios.plan import load_text
from laglab.scenarios.run.parts import TimelineParts
from laglab.scenarios.run.timeline import TimelineRun
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping.manager import ShapingManager

from ..polling import wait_until
from .fakes import Spy, shaping_manager


def timeline_lab(tmp_path, log: list, detail: list | None = None, stopped: tuple[str, ...] = ()):
    """What a timeline drives: the real shaping and fault managers over one FakePlatform (Docker's
    answers: a kill of a stopped container refused...), their calls recorded in order; `stopped`:
    services whose containers are not running."""
    shaping = shaping_manager(tmp_path)
    for service in stopped:
        shaping.platform.lab[service] = dataclasses.replace(shaping.platform.lab[service], running=False)
    faults = FaultManager(shaping.platform, settle_timeout=5)
    return TimelineParts(Spy(shaping, log, "shaping", detail=detail), Spy(faults, log, "faults", detail=detail),
                         Captures(shaping.platform, shaping.executor, shaping, tmp_path / "captures"), WALL)  # fmt: skip


def logged(detail: list) -> list[tuple]:
    """What the steps asked of the managers, in order, in words a test compares: a change's (service,
    peer, delay, rate) and removes, a partition's sides, a fault's service, action and duration."""
    out = []
    for method, args, kwargs in detail:
        owner = ShapingManager if hasattr(ShapingManager, method) else FaultManager
        a = inspect.signature(getattr(owner, method)).bind(None, *args, **kwargs).arguments
        if method == "change":
            out.append(("change", [(s, r.peer, r.shaping.delay, r.shaping.rate) for s, r in a["puts"]],
                        list(a.get("removes", ()))))  # fmt: skip
        elif method == "partition":
            out.append(("partition", a["a"], a["b"], a.get("oneway", False)))
        elif method == "heal":
            out.append(("heal", a.get("partition_id")))
        elif method == "restore":
            out.append(("restore", sorted(a["saved"])))
        elif method == "inject":
            out.append(("inject", a["service"], a["action"], a.get("duration")))
        elif method == "undo":
            out.append(("undo", a["fault_id"]))
    return out


def run(tmp_path, timeline_yaml: str, length: float, wait_for: int):
    """The timeline's steps run; returns it, the managers' calls (method, *arguments) and its events."""
    plan = load_text(f"name: t\nload: {{duration: {length}s}}\ntimeline:\n{timeline_yaml}")
    detail, events = [], []
    lab = timeline_lab(tmp_path, [], detail)
    timeline = TimelineRun(lab, plan.points[0].plan().timeline, length, 1, events.append)
    timeline.start(time.time())
    wait_until(lambda: len(events) >= wait_for, timeout=10)
    return timeline, detail, events


def test_steps_run_in_time_order_and_undo_after_their_duration(tmp_path):
    timeline, detail, events = run(
        tmp_path,
        "  - {at: 0.3s, fault: {service: mysql-target, action: kill}, duration: 0.2s}\n"
        "  - {at: 0.1s, partition: {a: [mysql-source], b: [mysql-target], oneway: true}, duration: 0.1s}\n"
        "  - {at: 0ms, shaping: {link: [mysql-source, mysql-target], delay: 20ms}}\n",
        length=5,
        wait_for=5,
    )
    assert [entry[0] for entry in logged(detail)] == ["change", "partition", "heal", "inject", "undo"]
    timeline.stop()
    log = logged(detail)
    assert log[-1] == ("restore", [("mysql-source", "mysql-target"), ("mysql-target", "mysql-source")]), (
        "a point leaves the lab as it found it"
    )
    assert log[0][1] == [("mysql-source", "mysql-target", 0.02, None), ("mysql-target", "mysql-source", 0.02, None)]
    assert log[1][1:] == (["mysql-source"], ["mysql-target"], True)
    assert log[3][1:] == ("mysql-target", "kill", 0.2)
    assert [e["step"] for e in events[:5]] == [3, 2, 2, 1, 1]
    assert [e["ends_disruption"] for e in events[:5]] == [False, False, True, False, True]
    for event in events:
        assert event["effect_ms"] >= 0 and event["effect_epoch"] >= event["asked_epoch"]
    offsets = [round(e["asked_epoch"] - events[0]["asked_epoch"], 3) for e in events[:5]]
    assert offsets == [0.0, 0.1, 0.2, 0.3, 0.5], "asked at exactly its offset"


def test_every_repeats_within_the_window_and_stop_undoes_what_is_in_force(tmp_path):
    timeline, detail, events = run(
        tmp_path,
        "  - {at: 0s, every: 0.4s, duration: 0.2s, partition: {a: [mysql-source], b: [mysql-target]}}\n"
        "  - {at: 0.9s, shaping: {service: mysql-source, delay: 5ms}, duration: 60s}\n",
        length=1.0,
        wait_for=6,  # partition, heal at 0, 0.2 / 0.4, 0.6 / 0.8 / shaping at 0.9
    )
    timeline.stop()
    kinds = [entry[0] for entry in logged(detail)]
    assert kinds == ["partition", "heal", "partition", "heal", "partition", "change", "restore", "heal"], kinds
    assert events[-1]["text"].startswith("undo at the end of the point")
    assert events[-1]["ends_disruption"] is True


def test_a_trace_replays_its_rows_then_restores_the_link(tmp_path):
    timeline, detail, events = run(
        tmp_path,
        "  - at: 0s\n"
        "    duration: 0.45s\n"
        "    trace: {link: [mysql-source, mysql-target], loop: true,\n"
        "            rows: [{t: 0s, delay: 10ms}, {t: 0.1s, rtt: 60ms, rate: 2mbit}, {t: 0.2s}]}\n",
        length=5,
        wait_for=7,
    )
    timeline.stop()
    log = logged(detail)
    changes = [entry for entry in log if entry[0] == "change"]
    assert [c[1][0][2:] if c[1] else c[2] for c in changes[:4]] == [
        (0.01, None),
        (0.03, 2e6),
        [("mysql-source", "mysql-target"), ("mysql-target", "mysql-source")],  # an empty row clears the link
        (0.01, None),  # looped: period 0.3 s
    ]
    assert log[-1] == ("restore", [("mysql-source", "mysql-target"), ("mysql-target", "mysql-source")])
    # The row that clears the link eases it: the end of a disruption, whose catch-up is measured.
    rows = [(e["text"].split(": ", 1)[1], e["ends_disruption"]) for e in events if e["text"].startswith("trace m")]
    assert rows[:4] == [("delay 10ms", False), ("rate 2mbit delay 30ms", False), ("unshaped", True),
                        ("delay 10ms", False)]  # fmt: skip


def test_a_failing_step_is_an_event_with_its_error(tmp_path):
    """The fault manager's own refusal (the container is not running), as the event's error."""
    plan = load_text("name: t\ntimeline:\n  - {at: 0s, fault: {service: mysql-target, action: stop}}\n")
    events = []
    lab = timeline_lab(tmp_path, [], stopped=("mysql-target",))
    timeline = TimelineRun(lab, plan.points[0].plan().timeline, 5, 1, events.append)
    timeline.start(time.time())
    wait_until(lambda: events, timeout=5)
    timeline.stop()
    assert events[0]["error"] == "service: mysql-target is not running (it is exited)"


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("{at: 70s, heal: all}", "timeline.0.at: 70s is not within the measured window (load.duration 60s)"),
        ("{at: 1s, heal: all, duration: 2s}", "timeline.0.duration: heal is not undone; leave duration out"),
        ("{at: 1s, shaping: {service: a, delay: 5}}", "timeline.0.shaping.delay: 5 has no unit; write it like '5ms' (units: us, ms, s, m, h)"),
        ("{at: 1s, every: 5s, duration: 6s, partition: {a: [x], b: [y]}}", "timeline.0.duration: must be shorter than every (one occurrence is undone before the next)"),
        ("{at: 1s, trace: {link: [a, b], file: ../../etc/passwd}}", "timeline.0.trace.file: '../../etc/passwd' must be a path under the scenarios folder"),
        ("{at: 1s}", "timeline.0: give exactly one of capture, clear, fault, heal, partition, shaping, trace (got none)"),
    ],
)  # fmt: skip
def test_invalid_steps_name_the_key_path(step, message, tmp_path):
    with pytest.raises(ScenarioError) as caught:
        load_text(f"name: t\ntimeline:\n  - {step}\n", base_dir=tmp_path)
    assert str(caught.value) == message


def test_a_timeline_needs_a_load_that_lasts():
    with pytest.raises(ScenarioError) as caught:
        load_text("name: t\nload: {tool: mysqlslap}\ntimeline:\n  - {at: 0s, heal: all}\n")
    assert str(caught.value).startswith("timeline: needs a load that runs for load.duration")


def test_a_new_step_kind_is_one_registered_class(monkeypatch, tmp_path):
    """Issue #22: a step kind was an optional field of Step and a branch in four places of the runner."""
    from typing import ClassVar

    from laglab.scenarios.run import timeline
    from laglab.scenarios.schema.timeline import step_model
    from laglab.scenarios.steps import KINDS, StepKind

    class Beep(StepKind):
        name: ClassVar[str] = "beep"
        loud: bool = False
        done: ClassVar[list] = []

        def describe(self) -> str:
            return f"beep{' loudly' if self.loud else ''}"

        def do(self, run, key, step):
            Beep.done.append((run.point, self.loud))
            return 123.0, True

    monkeypatch.setitem(KINDS, "beep", Beep)
    step = step_model().model_validate({"at": "0s", "beep": {"loud": True}})
    assert (step.action, step.kind.describe()) == ("beep", "beep loudly")
    events = []
    run = timeline.TimelineRun(timeline_lab(tmp_path, []), [step], 5.0, 7, events.append)
    [(_, _, number, text, fn)] = run._schedule()
    run._run(number, text, 100.0, fn)
    assert Beep.done == [(7, True)]
    assert (events[0]["action"], events[0]["text"], events[0]["effect_ms"]) == ("beep", "beep loudly", 23000.0)
