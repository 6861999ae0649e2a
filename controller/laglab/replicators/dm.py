"""DM (PingCAP Data Migration) -> TiDB as a replicator: the source and task configuration files, and
the `Dm` kind the runner drives with dmctl inside the dm-master container (profile `dm`).

Formats: DM's source configuration (source-id, enable-gtid, from) and task configuration (name,
task-mode, target-database, block-allow-list, mydumpers/loaders/syncers and mysql-instances), as in
DM's documentation ("Data Migration Task Configuration File"). Rendered as YAML for
`dmctl operate-source create` and `dmctl start-task`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from laglab.deadline import poll
from laglab.replicators import consistency
from laglab.replicators.base import Parts, ReplicatorPlan, Sleep, SourceToTarget, metrics_summary
from laglab.replicators.db import Endpoint, connect
from laglab.replicators.native import NativeLink


@dataclass(frozen=True)
class TaskOptions:
    task_mode: str = "all"  # all | full | incremental
    mydumper_threads: int = 4
    mydumper_rows: int = 0  # 0 = DM's default chunking
    loader_pool_size: int = 16
    syncer_worker_count: int = 16
    syncer_batch: int = 100

    def __post_init__(self):
        if self.task_mode not in ("all", "full", "incremental"):
            raise ValueError(f"task_mode: {self.task_mode!r} is not one of all, full, incremental")
        for name in ("mydumper_threads", "loader_pool_size", "syncer_worker_count", "syncer_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be at least 1")


def source_config(source_id: str, host: str, port: int, user: str, password: str, gtid: bool = True) -> str:
    return yaml.safe_dump(
        {
            "source-id": source_id,
            "enable-gtid": gtid,
            "from": {"host": host, "port": port, "user": user, "password": password},
        },
        sort_keys=False,
    )


def task_config(
    name: str,
    source_id: str,
    schemas: list[str],
    target: tuple[str, int, str, str],
    options: TaskOptions = TaskOptions(),
) -> str:
    host, port, user, password = target
    mydumper = {"threads": options.mydumper_threads}
    if options.mydumper_rows:
        mydumper["extra-args"] = f"--rows {options.mydumper_rows}"
    task = {
        "name": name,
        "task-mode": options.task_mode,
        "target-database": {"host": host, "port": port, "user": user, "password": password},
        "block-allow-list": {"laglab": {"do-dbs": list(schemas)}},
        "mydumpers": {"laglab": mydumper},
        "loaders": {"laglab": {"pool-size": options.loader_pool_size}},
        "syncers": {"laglab": {"worker-count": options.syncer_worker_count, "batch": options.syncer_batch}},
        "mysql-instances": [
            {
                "source-id": source_id,
                "block-allow-list": "laglab",
                "mydumper-config-name": "laglab",
                "loader-config-name": "laglab",
                "syncer-config-name": "laglab",
            }
        ],
    }
    return yaml.safe_dump(task, sort_keys=False)


# --- driving a running DM (make up PROFILE=dm) -------------------------------------------------------

TASK = "laglab"
MASTER = "dm-master:8261"


def dmctl_argv(*command: str) -> list[str]:
    """dmctl inside the dm-master container, e.g. dmctl_argv("query-status", "laglab")."""
    return ["/dmctl", f"--master-addr={MASTER}", *command]


def parse_query_status(text: str) -> dict:
    """`dmctl query-status <task>` (JSON): the sync unit's stage, secondsBehindMaster (the largest over
    sources) and the GTID set its syncer has passed (syncerBinlogGtid; the lab has one source)."""
    import json

    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"query-status did not answer JSON: {text.strip()[:200]}") from None
    if not doc.get("result", False):
        raise ValueError(f"query-status failed: {doc.get('msg') or text.strip()[:200]}")
    stages, lags, synced = [], [], None
    for source in doc.get("sources") or []:
        for sub in source.get("subTaskStatus") or []:
            stages.append(sub.get("stage"))
            sync = sub.get("sync") or {}
            if sync.get("secondsBehindMaster") not in (None, ""):
                lags.append(float(sync["secondsBehindMaster"]))
            synced = sync.get("syncerBinlogGtid") or synced
    return {"stages": stages, "seconds_behind_master": max(lags) if lags else None, "syncer_gtid": synced}


def parse_metrics(text: str, task: str = TASK) -> float | None:
    """dm_syncer_replication_lag_gauge of the task (seconds; the largest over sources) from dm-worker's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    values = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "dm_syncer_replication_lag_gauge" and sample.labels.get("task") == task
    ]
    return max(values) if values else None


class DmOptions(BaseModel):
    """The task's units."""

    model_config = ConfigDict(extra="forbid")
    task_mode: Literal["all", "full", "incremental"] = Field("incremental", description="dm: the task's mode")
    mydumper_threads: int = Field(4, ge=1, le=256, description="dm: the dump's threads")
    mydumper_rows: int = Field(0, ge=0, description="dm: rows per dump chunk (0: whole tables)")
    loader_pool_size: int = Field(16, ge=1, le=1024, description="dm: the load's connections")
    syncer_worker_count: int = Field(16, ge=1, le=1024, description="dm: the syncer's workers")
    syncer_batch: int = Field(100, ge=1, le=100_000, description="dm: statements per syncer transaction")


class Dm(SourceToTarget):
    """mysql-source -> dm-worker -> TiDB (tidb:4000), driven with dmctl inside the dm-master container."""

    kind = "dm"
    label = "DM"
    Options = DmOptions
    sweepable = ("syncer_worker_count", "syncer_batch")
    default_link = ("mysql-source", "dm-worker")  # the source to the worker reading its binlog
    consistency_scope = "mysql-source -> tidb"
    checks_unshaped = True
    WORKDIR = "/laglab-dm"  # inside the dm-master container
    TIDB = Endpoint("tidb", 4000, "root", "", "tidb")

    def __init__(self, parts: Parts, http=None):
        import requests

        super().__init__(parts)
        self.http = http or requests.Session()
        self.running = False
        self.started_once = False
        self.source_created = False

    def _dmctl(self, *command: str) -> str:
        self.parts.platform.running("dm-master", hint="make up PROFILE=dm")
        code, out = self.parts.platform.exec("dm-master", dmctl_argv(*command))
        text = out.decode(errors="replace")
        if code != 0:
            raise RuntimeError(f"dmctl {' '.join(command[:1])} failed: {text.strip()[-300:]}")
        return text

    def _put(self, files: dict[str, str]) -> None:
        self.parts.platform.running("dm-master", hint="make up PROFILE=dm")
        self.parts.platform.put_files("dm-master", self.WORKDIR, {name: text.encode() for name, text in files.items()})

    def task_options(self, replicator) -> TaskOptions:
        return TaskOptions(
            task_mode=replicator.task_mode,
            mydumper_threads=replicator.mydumper_threads,
            mydumper_rows=replicator.mydumper_rows,
            loader_pool_size=replicator.loader_pool_size,
            syncer_worker_count=replicator.syncer_worker_count,
            syncer_batch=replicator.syncer_batch,
        )

    def apply(self, plan: ReplicatorPlan, sleep: Sleep = time.sleep) -> None:
        self.start(plan.options, plan.rtt, sleep=sleep)

    def start(self, replicator, rtt_seconds: float, sleep: Sleep = time.sleep) -> None:
        if self.running:
            self._dmctl("stop-task", TASK)
        password = self.parts.settings.MYSQL_ROOT_PASSWORD
        self._put(
            {
                "source.yaml": source_config("mysql-source", "mysql-source", 3306, "root", password),
                "task.yaml": task_config(
                    TASK,
                    "mysql-source",
                    [self.parts.settings.LAB_DATABASE],
                    ("tidb", 4000, "root", ""),
                    self.task_options(replicator),
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
        stages: list = []

        def running() -> bool:
            stages[:] = parse_query_status(self._dmctl("query-status", TASK))["stages"]
            return "Running" in stages

        poll(running, 120, interval=1, sleep=sleep,
             timed_out=lambda: RuntimeError(f"DM task {TASK} not running within 120s: stages {stages}"))  # fmt: skip

    def reports_no_delay(self) -> bool:
        """secondsBehindMaster is 0 (whole seconds: not a catch-up test on a delayed link)."""
        return parse_query_status(self._dmctl("query-status", TASK))["seconds_behind_master"] == 0

    def wait_caught_up(self, timeout: float, sleep: Sleep = time.sleep) -> None:
        """Caught up = DM's syncer has passed every transaction the source had executed at this call
        (its GTID set, from query-status), whatever the link's delay; secondsBehindMaster is whole
        seconds and reads 0 while a delayed link still holds transactions."""
        native = NativeLink(self.parts.source, self.parts.target)
        wanted = native.source_executed()
        synced = [None]

        def passed() -> bool:
            synced[0] = parse_query_status(self._dmctl("query-status", TASK))["syncer_gtid"]
            return bool(synced[0] and native.subset(wanted, synced[0]))

        poll(passed, timeout, interval=1, sleep=sleep,
             timed_out=lambda: RuntimeError(f"dm did not catch up within {timeout:g}s (syncer at {synced[0]!r})"))  # fmt: skip

    def sample(self) -> dict:
        status = parse_query_status(self._dmctl("query-status", TASK))
        response = self.http.get("http://dm-worker:8262/metrics", timeout=5)
        gauge = parse_metrics(response.text) if response.status_code == 200 else None
        return {"delay_seconds": status["seconds_behind_master"], "lag_gauge_seconds": gauge}

    def summary(self, plan: ReplicatorPlan, samples) -> dict:
        return {"replicator_metrics": metrics_summary(samples)}

    def consistency(self, sleep: Sleep = time.sleep) -> dict:
        """DM -> TiDB: row counts of every lab table on both sides (TiDB has no CHECKSUM TABLE)."""
        self.wait_caught_up(120, sleep=sleep)
        database = self.parts.settings.LAB_DATABASE
        src, dst = connect(self.parts.source, timeout=5), connect(self.TIDB, timeout=5, read_timeout=120)
        differences = []
        try:
            for table in sorted(t for t in consistency.lab_tables(src) if t.startswith(f"{database}.")):
                counts = [consistency.row_count(conn, table) for conn in (src, dst)]
                if counts[0] != counts[1]:
                    differences.append(f"{table}: {counts[0]} rows on mysql-source, {counts[1]} on tidb")
        finally:
            src.close()
            dst.close()
        return {"identical": not differences, "differences": differences, "gtid": None}

    def restore(self) -> None:
        self.stop()

    def stop(self) -> None:
        if self.running:
            self._dmctl("stop-task", TASK)
            self.running = False
