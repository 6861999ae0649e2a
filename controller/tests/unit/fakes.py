"""A PyMySQL connection for unit tests: every statement is logged, and `answer(sql, args)` says what
rows it returns (a dict cursor's rows)."""


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
