"""The fault manager against a fake Docker API: the exact SDK calls, the state it waits for, what it
refuses (with the field named), and undo after the duration."""

import pytest

from laglab.errors import status_of
from laglab.faults import FaultError, FaultManager
from laglab.platforms import LabContainer
from laglab.platforms.docker import DockerPlatform
from laglab.state.events import Events

from ..polling import wait_until


class APIError(Exception):
    """docker.errors.APIError as the SDK raises it for a 409 from the daemon."""


class FakeContainer:
    """The SDK's container object: calls are recorded; the state changes as Docker's would, and a call
    the daemon refuses raises as the SDK does (unpause of a container not paused: 409 `Container ... is
    not paused`; kill of one not running: 409; start of a running one and stop of a stopped one: 304,
    which the SDK returns without error)."""

    def __init__(self, log, state):
        self.log, self.state = log, state
        self.attrs = {"State": dict(state)}

    def _set(self, **state):
        self.state.update(state)

    def kill(self, signal):
        self.log.append(("kill", signal))
        if not self.state.get("Running"):
            raise APIError("409 Client Error: Conflict (Cannot kill container: it is not running)")
        self._set(Running=False)

    def stop(self, timeout):
        self.log.append(("stop", timeout))
        self._set(Running=False)

    def start(self):
        self.log.append(("start",))
        self._set(Running=True, Paused=False)

    def restart(self, timeout):
        self.log.append(("restart", timeout))
        self._set(Running=True)

    def pause(self):
        self.log.append(("pause",))
        if self.state.get("Paused"):
            raise APIError("409 Client Error: Conflict (Container is already paused)")
        self._set(Paused=True)

    def unpause(self):
        self.log.append(("unpause",))
        if not self.state.get("Paused"):
            raise APIError("409 Client Error: Conflict (Container is not paused)")
        self._set(Paused=False)

    def reload(self):
        self.attrs = {"State": dict(self.state)}


class FakeDocker:
    def __init__(self):
        self.log = []
        self.states = {"id-target": {"Running": True, "Paused": False}, "id-ctl": {"Running": True}}
        docker = self

        class Collection:
            @staticmethod
            def get(container_id):
                docker.log.append(("get", container_id))
                return FakeContainer(docker.log, docker.states[container_id])

        self.containers = Collection()


class FakeContainers(DockerPlatform):
    """The Docker platform's own calls over a fixed listing and the fake SDK."""

    def __init__(self):
        super().__init__("laglab", client=FakeDocker())

    def list(self, max_age=0.0):
        running = self.client.states["id-target"]["Running"]
        return {
            "mysql-target": LabContainer("mysql-target", "lab-mysql-target-1", "id-target", 10, "10.0.0.3", running),
            "controller": LabContainer("controller", "lab-controller-1", "id-ctl", 11, "10.0.0.9", True, False),
        }


@pytest.fixture
def faults():
    return FaultManager(FakeContainers(), events=Events(), settle_timeout=2)


def calls(faults):
    return [c for c in faults.platform.client.log if c[0] != "get"]


def test_kill_is_sigkill_and_its_effect_is_seen_in_the_state(faults):
    fault = faults.inject("mysql-target", "kill")
    assert calls(faults) == [("kill", "SIGKILL")]
    assert fault.effect >= fault.asked and fault.active, "no duration: in force until undone"
    assert faults.platform.client.states["id-target"]["Running"] is False
    assert faults.events.since(0)[-1]["text"] == "mysql-target: kill"


def test_pause_with_a_duration_is_undone_by_its_timer(faults):
    fault = faults.inject("mysql-target", "pause", duration=0.2)
    assert fault.active and [f.id for f in faults.active()] == [fault.id]
    wait_until(lambda: not fault.active, timeout=5)
    assert calls(faults) == [("pause",), ("unpause",)]
    assert fault.undone >= fault.effect + 0.2 - 0.05
    assert faults.listing()["active"] == []


def test_undo_now_cancels_the_timer(faults):
    fault = faults.inject("mysql-target", "stop", duration=60)
    assert faults.undo(fault.id) is fault and fault.undone is not None
    assert calls(faults) == [("stop", 30), ("start",)]
    assert faults.undo(fault.id) is fault and calls(faults) == [("stop", 30), ("start",)]  # idempotent
    plain = faults.inject("mysql-target", "restart")
    with pytest.raises(FaultError) as caught:
        faults.undo(plain.id)
    assert (status_of(caught.value), caught.value.message) == (409, f"fault: {plain.id} (restart) has nothing to undo")


def test_a_fault_without_a_duration_stays_until_undone_or_reversed(faults):
    """#36.2: docs/faults.md's `fault pause mysql-target  # frozen until: ./laglab fault undo <id>` got
    409 (only a fault with a duration could be undone), and the pause was left for good."""
    paused = faults.inject("mysql-target", "pause")
    assert paused.active and [f.id for f in faults.active()] == [paused.id]
    assert faults.undo(paused.id) is paused and not paused.active
    assert calls(faults) == [("pause",), ("unpause",)]
    killed = faults.inject("mysql-target", "kill")
    started = faults.inject("mysql-target", "start")  # the action that reverses it ends it
    assert not killed.active and killed.undone == started.effect and not started.active
    assert faults.listing()["active"] == [] and faults.events.since(0)[-1]["text"].endswith(f"(ends {killed.id})")


def test_undoing_a_fault_its_timer_is_undoing_is_not_an_error(faults):
    """Fuzzer: pause with a duration whose timer had just unpaused it, then DELETE -> 502 `action:
    unpause failed: APIError`. Both arrive together here: the DELETE finds the fault undone."""
    import threading

    fault = faults.inject("mysql-target", "pause", duration=60)
    results, barrier = [], threading.Barrier(2)

    def undo():
        barrier.wait()
        results.append(faults.undo(fault.id).undone)

    threads = [threading.Thread(target=undo) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(results) == 2 and results[0] == results[1] is not None
    assert calls(faults) == [("pause",), ("unpause",)]


def test_an_undo_whose_effect_is_already_there_counts_as_done(faults):
    """Someone ran `docker unpause` by hand: the container's state decides, not the fault's record."""
    fault = faults.inject("mysql-target", "pause", duration=60)
    faults.platform.client.states["id-target"]["Paused"] = False
    assert faults.undo(fault.id).undone is not None and fault.error is None
    assert calls(faults) == [("pause",)]


def test_a_timeline_keeps_the_time_itself(faults):
    fault = faults.inject("mysql-target", "kill", duration=0.1, timer=False)
    assert fault.active and fault._timer is None
    faults.undo(fault.id)
    assert calls(faults) == [("kill", "SIGKILL"), ("start",)]


def test_stopping_the_controller_undoes_active_faults(faults):
    faults.inject("mysql-target", "pause", duration=3600)
    faults.stop()
    assert calls(faults) == [("pause",), ("unpause",)]


@pytest.mark.parametrize(
    ("service", "action", "duration", "status", "message"),
    [
        ("controller", "kill", None, 409, "service: controller is the lab's measuring apparatus"),
        ("nobody", "kill", None, 404, "service: no service 'nobody' in this lab"),
        ("mysql-target", "restart", 5, 422, "duration: restart cannot be undone"),
        ("mysql-target", "unpause", None, 409, "service: mysql-target is not paused (it is running)"),
        ("mysql-target", "start", None, 409, "service: mysql-target is not stopped (it is running)"),
        ("mysql-target", "explode", None, 422, "action: 'explode' is not one of kill, stop, start"),
    ],
)
def test_refusals_name_the_field(faults, service, action, duration, status, message):
    with pytest.raises(FaultError) as caught:
        faults.inject(service, action, duration)
    assert status_of(caught.value) == status
    assert caught.value.message.startswith(message)
    assert calls(faults) == [], "nothing was done"


def test_a_zero_duration_is_a_blip_not_a_refusal(faults):
    """Fuzzer: `"duration": 0` was valid by the document and a 422 from the server."""
    fault = faults.inject("mysql-target", "pause", duration=0)
    wait_until(lambda: fault.undone is not None, timeout=5)
    assert calls(faults) == [("pause",), ("unpause",)] and fault.undone >= fault.effect
