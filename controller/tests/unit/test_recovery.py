"""#35.4: a controller that died (SIGKILL, the OOM killer) leaves nothing broken: the next start undoes
or re-arms its faults, ends its run, does not re-apply what expired, and sets aside a state file it
cannot read. The real crash is in tests/integration/test_crash_recovery.py; these drive each part with
the fakes, starting a second manager over the first one's files as the restarted controller does."""

from __future__ import annotations

import json
import time

from laglab.faults import FaultManager
from laglab.scenarios.run import orphan
from laglab.shaping import backends
from laglab.shaping.executor import Executor
from laglab.shaping.manager import ShapingManager
from laglab.shaping.params import parse_request
from laglab.state.events import Events
from laglab.state.problems import Problems
from laglab.state.recovery import Restart

from .fakes import FakePlatform
from .test_manager import LAB


def platform():
    return FakePlatform.running_services("mysql-source", "mysql-target", "loadgen")


def test_a_paused_container_is_re_armed_after_a_crash_and_undone_when_its_time_ran_out(tmp_path):
    lab = platform()
    state = tmp_path / "faults.json"
    first = FaultManager(lab, events=Events(), settle_timeout=2, state_path=state)
    fault = first.inject("mysql-target", "pause", duration=600)
    fault._timer.cancel()  # SIGKILL: the timer dies with the process
    assert lab.paused["mysql-target"] and json.loads(state.read_text())[0]["id"] == fault.id

    restart = Restart()
    second = FaultManager(lab, events=Events(), settle_timeout=2, state_path=state)
    second.recover(restart)
    (again,) = second.active()
    assert again.id == fault.id and lab.paused["mysql-target"], "re-armed, not undone early"
    assert restart.faults == [f"{fault.id} (pause mysql-target) re-armed: unpause in 600s"]
    again._timer.cancel()
    assert second.inject("mysql-source", "restart").id == "f2"  # ids go on after the restart

    # Its time runs out while the controller is down: undone at the next start.
    items = json.loads(state.read_text())
    items[0]["effect"] = items[0]["asked"] = time.time() - 601
    state.write_text(json.dumps(items))
    later = Restart()
    third = FaultManager(lab, events=Events(), settle_timeout=2, state_path=state)
    third.recover(later)
    assert not lab.paused["mysql-target"] and third.active() == []
    assert later.faults[0].endswith("undone: its 600s ran out while the controller was down")
    assert json.loads(state.read_text()) == []


def test_a_fault_pushed_out_of_the_history_can_still_be_undone(tmp_path):
    lab = platform()
    faults = FaultManager(lab, events=Events(), keep=3, settle_timeout=2, state_path=tmp_path / "f.json")
    paused = faults.inject("mysql-target", "pause", duration=600)
    for _ in range(5):
        faults.inject("mysql-source", "restart")
    assert paused.id not in [f["id"] for f in faults.listing()["recent"]]
    assert [f["id"] for f in faults.listing()["active"]] == [paused.id]
    assert faults.undo(paused.id) is paused and not lab.paused["mysql-target"]


def test_shaping_that_expired_while_the_controller_was_down_is_not_applied_even_for_a_moment(tmp_path):
    state = tmp_path / "shaping.json"
    first = ShapingManager(FakePlatform(LAB), Executor(dry_run=True), backends.KernelBackend(), state)
    first.put("mysql-source", parse_request({"delay": "77ms", "duration": "60s"}))
    first.put("mysql-target", parse_request({"delay": "33ms"}))
    saved = json.loads(state.read_text())
    for entry in saved["entries"]:
        if entry.get("expires_at"):
            entry["expires_at"] = time.time() - 1
    state.write_text(json.dumps(saved))

    restart = Restart()
    second = ShapingManager(FakePlatform(LAB), Executor(dry_run=True), backends.KernelBackend(), state)
    second.start(interval=60, restart=restart)
    second.stop(clear_kernel=False)
    ran = [" ".join(argv) for argv in second.executor.ran]
    assert not any("77ms" in line for line in ran), "the expired entry was applied"
    assert any("33ms" in line for line in ran)
    assert restart.shaping[0] == "mysql-source -> all: duration over, cleared (while the controller was down)"


def started_over(state, restart: Restart) -> ShapingManager:
    """A shaping manager started on what a dead controller left in `state`, as the next start does."""
    manager = ShapingManager(FakePlatform(LAB), Executor(dry_run=True), backends.KernelBackend(), state)
    manager.start(interval=60, restart=restart)
    manager.stop(clear_kernel=False)
    return manager


def test_an_unreadable_shaping_file_is_set_aside_not_a_crash_loop(tmp_path):
    state = tmp_path / "shaping.json"
    state.write_text('{"entries": [')
    restart = Restart()
    manager = started_over(state, restart)
    kept = list(tmp_path.glob("shaping.json.unreadable-*"))
    assert len(kept) == 1 and kept[0].read_text() == '{"entries": ['
    assert (
        manager.desired.entries == {}
        and "could not be read" in restart.set_aside[0]
        and kept[0].name in restart.set_aside[0]
    )


class Lab(orphan.Parts):
    """orphan.Parts with a shaping that counts its clears; no replicator kind is restored here (DTLE's
    is a repair on /api/health)."""

    def __init__(self, tmp_path, platform):
        self.cleared = 0

        class Shaping:
            @staticmethod
            def clear():
                self.cleared += 1

        super().__init__(tmp_path, platform, Executor(dry_run=True), Shaping(), Problems(), replicator=None)


def test_a_run_cut_short_by_a_crash_is_ended_at_the_next_start(tmp_path):
    results = tmp_path / "results" / "20261126T000000Z-x"
    results.mkdir(parents=True)
    (results / "summary.json").write_text(json.dumps({"id": results.name, "status": "running", "points": [{}]}))
    marker = orphan.RunMarker(tmp_path, results.name, results)
    marker.write()
    marker.kind_used("dtle")
    marker.buffers_before("mysql-target", {"wmem": "4096 16384 4194304", "rmem": "4096 131072 6291456"})
    # pkill's exit code: 0 when it matched a process, 1 when none (procps pkill(1))
    fake = platform()
    fake.execs["loadgen"] = lambda argv: (0, b"") if argv[-1] == "sysbench" else (1, b"")
    lab = Lab(tmp_path, fake)
    restart = Restart()
    orphan.recover(lab, restart)

    assert ("loadgen", ["pkill", "-TERM", "-x", "sysbench"], None) in fake.ran
    assert lab.cleared == 1
    assert any("net.ipv4.tcp_wmem=4096 16384 4194304" in " ".join(argv) for argv in lab.executor.ran)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["reason"].startswith("the controller stopped during the run")
    assert summary["points"] == [{}], "what the run measured is kept"
    assert [p["problem"] for p in lab.problems.current()] == ["dtle-interrupted-run"]
    assert lab.problems.current()[0]["repair"] == "make up PROFILE=dtle"
    assert restart.run.startswith(f"run {results.name} interrupted: load stopped (sysbench); shaping cleared")
    assert not (tmp_path / "run.json").exists()
    again = Restart()
    orphan.recover(lab, again)
    assert again.run is None and lab.cleared == 1, "a clean start ends nothing"


def test_a_container_that_stops_between_the_check_and_the_call_is_a_conflict_not_a_failure():
    """Seen in the conformance run: Docker answers a kill of a container that another request had just
    killed with 409 ('container ... is not running'), which came out as our 502."""
    import dataclasses

    from laglab.errors import status_of
    from laglab.faults import FaultError
    from laglab.platforms import PlatformError

    class Racing(FakePlatform):
        def act(self, service, action):
            self.lab[service] = dataclasses.replace(self.lab[service], running=False)  # someone else's kill
            raise PlatformError(f"409 Client Error: Conflict (container {service} is not running)")

    lab = Racing.running_services("mysql-target")
    faults = FaultManager(lab, settle_timeout=2)
    try:
        faults.inject("mysql-target", "kill")
    except FaultError as error:
        assert status_of(error) == 409 and error.message == "service: mysql-target is not running (it is exited)"
    else:
        raise AssertionError("a refused kill was taken for done")


def test_a_faults_file_with_entries_it_cannot_use_does_not_stop_the_start(tmp_path):
    state = tmp_path / "faults.json"
    state.write_text(json.dumps([{"id": "f1", "service": "mysql-target", "action": "melt", "duration": 5,
                                  "asked": 0, "effect": 0, "undo_action": "unmelt"},
                                 {"id": "f2", "service": "mysql-target", "action": "pause", "duration": None,
                                  "asked": 0, "effect": 0, "undo_action": "unpause"}, "f3", {"id": "f4"}]))  # fmt: skip
    restart = Restart()
    faults = FaultManager(platform(), settle_timeout=2, state_path=state)
    faults.recover(restart)
    # f2, a pause in force until undone, is a state (#36.2); its container runs, so it was undone already.
    assert faults.active() == [] and len(restart.set_aside) == 3
    assert restart.faults == ["f2 (pause mysql-target) found undone already"]
    assert faults.inject("mysql-target", "restart").id == "f5"


def test_a_shaping_file_of_valid_json_but_not_a_state_is_set_aside_too(tmp_path):
    state = tmp_path / "shaping.json"
    state.write_text('{"entries": [{"service": "mysql-source"}]}')
    restart = Restart()
    manager = started_over(state, restart)
    assert manager.desired.entries == {} and "KeyError" in restart.set_aside[0]
    assert len(list(tmp_path.glob("shaping.json.unreadable-*"))) == 1
