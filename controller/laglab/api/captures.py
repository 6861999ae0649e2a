"""Packet captures of a link: POST /api/captures (start), GET /api/captures, GET /api/captures/<id>,
DELETE /api/captures/<id> (stop it now and forget it; the files stay)."""

from pathlib import Path

from flask import Blueprint, current_app

from laglab.api import access, models, parts
from laglab.api.openapi import operation
from laglab.shaping.params import parse_time

bp = Blueprint("captures", __name__)
CAPTURE_ID = {"capture_id": {"type": "string", "pattern": r"^[0-9TZ]{16}-[0-9]{1,9}-[A-Za-z0-9_.-]{1,200}$"}}


def shown(capture) -> dict:
    """The capture with its files as signed links (a browser, or curl, fetches them without the token)."""
    out = capture.as_json()
    root = Path(current_app.config["RESULTS_DIR"]).resolve()
    folder = Path(out["folder"]).resolve()
    out["links"], out["results"] = {}, None
    if folder.is_relative_to(root):
        token = current_app.config["API_TOKEN"]
        where = folder.relative_to(root).as_posix()
        out["results"] = f"results/{where}"  # where make up's results/ has it on the host
        names = [f["file"] for f in out["files"].values()] + ["shaping.csv", "capture.json"]
        out["links"] = {name: access.signed_link(token, f"/results/{where}/{name}") for name in names}
        for side in out["files"].values():
            side["link"] = out["links"][side["file"]]
    return out


@operation(
    bp, "POST", "/api/captures", "Capture a link's packets: a pcap per side, and the link's shaping as it changed",
    body=models.CaptureBody, ok=(201, models.Capture), errors=(404, 409, 422, 502, 503),
    description="tcpdump in each side's network namespace, only packets to or from the other side, for `for` "
    "(at most limit capture_seconds), each pcap at most `max_bytes`, `snaplen` bytes of each packet. Answers "
    "once both sides listen; GET it for its progress, DELETE it to stop early. Docker only (422 `link` where the controller does not enter namespaces).",
)  # fmt: skip
def start(body: models.CaptureBody):
    seconds = parse_time("for", body.for_, high=86400.0)
    a, b = body.link
    return shown(parts.captures().start(a, b, seconds, body.max_bytes, body.snaplen)), 201


@operation(bp, "GET", "/api/captures", "Running and recent captures", ok=(200, models.Captures), errors=(503,))
def index():
    return {"captures": [shown(c) for c in list(parts.captures().items.values())]}


@operation(
    bp, "GET", "/api/captures/<capture_id>", "A capture's progress, files and counts",
    path_params=CAPTURE_ID, ok=(200, models.Capture), errors=(404, 503),
)  # fmt: skip
def show(capture_id):
    return shown(parts.captures().find(capture_id))


@operation(
    bp, "DELETE", "/api/captures/<capture_id>",
    "Stop a capture now if it runs, and forget it (its files stay in results/, whole)",
    path_params=CAPTURE_ID, ok=(200, models.Capture), errors=(404, 503),
    description="The answer is the capture as it ended (counts, files). It leaves this controller's list then; "
    "a tcpdump that has not ended within 15 s keeps it listed until it has.",
)  # fmt: skip
def stop(capture_id):
    captures = parts.captures()
    capture = captures.find(capture_id)
    capture.stop("asked")
    if capture.wait(15):
        captures.forget(capture_id)
    return shown(capture)
