"""GET /api/lag: the latest lag sample and a recent window."""

from flask import Blueprint, current_app

from ..errors import ApiError
from ..openapi import operation
from . import models

bp = Blueprint("lag", __name__)


@operation(
    bp, "GET", "/api/lag", "Latest lag sample and a recent window", query=models.LagQuery,
    ok=(200, models.LagWindow), errors=(503,),
)  # fmt: skip
def lag(query: models.LagQuery):
    recorder = current_app.extensions["laglab"].recorder
    if recorder is None:
        raise ApiError(503, "the lag recorder is not running")
    # A longer window than the recorder keeps gives all it keeps (window_seconds says how much).
    seconds = min(query.seconds, recorder.samples.maxlen * recorder.interval)
    window = [s for s in recorder.window(seconds) if s.epoch > query.since]
    latest = recorder.samples[-1].as_dict() if recorder.samples else None
    return {
        "latest": latest,
        "interval_ms": round(recorder.interval * 1000),
        "csv": f"results/{recorder.run.path.name}/lag.csv",
        "window_seconds": seconds,
        "samples": [s.as_dict() for s in window],
    }
