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
