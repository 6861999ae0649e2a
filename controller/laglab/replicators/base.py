"""The one interface a replicator kind implements for the scenario runner.

A run drives every kind the same way, point after point:

    prepare(data)              once, before the kind's first point (the data set the load needs)
    apply(plan, sleep)         the point's options; starts the replication where the kind is started
    wait_caught_up(timeout)    everything the source has is on the replica(s)
    window_bytes()             a counter read at the start and end of the measured window
    sample()                   the kind's own figures, every second while the load runs
    summary(plan, samples)     the point's extra keys in summary.json

`plan` is the point's `ReplicatorPlan` (its options, the link's round trip, the cluster's nodes),
resolved from the scenario by `plan.Point.plan()`: a kind never reads the scenario.
    consistency()              after the last point: nothing lost, nothing extra
    restore()                  back to the lab's defaults (the run's cleanup, or a change of kind)

A new kind is one module here with a subclass (its options in its own `Options` model), and one line
in `replicators.KINDS`. Class attributes
tell the scenario schema what the kind owns: its `Options` model (the `replicator.<option>` keys) and
which of them a sweep may vary, the link a scenario shapes when the file names none, and whether points
need a `cluster:` section.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from laglab.replicators import consistency
from laglab.replicators.db import Endpoint, connect, executed_gtids, server_dialect, wait_executed

if TYPE_CHECKING:
    from laglab.config import Settings
    from laglab.load.generator import LoadGenerator, Profile
    from laglab.measurement.lag import LagRecorder
    from laglab.platforms import Platform

Sleep = Callable[[float], None]


@dataclass(frozen=True)
class ClusterPlan:
    """A cluster point's nodes: the load writes on `writer`, `delayed` is the node the delay (or the
    matrix's round trip from the writer, `delay_ms`) is measured to."""

    writer: str
    delayed: str
    delay_ms: float
    matrix: dict[str, float] | None  # "a-b" -> the matrix's round trip between two sites, ms


@dataclass(frozen=True)
class ReplicatorPlan:
    """What a point asks of its replicator kind: the kind's options (its `Options` model), the link's
    round trip in seconds (DTLE and DM size by it) and, for a cluster, its nodes."""

    kind: str
    options: Any  # the kind's own Options instance (its replicator.<option> keys); None: it has none
    rtt: float
    cluster: ClusterPlan | None = None


@dataclass(frozen=True)
class Parts:
    """What a replicator kind may use of the lab, and nothing else, each part required: the servers, the
    settings, the platform its agents run on (exec, logs), the lag recorder (paused at hand-overs; its
    heartbeats mark a catch-up), the load generator (a data set's prepare). Built once by the
    composition root (app.assemble); unit tests build one over their fakes (fakes.kind_parts)."""

    settings: Settings
    source: Endpoint
    target: Endpoint
    platform: Platform
    recorder: LagRecorder
    load: LoadGenerator


class Replicator:
    kind: ClassVar[str]
    # The kind's own options: a pydantic model whose fields are the scenario's replicator.<option> keys
    # (scenarios/schema/scenario.py builds its `replicator:` section from every kind's), and which of them a sweep
    # may vary. A new kind with options touches no shared schema.
    Options: ClassVar[type | None] = None
    sweepable: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[str, ...]] = ()  # its Options' field names (set from Options)
    default_link: ClassVar[tuple[str, str]] = ("mysql-source", "mysql-target")
    # `link.ports: replication`: the ports its own stream crosses the weak link on (the MySQL protocol
    # for the binlog stream; a kind with its own transport overrides it).
    ports: ClassVar[tuple[int, ...]] = (3306,)
    clustered: ClassVar[bool] = False  # points carry a `cluster:` section (three nodes)
    records_lag: ClassVar[bool] = True  # the heartbeat lag mysql-source -> mysql-target measures this kind
    # What consistency() compares: kinds with the same scope check the same thing, once per run.
    consistency_scope: ClassVar[str] = "mysql-source -> mysql-target"
    # Its consistency() waits for a catch-up a shaped link would hold for as long as it lasts: the
    # runner clears the shaping first (the network is the runner's to change, not the replicator's).
    checks_unshaped: ClassVar[bool] = False

    label: ClassVar[str] = ""  # the kind in a reader's words (report.md, plots): "DTLE", "native"
    # A run of this kind cut short by the controller's death: None, restore() of a new instance puts the
    # lab's defaults back; else the command a person runs (the kind's state is in its agents, not here).
    crash_repair: ClassVar[str | None] = None

    @classmethod
    def describe(cls, options: dict) -> str:
        """The kind and the options a point gave it, in words with units, as a reader wants them in a
        report: `DTLE (group max size 1 MiB, group timeout auto, repl chan buffer size 600)`. A kind
        whose options read better otherwise says so by overriding this."""
        fields = cls.Options.model_fields if cls.Options is not None else {}
        said = []
        for name, value in options.items():
            if name == "kind":
                continue
            unit = ((fields[name].json_schema_extra or {}).get("unit", "")) if name in fields else ""
            named = name
            if name.endswith(("_ms", "_bytes")):  # the unit goes with the value: "group timeout 100 ms"
                named, unit = name.rsplit("_", 1)[0], name.rsplit("_", 1)[1]
            said.append(f"{named.replace('_', ' ')} {words_of(value, unit)}")
        return f"{cls.label or cls.kind}" + (f" ({', '.join(said)})" if said else "")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "Options" in cls.__dict__:
            cls.options = tuple(cls.Options.model_fields) if cls.Options is not None else ()

    def __init__(self, parts: Parts):
        self.parts = parts

    def prepare(self, data: Profile, sleep: Sleep = time.sleep) -> None:
        """Once per run, before this kind's first point: the data set (sysbench's tables and rows). Its
        waits sleep through `sleep` (a run's: it raises once the run is cancelled)."""

    def apply(self, plan: ReplicatorPlan, sleep: Sleep = time.sleep) -> None:
        """The point's options (and a start, for kinds that are started)."""

    def wait_caught_up(self, timeout: float, sleep: Sleep = time.sleep) -> None:
        raise NotImplementedError

    def window_bytes(self) -> int | None:
        """A byte counter that only grows, read around the measured window (None: nothing to count)."""
        return None

    def sample(self) -> dict | None:
        """The kind's own figures while the load runs (None: it has none)."""
        return None

    def summary(self, plan: ReplicatorPlan, samples: list[tuple[float, dict]]) -> dict:
        """Extra keys of the point's result."""
        return {}

    def consistency(self, sleep: Sleep = time.sleep) -> dict:
        """Nothing lost: the kind's check, its waits through `sleep` (a run's: cancelled, it raises)."""
        raise NotImplementedError

    def restore(self) -> None:
        """Back to the lab's defaults."""


class SourceToTarget(Replicator):
    """Kinds that read mysql-source's binary log: the load writes there, the lag recorder measures them,
    the data set is prepared there once per run."""

    def prepare(self, data: Profile, sleep: Sleep = time.sleep) -> None:
        """sysbench prepare once per data set: kept when every table already holds the asked rows."""
        tables, rows = data.tables, data.rows
        database = self.parts.settings.LAB_DATABASE
        conn = connect(self.parts.source, timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT TABLE_NAME AS t FROM information_schema.TABLES "
                    "WHERE TABLE_SCHEMA=%s AND TABLE_NAME LIKE 'sbtest%%'",
                    (database,),
                )
                present = {row["t"] for row in cur.fetchall()}
                ready = present == {f"sbtest{i}" for i in range(1, tables + 1)}
            for i in range(1, tables + 1):
                ready = ready and consistency.row_count(conn, f"{database}.sbtest{i}") == rows
        finally:
            conn.close()
        if not ready:
            self.parts.load.prepare(data)
            self.wait_caught_up(600, sleep=sleep)

    def source_caught_up(self, timeout: float, sleep: Sleep | None = None) -> bool:
        """The target has executed the source's executed set (the lab's one GTID wait, db.wait_executed;
        with `sleep`, in one-second waits that a cancelled run leaves)."""
        src = connect(self.parts.source, timeout=5)
        dst = connect(self.parts.target, timeout=5, read_timeout=(30 if sleep else timeout + 30))
        try:
            dialect = server_dialect(src)
            return wait_executed(dst, dialect, executed_gtids(src, dialect), timeout, sleep=sleep)
        finally:
            src.close()
            dst.close()

    def window_bytes(self) -> int | None:
        """The source's binary logs in bytes: what every kind here has to carry across the link."""
        conn = connect(self.parts.source, timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                return sum(int(row["File_size"]) for row in cur.fetchall())
        finally:
            conn.close()


def metrics_summary(samples: list[tuple[float, dict]]) -> dict:
    """A started replicator's own figures over a point: its largest reported delay, each byte counter as
    Mbit/s, and its gaps: the stretches where one of its agents did not answer, with the reason."""
    delays = [v["delay_seconds"] for _, v in samples if v.get("delay_seconds") is not None]
    out: dict = {"samples": len(samples), "max_delay_seconds": max(delays) if delays else None}
    counters = sorted({k for _, v in samples for k in v if k.endswith("_bytes")})
    for key in counters:
        points = [(t, v[key]) for t, v in samples if v.get(key) is not None]
        out[key.replace("_bytes", "_mbit")] = (
            round((points[-1][1] - points[0][1]) * 8 / 1e6 / (points[-1][0] - points[0][0]), 4)
            if len(points) >= 2 and points[-1][0] > points[0][0]
            else None
        )
    out["gaps"] = gaps(samples)
    return out


def gaps(samples: list[tuple[float, dict]]) -> list[dict]:
    """Consecutive samples in which the same agent did not answer, as one gap each: {agent, from, to,
    samples, reason} (epoch seconds; the reason of the gap's first sample)."""
    out: list[dict] = []
    open_gaps: dict[str, dict] = {}
    for t, values in samples:
        missing = values.get("unreachable") or {}
        for agent in list(open_gaps):
            if agent not in missing:
                out.append(open_gaps.pop(agent))
        for agent, reason in missing.items():
            gap = open_gaps.setdefault(agent, {"agent": agent, "from": round(t, 3), "samples": 0, "reason": reason})
            gap["to"], gap["samples"] = round(t, 3), gap["samples"] + 1
    out.extend(open_gaps.values())
    return sorted(out, key=lambda g: (g["from"], g["agent"]))


def words_of(value, unit: str = "") -> str:
    """An option's value in words: sizes in bytes as KiB/MiB/GiB, booleans as on/off, units kept."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if unit == "bytes" and isinstance(value, int):
        for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= size and value % (size // 1024 or 1) == 0:
                return f"{value / size:g} {name}"
        return f"{value} bytes"
    if unit in ("ms", "s") and isinstance(value, int | float):
        return f"{value:g} {unit}"
    return str(value)
