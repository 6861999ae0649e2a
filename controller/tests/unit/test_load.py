"""Defect: the load panel and a scenario run each had a load generator, the 409 guard saw only the
panel's, and DELETE /api/load ran `pkill -f ^sysbench` (killing the run's load too) and waited.
The lab has one generator; a load is stopped by its own process id; DELETE answers at once."""

import signal
import threading

import pytest

from laglab.load.generator import LoadBusy, LoadGenerator, Profile
from laglab.platforms import LabContainer
from laglab.platforms.docker import DockerPlatform

from ..conftest import authorized


class FakeApi:
    """The Docker SDK's low-level exec calls, recorded; the exec's output blocks until `finish`."""

    def __init__(self):
        self.calls, self.runs = [], []
        self.done = threading.Event()

    def exec_create(self, container, cmd, workdir=None):
        self.calls.append(("exec_create", container, cmd, workdir))
        return {"Id": "exec-1"}

    def exec_start(self, exec_id, stream=False):
        self.calls.append(("exec_start", exec_id, stream))

        def output():
            yield b"[ 1s ] thds: 4 tps: 99.00 qps: 594.00 (r/w/o: 0/396/198) lat (ms,95%): 5.00 err/s: 0.00 reconn/s: 0.00\n"
            self.done.wait(10)

        return output()

    def exec_inspect(self, exec_id):
        return {"Pid": 4242, "Running": True}


class FakeClient:
    def __init__(self):
        self.api = FakeApi()

        api = self.api

        class _Container:
            def __init__(self, cid):
                self.id = cid

            def exec_run(self, cmd, workdir=None):
                # docker-py's Container.exec_run answers ExecResult(exit_code, output) once the command ended
                api.runs.append((self.id, cmd))
                return 0, b""

        class _Containers:
            @staticmethod
            def get(cid):
                return _Container(cid)

        self.containers = _Containers()


class FakeContainers(DockerPlatform):
    """The real lookups (running, container) over a fixed listing and the fake Docker SDK."""

    def __init__(self):
        super().__init__("laglab", client=FakeClient())

    def list(self, max_age=0.0):
        return {"loadgen": LabContainer("loadgen", "laglab-loadgen-1", "d" * 64, 900, "10.0.0.5", True)}


class Settings:
    LAB_USER, LAB_PASSWORD, LAB_DATABASE = "lab", "pw-secret-123", "lab"


@pytest.fixture
def generator():
    killed, commands = [], {4242: "sysbench oltp_write_only --db-driver=mysql run"}
    containers = FakeContainers()

    def kill(pid, sig):
        killed.append((pid, sig))
        containers.client.api.done.set()

    load = LoadGenerator(containers, Settings(), kill=kill, cmdline=lambda pid: commands.get(pid, ""))
    load.killed, load.commands = killed, commands
    yield load
    containers.client.api.done.set()
    load.wait(5)


def test_no_password_is_on_a_command_line(generator):
    """Host `ps`, Docker's exec events and Kubernetes audit logs show argv: loadgen writes the option files
    from its own environment with sh's builtin printf, and the tools read them."""
    from laglab.load.generator import WRITE_OPTIONS

    generator.start(Profile(), 30)
    argvs = [call[2] for call in generator.platform.client.api.calls if call[0] == "exec_create"]
    argvs += [cmd for _cid, cmd in generator.platform.client.api.runs]
    assert argvs and all("pw-secret-123" not in " ".join(a) for a in argvs), argvs
    assert ["sh", "-c", WRITE_OPTIONS] in argvs and "$MYSQL_PASSWORD" in WRITE_OPTIONS
    assert any(a.startswith("--config-file=") for a in generator.argv(Profile(), "run", 30))


def test_a_load_is_started_by_exec_and_stopped_by_its_own_pid(generator):
    rows = []
    generator.start(Profile(), 30, on_row=rows.append, owner="run-1")
    api = generator.platform.client.api
    assert api.calls[0] == ("exec_create", "d" * 64, generator.argv(Profile(), "run", 30), None)
    assert (generator.pid, generator.owner, generator.running) == (4242, "run-1", True)
    generator.stop(wait=5)
    assert generator.killed == [(4242, signal.SIGTERM)]
    assert not generator.running and rows[0]["tps"] == 99.0


def test_a_new_loads_status_shows_no_figure_before_its_own_first_report(generator):
    """`load start` printed "now 209.77 TPS" a moment after starting: the previous load's last row."""
    api = generator.platform.client.api
    generator.start(Profile(), 30)
    generator.stop(wait=5)
    assert generator.status()["latest"]["tps"] == 99.0
    api.done.clear()
    api.exec_start = lambda exec_id, stream=False: iter(lambda: api.done.wait(10) and b"", b"")  # no line yet
    generator.start(Profile(), 30)
    assert generator.running and generator.status()["latest"] is None


def test_a_recycled_pid_is_never_signalled(generator):
    generator.start(Profile(), 30)
    generator.commands[4242] = "/usr/sbin/mysqld"  # sysbench ended; the PID now names another process
    generator.stop()
    assert generator.killed == []


def test_a_runs_mysqlslap_is_stopped_by_its_own_pid(generator):
    """#52.3: a mysqlslap point was one exec nothing could stop, and a deleted run left it running in
    loadgen. It is stopped as sysbench is, by its own PID, and gives no figure (mysqlslap prints its
    benchmark summary only once all its queries ran: parse_mysqlslap)."""
    generator.commands[4242] = "mysqlslap --defaults-extra-file=/run/laglab/client.cnf --concurrency=8"
    api = generator.platform.client.api
    running = threading.Event()

    def exec_start(exec_id, stream=False):
        def output():
            running.set()
            api.done.wait(10)  # until SIGTERM (the fixture's kill sets it)
            yield b""

        return output()

    api.exec_start = exec_start
    result: dict = {}
    slap = threading.Thread(target=lambda: result.update(generator.mysqlslap("mysql-source", 8, 500, "SELECT 1", owner="run-1")))  # fmt: skip
    slap.start()
    assert running.wait(5)
    assert generator.stop_mysqlslap("panel") is False  # another owner's: nothing of it runs
    assert generator.stop_mysqlslap("run-1") is True
    slap.join(5)
    assert generator.killed == [(4242, signal.SIGTERM)] and not slap.is_alive()
    assert result == {"error": "mysqlslap ended without its summary"}
    assert generator.stop_mysqlslap("run-1") is False  # over: nothing left to stop


def test_a_second_load_is_refused_naming_the_owner(generator):
    generator.start(Profile(), 30, owner="20260101T000000Z-x")
    with pytest.raises(LoadBusy, match="started by 20260101T000000Z-x"):
        generator.start(Profile(), 30, owner="panel")


class Run:
    def __init__(self, run_id, status="running"):
        self.id, self.status = run_id, status
        self.busy = status in ("pending", "running")


@pytest.fixture
def api(generator, make_app):
    return make_app(load=generator)


def test_the_panel_cannot_start_a_load_while_a_run_owns_the_generator(api, generator):
    api.extensions["laglab"].runs["r1"] = Run("r1")
    response = authorized(api).post("/api/load", json={"rate": 10})
    assert response.status_code == 409 and "scenario run r1" in response.json["error"]
    assert not generator.running


def test_the_panel_cannot_stop_a_runs_load_and_a_stop_answers_at_once(api, generator):
    generator.start(Profile(), 30, owner="r1")
    client = authorized(api)
    response = client.delete("/api/load")
    assert response.status_code == 409 and "DELETE /api/runs/r1" in response.json["error"]
    assert generator.killed == []
    generator.platform.client.api.done.set()
    generator.wait(5)
    generator.platform.client.api.done.clear()
    generator.commands[4242] = "sysbench run"
    assert client.post("/api/load", json={"rate": 10, "seconds": 30}).status_code == 201
    response = client.delete("/api/load")
    assert response.status_code == 202 and generator.killed == [(4242, signal.SIGTERM)]
