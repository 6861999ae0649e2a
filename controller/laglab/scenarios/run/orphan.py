"""A run the controller's death cut short: what it changed is kept on disk while it runs (run.json in
the state folder: the run, the TCP buffers before it set them, the replicator kinds it used), so the
next start can end it: load stopped, shaping cleared, TCP buffers put back, each kind restored (or its
repair on /api/health), and its summary.json marked `interrupted` with the reason.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from laglab.measurement.results import iso
from laglab.replicators import KINDS
from laglab.scenarios.analysis.outcome import Outcome
from laglab.shaping import tcp_buffers
from laglab.state.recovery import Restart, read_state, write_state

log = logging.getLogger("laglab.runs")
MARKER = "run.json"
LOAD_TOOLS = ("sysbench", "mysqlslap")


class RunMarker:
    """The run in progress, on disk; cleared once its own cleanup has run."""

    def __init__(self, state_dir: Path | None, run_id: str, results: Path):
        self.path = None if state_dir is None else Path(state_dir) / MARKER
        self.data = {"id": run_id, "results": str(results), "started": time.time(), "kinds": [], "tcp_before": {}}

    def write(self) -> None:
        if self.path is None:
            return
        try:
            write_state(self.path, self.data)
        except OSError as error:  # the run goes on; a crash would then leave it unmarked
            log.error("cannot write %s: %s", self.path, error)

    def kind_used(self, kind: str) -> None:
        if kind not in self.data["kinds"]:
            self.data["kinds"].append(kind)
            self.write()

    def buffers_before(self, service: str, values: dict[str, str]) -> None:
        self.data["tcp_before"][service] = values
        self.write()

    def clear(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


@dataclass
class Parts:
    """What ending an orphaned run touches (app.start_shaping hands them over)."""

    state_dir: Path
    platform: object
    executor: object
    shaping: object
    problems: object
    replicator: Callable[[str], object]  # kind -> a new instance of it (replicators.for_kind)


def recover(parts: Parts, restart: Restart) -> None:
    """End the run a dead controller left (if any), each step on its own: one that fails is said, the
    others still run."""
    path = Path(parts.state_dir) / MARKER
    data = read_state(path, restart, None)
    if not isinstance(data, dict) or "id" not in data:
        return
    done, failed = [], []

    def step(words: str, fn) -> None:
        try:
            result = fn()
            done.append(result if isinstance(result, str) else words)
        except Exception as error:
            failed.append(f"{words}: {type(error).__name__}: {str(error)[:160]}")

    step("load stopped", lambda: _stop_load(parts))
    step("shaping cleared", parts.shaping.clear)
    step("TCP buffers put back", lambda: _buffers(parts, data.get("tcp_before") or {}))
    for kind in data.get("kinds") or []:
        if kind not in KINDS:
            continue
        repair = KINDS[kind].crash_repair
        if repair:
            parts.problems.add(
                f"{kind}-interrupted-run",
                f"run {data['id']} was replicating with {kind} when the controller died",
                repair,
            )
            done.append(f"{kind}: repair with `{repair}` (on /api/health)")
        else:
            step(f"{kind} restored to the lab's defaults", lambda kind=kind: parts.replicator(kind).restore())
    reason = f"the controller stopped during the run (found at its next start, {iso(time.time())})"
    step("marked interrupted", lambda: _mark_interrupted(Path(data.get("results", "")), data, reason))
    restart.run = f"run {data['id']} interrupted: " + "; ".join(done + [f"FAILED {f}" for f in failed])
    log.warning("at start: %s", restart.run)
    path.unlink(missing_ok=True)


def _stop_load(parts: Parts) -> str:
    """The dead controller's sysbench or mysqlslap, by name in loadgen: the lab runs one load at a time,
    and the new controller has started none yet."""
    stopped = []
    for tool in LOAD_TOOLS:
        code, _ = parts.platform.exec("loadgen", ["pkill", "-TERM", "-x", tool])
        if code == 0:  # pkill: 0 = something matched, 1 = nothing did
            stopped.append(tool)
    return f"load stopped ({', '.join(stopped)})" if stopped else "no load was running"


def _buffers(parts: Parts, before: dict) -> str:
    found = parts.platform.list()
    put_back = []
    for service, values in before.items():
        container = found.get(service)
        if container is not None and container.running and container.entered:
            parsed = {name: tcp_buffers.parse(name, values[name]) for name in ("wmem", "rmem")}
            tcp_buffers.write(parts.executor, container.pid, parsed)
            put_back.append(service)
    return f"TCP buffers put back ({', '.join(put_back)})" if put_back else "no TCP buffers to put back"


def _mark_interrupted(folder: Path, data: dict, reason: str) -> None:
    summary = folder / "summary.json"
    doc = json.loads(summary.read_text()) if summary.exists() else {"id": data["id"], "points": []}
    doc.update(status="interrupted", reason=reason, finished=iso(time.time()))
    doc.setdefault("started", iso(data.get("started") or time.time()))
    doc["outcome"] = Outcome("INTERRUPTED", [reason]).as_json()
    if folder.is_dir():
        write_state(summary, doc)
