"""GET /api/lag: the latest lag sample and a recent window."""

from flask import Blueprint

from laglab.api import models, parts
from laglab.api.openapi import operation
from laglab.errors import ApiError
from laglab.measurement.lag import window

bp = Blueprint("lag", __name__)


@operation(
    bp, "GET", "/api/lag", "Latest lag sample and a recent window", query=models.LagQuery,
    ok=(200, models.LagWindow), errors=(404, 503),
)  # fmt: skip
def lag(query: models.LagQuery):
    lab = parts.lab()
    recorder = parts.recorder()
    samples = recorder.samples
    replicas = recorder.latest()  # mysql-target and any further replica (Kubernetes: mysql-target-1, ...)
    for node in lab.clusters.recorders.values():
        replicas.update(node.latest())
    if query.replica not in (None, recorder.target.name):
        samples = recorder.replica(query.replica)
        if samples is None:
            samples = lab.clusters.replica(query.replica)
        if samples is None:
            raise ApiError(
                404, f"replica: no lag recorded for {query.replica!r} (recorded: {', '.join(sorted(replicas))})"
            )
    # A longer window than the recorder keeps gives all it keeps (window_seconds says how much).
    seconds = min(query.seconds, samples.maxlen * recorder.interval)
    latest = samples[-1].as_dict() if samples else None
    return {
        "latest": latest,
        "replicas": replicas,
        "interval_ms": round(recorder.interval * 1000),
        "csv": f"results/{recorder.run.path.name}/lag.csv",
        "window_seconds": seconds,
        "samples": [s.as_dict() for s in window(samples, seconds, after=query.since)],
        "split_unavailable": recorder.split_unavailable,
    }
