"""The unit tests' fakes, one per seam, each behaving as the real side does: a PyMySQL connection
(every statement logged, `answer(sql, args)` says what rows it returns), the Docker API, the Platform,
a dry-run executor; and for runs and timelines the real ShapingManager over them (`shaping_manager`),
a `Spy` that records the order of calls, and the parts a ScenarioRun drives (`run_parts`)."""

import shutil
import threading
from pathlib import Path

from laglab.shaping import tcp_buffers
from laglab.shaping.executor import Executor


class FakeConnection:
    def __init__(self, answer=lambda sql, args: []):
        self.answer, self.log = answer, []

    def cursor(self):
        return FakeCursor(self)

    def close(self):
        pass


class FakeCursor:
    def __init__(self, conn: FakeConnection):
        self.conn, self.rows = conn, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.conn.log.append(sql)
        self.rows = list(self.conn.answer(sql, args))

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows


class FakeDockerApi:
    """Docker's low-level API as Containers uses it: `/containers/json` summaries and inspects, each
    call counted. `lab`: {id: {"service", "pid", "state", "labels"?, "ip"?}}, changed in place by tests."""

    def __init__(self, lab: dict[str, dict], project: str = "laglab"):
        self.lab, self.project = lab, project
        self.listed = 0
        self.inspected: list[str] = []
        self.gone: set[str] = set()  # removed after the next list, before its inspect

    def containers(self, all, filters):
        self.listed += 1
        return [
            {
                "Id": cid,
                "Names": [f"/{self.project}-{c['service']}-1"],
                "State": c.get("state", "running"),
                "Labels": {
                    "com.docker.compose.project": self.project,
                    "com.docker.compose.service": c["service"],
                    **c.get("labels", {}),
                },
                "NetworkSettings": {"Networks": {f"{self.project}_lab": {"IPAddress": c.get("ip", "10.0.0.2")}}},
            }
            for cid, c in self.lab.items()
        ]

    def inspect_container(self, cid):
        self.inspected.append(cid)
        if cid in self.gone:
            del self.lab[cid]
        if cid not in self.lab:
            import docker.errors

            raise docker.errors.NotFound(f"No such container: {cid}")
        c = self.lab[cid]
        running = c.get("state", "running") in ("running", "paused", "restarting")
        return {"State": {"Pid": c["pid"] if running else 0, "Running": running}}


class FakeEvents:
    """What DockerClient.events(decode=True) returns: a blocking iterator of event dicts that ends when
    the daemon closes the connection, and close() (the SDK's CancellableStream)."""

    END = object()

    def __init__(self):
        import queue

        self.queue = queue.Queue()

    def __iter__(self):
        while (event := self.queue.get()) is not self.END:
            yield event

    def close(self):
        self.queue.put(self.END)


class FakeDocker:
    def __init__(self, lab: dict[str, dict]):
        self.api = FakeDockerApi(lab)
        self.streams: list[FakeEvents] = []
        self.event_filters = None

    def info(self):
        """As the Engine's GET /info answers (its Name: the host the containers run on)."""
        self.infos = getattr(self, "infos", 0) + 1
        return {"Name": "lab-host", "NCPU": 2, "ServerVersion": "26.1.5"}

    def events(self, decode=False, filters=None):
        self.event_filters = filters
        self.streams.append(FakeEvents())
        return self.streams[-1]

    def emit(self, action: str, container_id: str) -> None:
        self.streams[-1].queue.put({"Type": "container", "Action": action, "id": container_id})


def fake_proc(root, pid: int, container_id: str, started: int = 1000) -> None:
    """/proc/PID/cgroup and /proc/PID/stat of a container's process under `root`."""
    (root / str(pid)).mkdir(exist_ok=True)
    (root / str(pid) / "cgroup").write_text(f"0::/system.slice/docker-{container_id}.scope\n")
    fields = ["S", "1"] + ["0"] * 17 + [str(started)]  # field 3 (state) ... field 22 (start time)
    (root / str(pid) / "stat").write_text(f"{pid} (mysqld (x)) " + " ".join(fields) + " 0 0\n")


class FakePlatform:
    """The Platform interface (laglab/platforms/base.py) over a fixed listing, written once for every
    unit test that needs one. `execs`: service -> (exit code, output bytes), or a function of argv that
    answers so; a service not listed as running fails as the real platforms do (PlatformError naming
    it). `ran` records (service, argv, workdir); `files` what put_files wrote, by full path."""

    name = "fake"
    restarts_killed = False

    def __init__(self, lab=None, execs=None, bridge=None, project="laglab"):
        from laglab.platforms import Bridge

        self.lab = dict(lab or {})
        self.execs = dict(execs or {})
        self._bridge = bridge or Bridge("br-lab0", 999)  # dockerd's namespace, where the lab's bridge is
        self.project = project
        self.ran: list[tuple[str, list[str], str | None]] = []
        self.files: dict[str, bytes] = {}
        self.paused: dict[str, bool] = {}
        self.acted: list[tuple[str, str]] = []

    @classmethod
    def running_services(cls, *services: str, execs=None) -> "FakePlatform":
        from laglab.platforms import LabContainer

        lab = {
            s: LabContainer(s, f"laglab-{s}-1", f"{i:064x}", 1000 + i, f"10.0.0.{i + 2}", True)
            for i, s in enumerate(services)
        }
        return cls(lab, execs)

    def list(self, max_age: float = 0.0):
        return dict(self.lab)

    def running(self, *services: str, hint: str = ""):
        from laglab.platforms.base import running_of

        return running_of(self.list(), services, hint)

    def watch(self):
        pass

    def unwatch(self):
        pass

    def image(self, service):
        return f"fake/{service}" if service in self.lab else None

    def nodes(self):
        return {service: "fake-node" for service in self.lab}

    def owns(self, pid):
        return pid == self._bridge.pid or any(c.pid == pid and c.running for c in self.lab.values())

    def bridge(self):
        return self._bridge

    def tools(self, service):
        from laglab.platforms.base import Unsupported

        raise Unsupported("throughput: on Docker iperf3 runs in the containers' namespaces, entered by the controller")

    def exec(self, service, argv, workdir=None, container=None):
        if container is not None:  # as the Docker platform: one container per service
            from laglab.platforms.base import Unsupported

            raise Unsupported(f"container: a Docker service is one container ({service}), not {container!r}")
        self.running(service)
        self.ran.append((service, list(argv), workdir))
        answer = self.execs.get(service, (0, b""))
        return answer(argv) if callable(answer) else answer

    def read_file(self, service, path):
        self.running(service)
        return self.files[path]

    def put_files(self, service, directory, files):
        self.running(service)
        for name, data in files.items():
            self.files[f"{directory}/{name}"] = data

    def exec_stream(self, service, argv, workdir=None, container=None):
        _code, output = self.exec(service, argv, workdir, container)
        return FakeExecution([output], pid=None)

    def state(self, service):
        from laglab.platforms import ServiceState

        container = self.lab[service]
        return ServiceState(
            container.running, self.paused.get(service, False), "running" if container.running else "exited"
        )

    # As Docker answers: a kill of a container not running and an unpause of one not paused are
    # refused (409); a start of a running one and a stop of a stopped one do nothing (304).
    def act(self, service, action):
        import dataclasses

        from laglab.platforms import PlatformError

        container, paused = self.lab[service], self.paused.get(service, False)
        if (action == "kill" and not container.running) or (action == "unpause" and not paused):
            raise PlatformError(f"409 Conflict: {action} {service}")
        if action == "pause" and paused:
            raise PlatformError(f"409 Conflict: {service} is already paused")
        running = {"kill": False, "stop": False, "start": True, "restart": True}.get(action, container.running)
        self.lab[service] = dataclasses.replace(container, running=running)
        self.paused[service] = {"pause": True, "unpause": False}.get(action, paused and running)
        self.acted.append((service, action))


class FakeExecution:
    def __init__(self, chunks, pid=None):
        self._chunks, self._pid = chunks, pid

    def chunks(self):
        return iter(self._chunks)

    def pid(self, timeout=5.0):
        return self._pid


LAB_SERVICES = ("mysql-source", "mysql-target", "loadgen")


def shaping_manager(tmp_path, *services: str, events=None):
    """The real ShapingManager over FakePlatform and a dry-run executor, with the kernel backend (tc's
    argv recorded in `.executor.ran`): the one shaping every unit test of a run or a timeline uses. A
    failure is the real one: `.executor.owns = lambda pid: False` is a lab whose containers restarted
    under it (the next namespace entered is refused, the change rolled back: ShapingError)."""
    from laglab.shaping import backends
    from laglab.shaping.manager import ShapingManager

    platform = FakePlatform.running_services(*(services or LAB_SERVICES))
    executor = DryRunExecutor(dry_run=True)
    return ShapingManager(platform, executor, backends.KernelBackend(), tmp_path / "shaping.json", events)


class DryRunExecutor(Executor):
    """Executor(dry_run=True): argv recorded, nothing run; what the lab reads back answered as a fresh
    kernel does (net.ipv4.tcp_wmem / tcp_rmem at their defaults, Linux's
    Documentation/networking/ip-sysctl.rst: 4096 16384 4194304 and 4096 131072 6291456)."""

    def run(self, argv, netns_pid=None, check=True, timeout=None, stdin=None):
        out = super().run(argv, netns_pid, check, timeout, stdin)
        return "4096\t16384\t4194304\n4096\t131072\t6291456\n" if list(argv) == tcp_buffers.read_argv() else out


class Spy:
    """A real object whose calls are recorded in order before they run (`name.method`, and what `words`
    says of the arguments; with `detail`, the arguments too): the order of a run's steps across seams."""

    def __init__(self, real, calls: list, name: str, words=None, detail: list | None = None):
        self._real, self._calls, self._name, self._words, self._detail = real, calls, name, words, detail

    def __getattr__(self, attr):
        value = getattr(self._real, attr)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            said = self._words(attr, args, kwargs) if self._words else ""
            self._calls.append(f"{self._name}.{attr}" + (f" {said}" if said else ""))
            if self._detail is not None:  # the arguments themselves, for a test to look into
                self._detail.append((attr, args, kwargs))
            return value(*args, **kwargs)

        return call


class IdleLoad:
    """The load generator as a run finds it between loads."""

    running, owner, error = False, None, None

    def stop_mysqlslap(self, owner: str) -> bool:
        return False  # as LoadGenerator answers when no mysqlslap of `owner` runs


def run_parts(shaping, **given):
    """What a ScenarioRun drives (scenarios/run/parts.py), for unit tests: the shaping given
    (shaping_manager's), the real FaultManager and Captures over its platform, an idle load generator,
    the recorders' feeds (results.Fanout, published by the test), problems and events as the controller
    keeps them, the environment described as nothing, the wall's clock; `given` replaces any of them."""
    from laglab.deadline import WALL
    from laglab.faults import FaultManager
    from laglab.measurement.captures import Captures
    from laglab.measurement.results import Fanout
    from laglab.replicators import KINDS
    from laglab.scenarios.run import measure
    from laglab.scenarios.run.parts import RunParts
    from laglab.state.events import Events
    from laglab.state.problems import Problems

    platform, executor = shaping.platform, shaping.executor
    parts = dict(
        shaping=shaping, faults=FaultManager(platform, settle_timeout=5),
        captures=Captures(platform, executor, shaping, str(shaping.state_path.parent / "captures")),
        load=IdleLoad(), events=Events(), problems=Problems(), platform=platform, executor=executor,
        lag=Fanout("lag"), links=Fanout("links"), nodes=Fanout("cluster lag"),
        kinds=lambda kind: KINDS[kind](kind_parts(platform, given.get("load") or IdleLoad())), describe=dict,
        verify=lambda plan: measure.verify_link(platform, executor, plan), workers=list, state_dir=shaping.state_path.parent, clock=WALL,
    )  # fmt: skip
    parts.update(given)
    return RunParts(**parts)


class VirtualClock:
    """Virtual time (#52.5) that one thread moves on, a tick at a time (`tick`): a run's waits, its
    recorders' samples and its load's rows read it, and a wait ends once the virtual time passes its
    deadline (or its event is set). Time moves only while every thread that waits on this clock is
    waiting and none of them is due: a thread that works, or that the host has not scheduled yet, holds
    the time until it waits again. So a busy host slows a run down and changes nothing in it (a clock
    that ran on while a thread was starved took a whole window's tail as measured, CI on a100bff)."""

    def __init__(self, start: float = 1_800_000_000.0):
        self._start = self._now = start
        self._moved = threading.Condition()
        self._threads: set[threading.Thread] = set()  # every thread that has waited on this clock
        self._waits: dict[threading.Thread, tuple[float, threading.Event]] = {}  # those waiting now

    def time(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now - self._start + 1000.0

    def tick(self, seconds: float) -> bool:
        """Time moves on by `seconds` when no thread of this clock is working or due; False otherwise."""
        with self._moved:
            self._threads = {t for t in self._threads if t.is_alive()}
            working = any(t not in self._waits for t in self._threads)
            due = any(event.is_set() or deadline <= self._now for deadline, event in self._waits.values())
            if working or due:
                self._moved.notify_all()
                return False
            self._now += seconds
            self._moved.notify_all()
            return True

    def wait(self, event, seconds: float) -> bool:
        me = threading.current_thread()
        with self._moved:
            deadline = self._now + max(0.0, seconds)
            self._threads.add(me)
            self._waits[me] = (deadline, event)
            try:
                while not event.is_set() and self._now < deadline:
                    self._moved.wait(0.002)  # a set event does not notify: looked at again within 2 ms
            finally:
                del self._waits[me]
        return event.is_set()


def fake_lab(places, environ=None, platform=None, executor=None, **given):
    """A complete Lab (laglab/lab.py) as the controller assembles it (app.assemble: the real managers,
    recorder, counters and run parts) over FakePlatform with the lab's three services running, the
    dry-run executor and the kernel backend on a kernel with netem; nothing started, so its recorder
    has no sample yet, as right after a start. `given` replaces any part (a test's recorder, say)."""
    import dataclasses

    from laglab import config
    from laglab.app import assemble
    from laglab.replicators.db import lab_endpoints
    from laglab.shaping import backends

    environ = {} if environ is None else environ
    settings = config.load(environ)
    platform = platform or FakePlatform.running_services(*LAB_SERVICES)
    executor = executor or DryRunExecutor(dry_run=True)
    lab = assemble(
        settings, lab_endpoints(settings, environ), platform, executor, backends.KernelBackend(), "available", places
    )
    ASSEMBLED.append(lab)
    return dataclasses.replace(lab, **given) if given else lab


ASSEMBLED: list = []  # every lab fake_lab built, its CSV files closed after each test (close_labs)


def close_labs() -> None:
    """The live folder's files of every lab assembled during a test (its recorder's lag.csv, its
    counters' links.csv), as the controller's shutdown closes them; nothing was started. And those of
    every recorder kind_parts made, with their folders."""
    while ASSEMBLED:
        lab = ASSEMBLED.pop()
        lab.recorder.series.close()
        lab.counters.series.close()
    while RECORDERS:
        recorder = RECORDERS.pop()
        recorder.series.close()
        shutil.rmtree(recorder.run.path.parent, ignore_errors=True)


RECORDERS: list = []


def kind_parts(platform=None, load=None, environ=None, recorder=None):
    """What a replicator kind may use (replicators/base.py Parts): the settings as the controller reads
    them from `environ` (defaults: none), the lab's endpoints, the test's platform (the lab's three
    services running) and load (idle), and a real lag recorder that was never started (no sample, no
    heartbeat written; its live folder in a temporary directory, removed after the test), unless the
    test gives the heartbeats it needs (`recorder`)."""
    import tempfile

    from laglab import config
    from laglab.measurement.lag import LagRecorder
    from laglab.measurement.results import Run
    from laglab.replicators.base import Parts
    from laglab.replicators.db import lab_endpoints

    environ = {} if environ is None else environ
    settings = config.load(environ)
    source, target = lab_endpoints(settings, environ)
    if recorder is None:
        folder = Path(tempfile.mkdtemp(prefix="laglab-recorder-"))
        recorder = LagRecorder(source, target, 0.1, 60, Run(folder, "live"))
        RECORDERS.append(recorder)
    platform = platform or FakePlatform.running_services(*LAB_SERVICES)
    return Parts(settings, source, target, platform, recorder, load or IdleLoad())


def fake_app(tmp_path, config=None, environ=None, **given):
    """The controller's app (create_app) over fake_lab: state in `tmp_path`, results in
    `tmp_path/results` unless `config` says otherwise; `given` replaces any part of the lab."""
    from laglab.app import Places, create_app

    environ = {} if environ is None else environ
    settings = {"TESTING": True, "STATE_DIR": str(tmp_path), "RESULTS_DIR": str(tmp_path / "results")}
    settings.update(config or {})
    settings.setdefault("SHAPING_STATE", str(type(tmp_path)(settings["STATE_DIR"]) / "shaping.json"))
    lab = fake_lab(Places.of(settings), environ, **given)
    return create_app(settings, environ=environ, lab=lab)


# The controller's own lab (app.compose) in a unit test whose servers are not there: its recorder's
# connections would be refused at once (127.0.0.1 port 1), as a cluster's are before its databases
# answer.
NO_SERVERS = {"LAGLAB_SOURCE": "127.0.0.1:1", "LAGLAB_TARGET": "127.0.0.1:1"}


def controller_config(tmp_path) -> dict:
    """create_app's settings for the controller's own lab in a unit test: state and results in tmp_path."""
    return {"TESTING": True, "STATE_DIR": str(tmp_path), "RESULTS_DIR": str(tmp_path / "results")}


def shaping_app(tmp_path, environ):
    """The controller's app over the lab its settings compose (app.compose: on Kubernetes, the real
    platform, executor and backend against the API server the test gives), its shaping side started as
    the controller starts it (app.start_shaping); its recorders not started (no servers answer here:
    the counters' ephemeral containers would race the test's own)."""
    from laglab import config
    from laglab.app import Places, compose, create_app, start_shaping

    settings = controller_config(tmp_path)
    settings["SHAPING_STATE"] = str(tmp_path / "shaping.json")
    lab = compose(config.load(environ), environ | NO_SERVERS, Places.of(settings))
    ASSEMBLED.append(lab)
    start_shaping(lab)
    return create_app(settings, environ=environ, lab=lab)


def point_record(**figures):
    """A point's record (analysis/record.py PointRecord) as the runner builds one, for tests that stand
    in for the measurement: what a test gives, and for the rest what a point that measured nothing
    says (no lag figures, no load, no checks)."""
    from laglab.scenarios.analysis.record import PointRecord

    base = dict(
        point=1, params={}, link={}, load={}, replicator={"kind": "native"}, verification={}, measured_seconds=0.0,
        window_start_epoch=0.0, lag_samples=0, gaps=0, max_lag_seconds=None, p95_lag_seconds=None, lag_slope=None,
        lag_slope_ci=None, tps=None, load_seconds=None, qps=None, link_mbit=None, reverse_link_mbit=None,
        binlog_mbit=None, load_error=None, load_restarts=0, host=None, assertions=[], passed=True,
        outcome={"verdict": "NO CHECKS", "held": True, "reasons": [], "checks": 0, "failed": 0},
    )  # fmt: skip
    return PointRecord.model_validate(base | figures)
