"""A point's record and a run's (#52.1): every field a point's result carries, its unit and meaning,
declared once. summary.json is their serialisation: the runner builds a `PointRecord` for each point
(analysis/summarise.py) and writes the run's `RunRecord`; whoever reads summary.json back
(`read_summary`: the report, `laglab report`) gets it validated against these types, so a writer that
spells a figure differently, or a file that is not a run's summary, fails where it is read and says
which field.

The outcome is decided once (analysis/outcome.py) and stored here; readers take it from the record.

A replicator kind adds figures of its own (`Replicator.summary`: DTLE's and DM's `replicator_metrics`,
a cluster's `cluster`): those are declared too, each optional. Fields a point of an older summary did
not have are optional with the value older runs meant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

Doc = dict[str, Any]


class Assertion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assertion: str  # as the scenario wrote it: `max_lag_seconds < 5`
    passed: bool


class OutcomeRecord(BaseModel):
    """analysis/outcome.py's Outcome as stored."""

    model_config = ConfigDict(extra="forbid")

    verdict: str
    held: bool
    reasons: list[str] = []
    checks: int = 0
    failed: int = 0
    said: str | None = None  # the verdict in the scenario's words (`verdict:`); older summaries lack it


class PointRecord(BaseModel):
    """One measured point, as summary.json's `points[]` holds it."""

    model_config = ConfigDict(extra="forbid")

    point: int = Field(description="the point's number, from 1, in the order measured")
    params: Doc = Field(description="the swept keys and their values at this point (dotted keys)")
    link: Doc = Field(description="the link asked: preset, rtt, rate, rate_reverse, jitter, loss, as written")
    load: Doc = Field(description="the load asked: tool, script, threads, rate_tps, seconds, queries (or a profile)")
    replicator: Doc = Field(description="the replicator kind and its options")
    verification: Doc = Field(description="the link as measured before the window (ping, iperf3): ok, rtt, rate")
    measured_seconds: float = Field(description="the measured window's length, seconds")
    window_start_epoch: float = Field(description="the window's start, Unix seconds")
    lag_samples: int = Field(description="lag samples in the window")
    gaps: int = Field(description="samples the recorder could not take in the window (a server away)")
    max_lag_seconds: float | None = Field(description="the largest lag in the window, seconds")
    p95_lag_seconds: float | None = Field(description="its 95th percentile, seconds")
    lag_slope: float | None = Field(description="how fast the lag grew over the window: seconds of lag per second")
    lag_slope_ci: Doc | None = Field(description="the slope's 95 % interval from per-second means (knee_search.py)")
    node_max_lag_seconds: dict[str, float] | None = Field(
        None, description="a cluster's members: the largest lag of each, seconds"
    )
    tps: float | None = Field(description="transactions a second the load achieved in the window (mean)")
    load_seconds: float | None = Field(description="mysqlslap: how long its queries took, seconds")
    qps: float | None = Field(description="queries a second in the window (mean)")
    link_mbit: float | None = Field(description="what the link carried source -> target in the window, Mbit/s")
    reverse_link_mbit: float | None = Field(description="and target -> source, Mbit/s")
    binlog_mbit: float | None = Field(description="binlog bytes the source wrote in the window, Mbit/s")
    load_error: str | None = Field(description="why the load failed (sysbench's FATAL line); the point is not valid")
    load_restarts: int = Field(description="times the load was started again in the window (load.reconnect)")
    replay: Doc | None = Field(None, description="a write profile's replay: what was asked beside what ran")
    timeline: list[Doc] | None = Field(None, description="the point's timeline events: asked, in effect, undone")
    catch_ups: int | None = Field(None, description="disruptions that ended within the window")
    max_catch_up_seconds: float | None = Field(None, description="the longest catch-up after one, seconds")
    host: Doc | None = Field(description="the host's load in the window (hostload.py): saturated means CPU-bound")
    tcp_buffers: Doc | None = Field(None, description="the TCP buffers in force, per service")
    replicator_metrics: Doc | None = Field(None, description="DTLE's or DM's own metrics over the window")
    cluster: Doc | None = Field(None, description="a cluster point: kind, write node, delayed node, matrix")
    probe: Doc | None = Field(None, description="a knee search's probe: search, value, verdict and why")
    assertions: list[Assertion] = Field(description="the scenario's assertions, each judged on this point")
    outcome: OutcomeRecord | None = Field(description="what the point came to, decided once: verdict, reasons")
    passed: bool = Field(description="the outcome held (kept for readers of older summaries)")

    def as_json(self) -> Doc:
        """As summary.json holds it: the optional fields a point did not have are left out."""
        return self.model_dump(mode="json", exclude_unset=True)


class RunRecord(BaseModel):
    """summary.json: a run as it stands (written after each point and at the end)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    scenario: str
    status: str  # pending, running, completed, failed, interrupted
    reason: str | None
    started: str
    finished: str | None
    quick: bool
    sweep: dict[str, list]  # the swept keys and their values
    link_between: list[str]
    reference: Doc | None
    points: list[PointRecord]
    search: Doc | None = None  # a knee search: what it searched
    knees: list[Doc] | None = None  # its answer per sweep point
    knee: Doc | None = None  # `knee` by knob, when there is one sweep point
    host_saturated_points: list[int]  # points whose window was CPU-bound (hostload.py)
    cleanup_errors: list[Doc]
    bottleneck_tolerance: Doc
    consistency: Doc | None
    bottlenecks: list[Doc] = []  # what should bound each point, predicted against measured (bottleneck.py)
    outcome: OutcomeRecord  # decided once (outcome.py); an older summary lacks it: decided on reading

    def as_json(self) -> Doc:
        return self.model_dump(mode="json", exclude_unset=True)


def _as_stored(model: type[BaseModel], **inner: type[BaseModel]) -> type[BaseModel]:
    """What a summary.json of any earlier version holds of `model`: each field it has is the declared
    type (a figure spelled as a string fails), a field it lacks is None (added since), a key no longer
    written is kept."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = inner.get(name, info.annotation)
        fields[name] = (annotation | None, None)
    return create_model(f"Stored{model.__name__}", __config__=ConfigDict(extra="allow"), **fields)


StoredPoint = _as_stored(PointRecord)
StoredRun = _as_stored(RunRecord, points=list[StoredPoint])


class NotASummary(ValueError):
    """A summary.json that is not a run's record: the file, and the field that does not fit."""


def read_summary(folder: Path) -> Doc:
    """A run's summary.json, validated against the run's record as any version of laglab wrote it
    (StoredRun: the fields it has of the declared types), as the dict it was written as."""
    path = Path(folder) / "summary.json"
    try:
        doc = json.loads(path.read_text())
        StoredRun.model_validate(doc)
    except json.JSONDecodeError as error:
        raise NotASummary(f"{path}: not JSON ({error})") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise NotASummary(f"{path}: {where}: {first['msg']} ({error.error_count()} problem(s))") from None
    return doc
