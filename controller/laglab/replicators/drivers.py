"""DTLE and DM as the scenario runner drives them (profiles dtle and dm): start the replication for a
point with its options, tell when it has caught up, sample its own lag and traffic, stop it.

Neither product can run on this project's machines (no registry; their images cannot be rebuilt from
public packages): this module is exercised by unit tests against a fake Nomad API and fake
containers, never against DTLE or DM themselves.
"""

from __future__ import annotations

import time

from ..containers import put_files
from ..db import META_SCHEMA, connect, executed_gtids, server_dialect
from . import dm, dtle


class DtleDriver:
    """mysql-source -> dtle-src ~~ dtle-dst -> mysql-target, with native replication paused meanwhile.

    The job carries the lab schema and the heartbeat schema, so the lag recorder measures DTLE's lag.
    It starts from the source's executed GTID set (the target already holds the data). Afterwards
    native replication resumes from the source's GTID set as the target's purged set."""

    kind = "dtle"

    def __init__(self, lab, nomad: dtle.Nomad | None = None, http=None):
        import requests

        self.lab = lab
        self.http = http or requests.Session()
        self.nomad = nomad or dtle.Nomad(http=self.http)
        self.running = False

    def _inside(self, name: str) -> tuple[str, int, str, str]:
        return (name, 3306, "root", str(self.lab.settings.MYSQL_ROOT_PASSWORD))

    def options(self, replicator, rtt_seconds: float) -> dtle.JobOptions:
        timeout = replicator.group_timeout_ms
        if timeout == "auto":
            timeout = dtle.group_timeout_for(rtt_seconds * 1000 / 2)
        return dtle.JobOptions(
            group_max_size=replicator.group_max_size,
            group_timeout_ms=int(timeout),
            repl_chan_buffer_size=replicator.repl_chan_buffer_size,
            chunk_size=replicator.chunk_size,
        )

    def start(self, replicator, rtt_seconds: float) -> None:
        if self.running:
            self.nomad.stop(dtle.JOB_ID)
        src, dst = connect(self.lab.source, timeout=5), connect(self.lab.target, timeout=5)
        try:
            dialect = server_dialect(src)
            with dst.cursor() as cur:
                cur.execute(dialect.stop_replica)
            gtids = executed_gtids(src, dialect)
        finally:
            src.close()
            dst.close()
        options = self.options(replicator, rtt_seconds)
        options = dtle.JobOptions(**{**options.__dict__, "gtid": gtids})
        schemas = [str(self.lab.settings.LAB_DATABASE), META_SCHEMA]
        body = dtle.job(dtle.JOB_ID, schemas, self._inside("mysql-source"), self._inside("mysql-target"), options)
        self.nomad.submit(body)
        self.running = True
        self.nomad.wait_running(dtle.JOB_ID, 120)

    def caught_up(self) -> bool:
        recorder = self.lab.recorder
        latest = recorder.samples[-1] if recorder and recorder.samples else None
        return bool(latest) and latest.status == "ok" and latest.lag_seconds == 0

    def sample(self) -> dict:
        views = []
        for agent in ("dtle-src", "dtle-dst"):
            response = self.http.get(f"http://{agent}:8190/metrics", timeout=5)
            if response.status_code == 200:
                views.append(dtle.parse_metrics(response.text))
        return dtle.combine_metrics(views)

    def stop(self) -> None:
        if not self.running:
            return
        self.nomad.stop(dtle.JOB_ID)
        self.running = False
        src, dst = connect(self.lab.source, timeout=5), connect(self.lab.target, timeout=5, read_timeout=60)
        try:
            dialect = server_dialect(src)
            gtids = executed_gtids(src, dialect)
            with dst.cursor() as cur:
                for sql, args in resume_native(dialect.is_mariadb, gtids):
                    cur.execute(sql, args)
        finally:
            src.close()
            dst.close()


def resume_native(mariadb: bool, source_gtids: str) -> list[tuple[str, tuple | None]]:
    """After DTLE applied the source's transactions under the target's own GTIDs: make the source's
    set the target's purged set so that auto-positioning resumes where DTLE stopped (the target's
    binary logs are dropped: it is a replica in this lab)."""
    if mariadb:
        return [("STOP SLAVE", None), ("SET GLOBAL gtid_slave_pos = %s", (source_gtids,)), ("START SLAVE", None)]
    return [
        ("STOP REPLICA", None),
        ("RESET BINARY LOGS AND GTIDS", None),
        ("SET GLOBAL gtid_purged = %s", (source_gtids,)),
        ("START REPLICA", None),
    ]


class DmDriver:
    """mysql-source -> dm-worker -> TiDB (tidb:4000), driven with dmctl inside the dm-master container."""

    kind = "dm"
    WORKDIR = "/laglab-dm"  # inside the dm-master container

    def __init__(self, lab, http=None):
        import requests

        self.lab = lab
        self.http = http or requests.Session()
        self.running = False
        self.started_once = False
        self.source_created = False

    def _master(self):
        containers = self.lab.shaping.containers
        lab = containers.list()
        if "dm-master" not in lab or not lab["dm-master"].running:
            raise RuntimeError("dm-master is not running (make up PROFILE=dm)")
        return containers.client.containers.get(lab["dm-master"].id)

    def _dmctl(self, *command: str) -> str:
        code, out = self._master().exec_run(dm.dmctl_argv(*command))
        text = out.decode(errors="replace")
        if code != 0:
            raise RuntimeError(f"dmctl {' '.join(command[:1])} failed: {text.strip()[-300:]}")
        return text

    def _put(self, files: dict[str, str]) -> None:
        put_files(self._master(), self.WORKDIR, {name: text.encode() for name, text in files.items()})

    def options(self, replicator) -> dm.TaskOptions:
        return dm.TaskOptions(
            task_mode=replicator.task_mode,
            mydumper_threads=replicator.mydumper_threads,
            mydumper_rows=replicator.mydumper_rows,
            loader_pool_size=replicator.loader_pool_size,
            syncer_worker_count=replicator.syncer_worker_count,
            syncer_batch=replicator.syncer_batch,
        )

    def start(self, replicator, rtt_seconds: float) -> None:
        if self.running:
            self._dmctl("stop-task", dm.TASK)
        password = str(self.lab.settings.MYSQL_ROOT_PASSWORD)
        self._put(
            {
                "source.yaml": dm.source_config("mysql-source", "mysql-source", 3306, "root", password),
                "task.yaml": dm.task_config(
                    dm.TASK,
                    "mysql-source",
                    [str(self.lab.settings.LAB_DATABASE)],
                    ("tidb", 4000, "root", ""),
                    self.options(replicator),
                ),
            }
        )
        if not self.source_created:
            listed = self._dmctl("operate-source", "show")
            if '"mysql-source"' not in listed:
                self._dmctl("operate-source", "create", f"{self.WORKDIR}/source.yaml")
            self.source_created = True
        # The first start of a run copies the data (task-mode all); later points resume from DM's
        # checkpoint with the new options (stop-task + start-task, as DM's docs change a task).
        self._dmctl("start-task", f"{self.WORKDIR}/task.yaml", *(() if self.started_once else ("--remove-meta",)))
        self.started_once = self.running = True
        deadline = time.monotonic() + 120
        while "Running" not in (stages := dm.parse_query_status(self._dmctl("query-status", dm.TASK))["stages"]):
            if time.monotonic() > deadline:
                raise RuntimeError(f"DM task {dm.TASK} not running within 120s: stages {stages}")
            time.sleep(1)

    def caught_up(self) -> bool:
        return dm.parse_query_status(self._dmctl("query-status", dm.TASK))["seconds_behind_master"] == 0

    def sample(self) -> dict:
        status = dm.parse_query_status(self._dmctl("query-status", dm.TASK))
        response = self.http.get("http://dm-worker:8262/metrics", timeout=5)
        gauge = dm.parse_metrics(response.text) if response.status_code == 200 else None
        return {"delay_seconds": status["seconds_behind_master"], "lag_gauge_seconds": gauge}

    def stop(self) -> None:
        if self.running:
            self._dmctl("stop-task", dm.TASK)
            self.running = False


def for_kind(kind: str, lab):
    return {"dtle": DtleDriver, "dm": DmDriver}[kind](lab)
