"""A scenario run's life with fakes: cancel -> interrupted, a failure keeps its reason, cleanup always
runs, and a stopping controller (SIGTERM -> app.shutdown) interrupts its run instead of leaving it
`running` with the load going and the replicator options changed."""

import json
import threading

from laglab.app import shutdown
from laglab.scenarios.plan import load_text
from laglab.scenarios.run.runner import ScenarioRun
from laglab.shaping.params import parse_request

from .fakes import point_record, run_parts, shaping_manager


class FakeReplicator:
    """The kind a run has used: cleanup must restore it; the run's end checks its consistency."""

    kind, consistency_scope, checks_unshaped = "native", "mysql-source -> mysql-target", False

    def __init__(self, restored):
        self.restored = restored

    def restore(self):
        self.restored.append(self.kind)

    def consistency(self, sleep=None):
        return {"identical": True, "differences": [], "gtid": None}


def make_run(tmp_path, point):
    lab = run_parts(shaping_manager(tmp_path))
    run = ScenarioRun(lab, load_text("name: life\n"), tmp_path, "name: life\n")
    restored = []
    run.kinds.current = run.kinds.used["native"] = FakeReplicator(restored)
    run._run_point = point
    return run, lab, restored


def shaped(lab):
    """A point's link shaped, as the runner does before its load (what cleanup must clear)."""
    lab.shaping.put("mysql-source", parse_request({"delay": "50ms", "peer": "mysql-target"}))
    assert lab.shaping.desired.entries


def summary(run):
    return json.loads((run.run.path / "summary.json").read_text())


def test_cancel_interrupts_and_cleanup_runs(tmp_path):
    started = threading.Event()

    def point(p):
        shaped(lab)
        started.set()
        run._sleep(30)

    run, lab, restored = make_run(tmp_path, point)
    run.start()
    assert started.wait(5)
    run.cancel()
    run.wait(10)
    assert (run.status, run.reason, run.step) == ("interrupted", "cancelled by request", "done")
    assert lab.shaping.desired.entries == {} and restored == ["native"]
    assert summary(run)["status"] == "interrupted"
    assert lab.lag._subscribers == []  # the run's subscription ended with it


def test_a_failure_keeps_its_reason_and_cleanup_still_runs(tmp_path):
    def point(p):
        shaped(lab)
        raise RuntimeError("the replica did not catch up within 300s")

    run, lab, restored = make_run(tmp_path, point)
    run.start()
    run.wait(10)
    assert (run.status, run.reason) == ("failed", "RuntimeError: the replica did not catch up within 300s")
    assert lab.shaping.desired.entries == {} and restored == ["native"]
    # The run still says whether anything was lost, once cleanup handed replication back.
    assert run.identical is True and summary(run)["consistency"]["identical"] is True


def test_a_failing_cleanup_step_is_reported_and_the_others_run(tmp_path):
    def point(p):
        shaped(lab)
        lab.shaping.executor.owns = lambda pid: False  # its containers restarted under the run (new PIDs)
        return point_record()

    run, lab, restored = make_run(tmp_path, point)
    run._check = lambda step: None
    run.start()
    run.wait(10)
    # The lab is not as the run found it: the run failed, and says which step and why.
    gone = ("ShapingError: applying failed and was rolled back: process 1000 is no longer a container of this "
            "lab; not entering it")  # fmt: skip
    assert run.status == "failed" and run.reason == f"cleanup: {gone}"
    assert run.cleanup_errors == [{"step": "ShapingManager.clear", "error": gone}]
    assert (
        summary(run)["cleanup_errors"] == run.cleanup_errors and run.as_json()["cleanup_errors"] == run.cleanup_errors
    )
    assert restored == ["native"]


class HandBackFailed(RuntimeError):
    problem, repair = "dtle-hand-back", "make up PROFILE=dtle"

    def __init__(self, message, repaired):
        super().__init__(message)
        self.repaired = repaired


def test_a_failed_hand_back_is_in_the_result_and_on_health_until_repaired(tmp_path):
    """Seen: the hand-back's failure was only in the controller's log; the run showed its first reason."""
    fixed = []

    def point(p):
        raise RuntimeError("DTLE did not catch up within 300s")

    run, lab, _restored = make_run(tmp_path, point)

    def restore():
        raise HandBackFailed("DTLE did not record the source's transactions within 300s", lambda: bool(fixed))

    run.kinds.current.restore = restore
    run.start()
    run.wait(10)
    assert run.status == "failed"
    assert run.reason == (
        "RuntimeError: DTLE did not catch up within 300s; "
        "cleanup: HandBackFailed: DTLE did not record the source's transactions within 300s"
    )
    assert summary(run)["cleanup_errors"][0]["repair"] == "make up PROFILE=dtle"
    assert summary(run)["consistency"] is None  # no check on a lab whose replication was not handed back
    [problem] = lab.problems.current()
    assert problem["problem"] == "dtle-hand-back" and problem["repair"] == "make up PROFILE=dtle"
    assert problem["message"].startswith(f"run {run.id}: DTLE did not record")
    fixed.append(True)  # `make up` resumed native replication
    assert lab.problems.current() == []


def test_a_stopping_controller_interrupts_its_run(tmp_path, app):
    started = threading.Event()

    def point(p):
        shaped(lab)
        started.set()
        run._sleep(60)

    run, lab, restored = make_run(tmp_path, point)
    app.extensions["laglab"].runs[run.id] = run
    run.start()
    assert started.wait(5)
    shutdown(app, clear_kernel=True, run_grace=10)
    assert (run.status, run.reason) == ("interrupted", "the controller is stopping")
    assert lab.shaping.desired.entries == {} and restored == ["native"] and summary(run)["status"] == "interrupted"


def run_json(run):
    return json.loads((run.run.path / "run.json").read_text())


def test_a_seeded_run_records_its_seed_seeds_the_links_while_it_runs_and_unseeds_them_after(tmp_path):
    """#40: the seed asked (or drawn for `random`) is in run.json and in each netem of the run's links;
    after the run, the links draw from the host's randomness again."""
    during = []

    def point(p):
        shaped(lab)
        during.append(lab.shaping.view.service("mysql-source", lab.platform.list(), readback=False))
        during.append([argv for argv in lab.shaping.executor.ran if "netem" in argv][-1])
        return point_record()

    lab = run_parts(shaping_manager(tmp_path))
    lab.shaping.backend.seed_taken = True  # a kernel whose netem keeps a seed (Linux 6.6+)
    run = ScenarioRun(lab, load_text("name: seeded\nseed: 1234\n"), tmp_path, "", seed=None)
    run.kinds.current = run.kinds.used["native"] = FakeReplicator([])
    run._run_point = point
    run.start()
    run.wait(10)
    assert run.status == "completed", run.reason
    meta = run_json(run)
    assert (meta["seed"], meta["seed_asked"], meta["seed_applies"], meta["seed_note"]) == (1234, 1234, "yes", None)
    assert during[1][-2] == "seed" and int(during[1][-1]) > 0  # the link's own seed, drawn from 1234
    assert lab.shaping.backend.seeded is None  # unseeded by the cleanup


def test_an_unseedable_host_says_so_and_random_draws_a_seed_that_is_recorded(tmp_path):
    lab = run_parts(shaping_manager(tmp_path))  # the dry run's tc prints nothing back: no seed kept
    run = ScenarioRun(lab, load_text("name: drawn\n"), tmp_path, "")
    run.kinds.current = run.kinds.used["native"] = FakeReplicator([])
    run._run_point = lambda p: point_record()
    run.start()
    run.wait(10)
    meta = run_json(run)
    assert meta["seed_asked"] == "random" and isinstance(meta["seed"], int) and 0 <= meta["seed"] < 2**32
    assert meta["seed_applies"] == "no" and meta["seed_note"].startswith("not seeded: this host's netem takes no seed")
    assert run.as_json()["seed"] == meta["seed"]


def disk_full_at(run, full) -> None:
    """The run's JSON writes refused as Linux refuses them on a full disk (ENOSPC) where `full(name)`."""
    written = run.run.write_json

    def write_json(name, data):
        if full(name):
            raise OSError(28, "No space left on device")
        written(name, data)

    run.run.write_json = write_json


def test_a_summary_that_cannot_be_written_at_the_end_still_ends_the_run(tmp_path):
    """A full disk (ENOSPC from the write, as Linux answers) while the run writes its last summary.json:
    the run still ends (`done`, not busy: the next run may start), its status stands and the write's
    failure is among its cleanup errors; the cleanup ran before it."""

    def point(p):
        shaped(lab)
        return point_record()

    run, lab, restored = make_run(tmp_path, point)
    disk_full_at(run, lambda name: name == "summary.json" and run.finished)  # the last one, after the cleanup
    run.start()
    run.wait(10)
    assert (run.step, run.busy, run.status) == ("done", False, "completed"), run.reason
    assert run.cleanup_errors == [{"step": "summary.json", "error": "OSError: [Errno 28] No space left on device"}]
    assert restored == ["native"] and lab.shaping.desired.entries == {}


def test_a_full_disk_when_the_run_starts_fails_that_run_and_the_next_one_may_start(tmp_path):
    """#54: results/ unwritable (ENOSPC, EPERM) as a run started: it wrote scenario.json before its `try`,
    the thread died, `step` never became `done`, and every later POST /api/runs and /api/load was 409
    until a restart. Now that run fails with the write's error and ends."""
    run, _, restored = make_run(tmp_path, lambda p: point_record())
    disk_full_at(run, lambda name: name == "scenario.json")
    run.start()
    run.wait(10)
    assert (run.step, run.busy, run.status) == ("done", False, "failed"), run.reason
    assert run.reason == "OSError: [Errno 28] No space left on device"
    assert restored == ["native"]  # its cleanup ran


def test_a_hand_back_that_fails_in_the_final_check_is_on_health_and_in_the_report(tmp_path):
    """#55: a DTLE run ends with the hand-back inside the final consistency check; one that failed
    there never reached /api/health (only failures in the cleanup did), and report.md said
    "Consistency: Not checked (the run did not reach it)" although the run failed inside the check."""
    from laglab.replicators.dtle import HandBackFailed
    from laglab.scenarios.report import markdown

    run, lab, _ = make_run(tmp_path, lambda p: point_record())

    def hand_back_fails(sleep=None):
        raise HandBackFailed("hand-back: dtle-dst did not answer within 45s", repaired=lambda: False)

    run.kinds.current.consistency = hand_back_fails
    run.start()
    run.wait(10)
    assert run.status == "failed" and run.reason.startswith("HandBackFailed: hand-back: dtle-dst did not answer")
    (problem,) = lab.problems.current()
    assert (problem["problem"], problem["repair"]) == ("dtle-hand-back", "make up PROFILE=dtle"), problem
    text = markdown.render(run.run.path).read_text()
    assert "Not checked: the run failed before or during the check (HandBackFailed: hand-back:" in text
    assert "did not reach it" not in text
