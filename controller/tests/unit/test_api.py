import collections
import re

from laglab.app import create_app
from laglab.lag import LagSample
from laglab.openapi import document


class FakeRecorder:
    interval = 0.1

    def __init__(self, epochs):
        self.samples = collections.deque(
            (LagSample(time=str(e), epoch=e, status="ok", lag_seconds=0.0) for e in epochs), maxlen=3000
        )

        class _Run:
            class path:
                name = "20260101T000000Z-live"

        self.run = _Run

    def window(self, seconds):
        last = self.samples[-1].epoch
        return [s for s in self.samples if s.epoch >= last - seconds]


def test_unknown_route_is_json_404(client):
    response = client.get("/api/nothing")
    assert response.status_code == 404
    assert response.json["status"] == 404
    assert "error" in response.json


def test_wrong_method_is_json_405(client):
    response = client.post("/api/lag")
    assert response.status_code == 405
    assert response.json["status"] == 405


def test_lag_without_recorder_is_503(client):
    response = client.get("/api/lag")
    assert response.status_code == 503
    assert response.json == {"error": "the lag recorder is not running", "status": 503}


def test_lag_window(app, client):
    app.extensions["laglab"].recorder = FakeRecorder([1.0, 2.0, 3.0, 4.0])
    body = client.get("/api/lag?seconds=1.5").json
    assert [s["epoch"] for s in body["samples"]] == [3.0, 4.0]
    assert body["latest"]["epoch"] == 4.0
    assert body["csv"] == "results/20260101T000000Z-live/lag.csv"


def test_lag_bad_window_names_the_parameter(app, client):
    app.extensions["laglab"].recorder = FakeRecorder([1.0])
    response = client.get("/api/lag?seconds=abc")
    assert response.status_code == 400
    assert response.json == {"error": "seconds: 'abc' is not a number", "status": 400}
    response = client.get("/api/lag?seconds=-1")
    assert response.json == {"error": "seconds: -1 is out of range 0..300", "status": 400}
    assert client.get("/api/lag?seconds=nan").status_code == 400


def test_consistency_bad_timeout(client):
    response = client.get("/api/consistency?timeout=0")
    assert response.status_code == 400
    assert response.json["error"] == "timeout: 0 is out of range 1..600"


def test_health_without_recorder(client):
    body = client.get("/api/health").json
    assert body["status"] == "ok"
    assert body["recorder"] is None


def test_token_is_required_when_configured():
    app = create_app({"START_RECORDER": False, "START_SHAPING": False}, environ={"LAB_API_TOKEN": "s3cret"})
    client = app.test_client()
    denied = client.get("/api/lag")
    assert denied.status_code == 401
    assert denied.json["status"] == 401
    assert client.get("/api/lag", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/lag", headers={"Authorization": "Bearer s3cret"}).status_code == 503  # past auth
    assert client.get("/api/health").status_code == 200


def test_openapi_names_exactly_the_served_routes(app, client):
    served = {
        (re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if not rule.endpoint.endswith("static")
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    documented = {
        (path, m)
        for path, ops in document()["paths"].items()
        for m in ops
        if m in ("get", "put", "post", "delete", "patch")
    }
    assert served == documented
    assert client.get("/api/openapi.json").json["openapi"].startswith("3.")
