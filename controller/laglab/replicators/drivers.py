"""DTLE and DM as the scenario runner drives them (profiles dtle and dm): start the replication for a
point with its options, tell when it has caught up, sample its own lag and traffic, stop it.

Neither product can run on this project's machines (no registry; their images cannot be rebuilt from
public packages): this module is exercised by unit tests against a fake Nomad API and fake
containers, never against DTLE or DM themselves.
"""

from __future__ import annotations

import contextlib
import time

from ..containers import put_files
from ..db import META_SCHEMA, connect, server_dialect, wait_executed
from . import dm, dtle


class NativeLink:
    """Native replication mysql-source -> mysql-target as the hand-overs to and from DTLE need it."""

    def __init__(self, source, target):
        self.source, self.target = source, target

    def _query(self, endpoint, sql: str, args=None, read_timeout: float | None = None) -> dict | None:
        conn = connect(endpoint, timeout=5, read_timeout=read_timeout)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchone()
        finally:
            conn.close()

    def _dialect(self):
        conn = connect(self.source, timeout=5)
        try:
            dialect = server_dialect(conn)
        finally:
            conn.close()
        if dialect.is_mariadb:
            raise RuntimeError("DTLE replicates MySQL only (gtid_mode=ON); the MariaDB flavour cannot hand over to it")
        return dialect

    def source_executed(self) -> str:
        return str(self._query(self.source, "SELECT @@GLOBAL.gtid_executed AS g")["g"])

    def target_executed(self) -> str:
        return str(self._query(self.target, "SELECT @@GLOBAL.gtid_executed AS g")["g"])

    def subset(self, part: str, whole: str) -> bool:
        return bool(self._query(self.source, "SELECT GTID_SUBSET(%s, %s) AS s", (part, whole))["s"])

    def wait_target_executed(self, gtids: str, timeout: float) -> bool:
        dialect = self._dialect()
        conn = connect(self.target, timeout=5, read_timeout=timeout + 30)
        try:
            return wait_executed(conn, dialect, gtids, timeout)
        finally:
            conn.close()

    def stop(self) -> None:
        self._query(self.target, self._dialect().stop_replica)

    def resume_from(self, applied: str) -> None:
        """Native replication goes on after what was applied by others (DTLE): auto-positioning asks the
        source for everything else."""
        conn = connect(self.target, timeout=5, read_timeout=60)
        try:
            with conn.cursor() as cur:
                for sql, args in resume_native(False, applied):
                    cur.execute(sql, args)
        finally:
            conn.close()


class DtleDriver:
    """mysql-source -> dtle-src ~~ dtle-dst -> mysql-target, with native replication paused meanwhile.

    The job carries the lab schema and the heartbeat schema, so the lag recorder measures DTLE's lag.
    Every hand-over (native -> DTLE, DTLE -> DTLE with new options, DTLE -> native) happens at a
    caught-up point with the heartbeat writer paused, so the source's executed set stands still:
    - to DTLE: the target executes the source's set, native stops, and DTLE starts from the target's
      executed set (exactly what native applied);
    - from DTLE: DTLE's own record of what it applied (its Gtid in Consul) covers the source's set,
      the job stops, and native resumes from that record, never from the source's set.
    Consul's dtle/<job>/ tree is deleted before every start and after every stop: DTLE prefers a stale
    Gtid there over the job's own."""

    kind = "dtle"
    HANDOVER_TIMEOUT = 300.0

    def __init__(self, lab, nomad: dtle.Nomad | None = None, http=None, consul=None, native=None, sleep=time.sleep):
        import requests

        self.lab = lab
        self.http = http or requests.Session()
        self.nomad = nomad or dtle.Nomad(http=self.http)
        self.consul = consul or dtle.Consul(http=self.http)
        self.native = native or (NativeLink(lab.source, lab.target) if lab is not None else None)
        self.sleep = sleep
        self.running = False
        self.applied: str | None = None  # DTLE's Gtid at the last stop: where native resumed

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

    def _heartbeats_paused(self):
        recorder = self.lab.recorder if self.lab is not None else None
        return recorder.writes_paused() if recorder is not None else contextlib.nullcontext()

    def _dtle_applied(self, timeout: float) -> str:
        """Waits until DTLE's record of what it applied covers the source's executed set; returns it."""
        wanted = self.native.source_executed()
        deadline = time.monotonic() + timeout
        key = f"{dtle.job_kv_prefix(dtle.JOB_ID)}/Gtid"
        while True:
            applied = self.consul.get(key) or ""
            if applied and self.native.subset(wanted, applied):
                return applied
            if time.monotonic() > deadline:
                raise dtle.DriverError(
                    f"DTLE did not record the source's transactions within {timeout:g}s "
                    f"(source {wanted!r}, DTLE's Gtid {applied!r})"
                )
            self.sleep(0.5)

    def _stop_job(self) -> str:
        applied = self._dtle_applied(self.HANDOVER_TIMEOUT)
        self.nomad.stop(dtle.JOB_ID)
        self.consul.delete_tree(dtle.job_kv_prefix(dtle.JOB_ID))
        self.running = False
        return applied

    def start(self, replicator, rtt_seconds: float) -> None:
        with self._heartbeats_paused():
            if self.running:  # new options: DTLE -> DTLE, from what the running job applied
                start_at = self._stop_job()
            else:  # native -> DTLE, at a point where the target has everything native fetched
                wanted = self.native.source_executed()
                if not self.native.wait_target_executed(wanted, self.HANDOVER_TIMEOUT):
                    raise dtle.DriverError(
                        f"native replication did not catch up within {self.HANDOVER_TIMEOUT:g}s: not handing over"
                    )
                self.native.stop()
                start_at = self.native.target_executed()
            self.consul.delete_tree(dtle.job_kv_prefix(dtle.JOB_ID))  # no stale Gtid may override ours
            options = dtle.JobOptions(**{**self.options(replicator, rtt_seconds).__dict__, "gtid": start_at})
            schemas = [str(self.lab.settings.LAB_DATABASE), META_SCHEMA]
            body = dtle.job(dtle.JOB_ID, schemas, self._inside("mysql-source"), self._inside("mysql-target"), options)
            self.nomad.submit(body)
            self.running = True
            self.nomad.wait_running(dtle.JOB_ID, 120)

    def wait_caught_up(self, timeout: float, sleep=None) -> None:
        """Caught up = the target holds a heartbeat written after this call, whatever the link's delay
        (a lag of exactly 0 never comes while the link is delayed)."""
        recorder = self.lab.recorder
        mark = recorder.written_seq + 1
        deadline = time.monotonic() + timeout
        while True:
            latest = recorder.samples[-1] if recorder.samples else None
            if latest is not None and latest.heartbeat_seq is not None and latest.heartbeat_seq >= mark:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"dtle did not catch up within {timeout:g}s")
            (sleep or self.sleep)(0.2)

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
        with self._heartbeats_paused():
            self.applied = self._stop_job()
            self.native.resume_from(self.applied)


def resume_native(mariadb: bool, source_gtids: str) -> list[tuple[str, tuple | None]]:
    """After DTLE applied source transactions under the target's own GTIDs: make the set DTLE applied
    the target's purged set so that auto-positioning resumes where DTLE stopped (the target's binary
    logs are dropped: it is a replica in this lab)."""
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

    def wait_caught_up(self, timeout: float, sleep=time.sleep) -> None:
        """Caught up = DM's syncer has passed every transaction the source had executed at this call
        (its GTID set, from query-status), whatever the link's delay; secondsBehindMaster is whole
        seconds and reads 0 while a delayed link still holds transactions."""
        native = NativeLink(self.lab.source, self.lab.target)
        wanted = native.source_executed()
        deadline = time.monotonic() + timeout
        while True:
            synced = dm.parse_query_status(self._dmctl("query-status", dm.TASK))["syncer_gtid"]
            if synced and native.subset(wanted, synced):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"dm did not catch up within {timeout:g}s (syncer at {synced!r})")
            sleep(1)

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
