"""GET /api/lag: the latest lag sample and a recent window."""

from flask import Blueprint, current_app

from ..errors import ApiError
from ..params import number

bp = Blueprint("lag", __name__)


@bp.get("/api/lag")
def lag():
    recorder = current_app.extensions["laglab"].recorder
    if recorder is None:
        raise ApiError(503, "the lag recorder is not running")
    seconds = number("seconds", 30, 0, recorder.samples.maxlen * recorder.interval)
    since = number("since", 0, 0, 1e11)
    window = [s for s in recorder.window(seconds) if s.epoch > since]
    latest = recorder.samples[-1].as_dict() if recorder.samples else None
    return {
        "latest": latest,
        "interval_ms": round(recorder.interval * 1000),
        "csv": f"results/{recorder.run.path.name}/lag.csv",
        "window_seconds": seconds,
        "samples": [s.as_dict() for s in window],
    }
