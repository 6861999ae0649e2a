"""DM (PingCAP Data Migration) -> TiDB: the source and task configuration files.

Formats: DM's source configuration (source-id, enable-gtid, from) and task configuration (name,
task-mode, target-database, block-allow-list, mydumpers/loaders/syncers and mysql-instances), as in
DM's documentation ("Data Migration Task Configuration File"). Rendered as YAML for
`dmctl operate-source create` and `dmctl start-task`.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml


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
