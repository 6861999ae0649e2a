import collections
import re

from laglab.api.openapi import document
from laglab.measurement.lag import LagSample

from ..conftest import authorized
from .fakes import fake_app


class FakeRecorder:
    interval = 0.1
    target = type("Target", (), {"name": "mysql-target"})
    split_unavailable = "MariaDB 10.11.14 has no per-transaction applier timestamps (performance_schema, MySQL 8.0.1+)"

    def __init__(self, epochs):
        self.samples = collections.deque(
            (LagSample(time=str(e), epoch=e, status="ok", lag_seconds=0.0) for e in epochs), maxlen=3000
        )

        class _Run:
            class path:
                name = "20260101T000000Z-live"

        self.run = _Run

        self.further: dict[str, collections.deque] = {}  # as LagRecorder.follow() makes them

    def window(self, seconds):
        last = self.samples[-1].epoch
        return [s for s in self.samples if s.epoch >= last - seconds]

    def replica(self, name):
        return self.samples if name == self.target.name else self.further.get(name)

    def latest(self):
        out = {self.target.name: self.samples[-1].as_dict()} if self.samples else {}
        return out | {name: samples[-1].as_dict() for name, samples in self.further.items() if samples}


def test_unknown_route_is_json_404(client):
    response = client.get("/api/nothing")
    assert response.status_code == 404
    assert response.json["status"] == 404
    assert "error" in response.json


def test_wrong_method_is_json_405(client):
    response = client.post("/api/lag")
    assert response.status_code == 405
    assert response.json["status"] == 405


def test_lag_before_the_first_sample(client):
    """Right after a start the recorder has taken no sample: the window is empty, not an error."""
    body = client.get("/api/lag").json
    assert body["latest"] is None and body["samples"] == [] and body["replicas"] == {}
    assert re.fullmatch(r"results/\d{8}T\d{6}Z-live/lag.csv", body["csv"]), body["csv"]


def test_lag_window(make_app):
    client = authorized(make_app(recorder=FakeRecorder([1.0, 2.0, 3.0, 4.0])))
    body = client.get("/api/lag?seconds=1.5").json
    assert [s["epoch"] for s in body["samples"]] == [3.0, 4.0]
    assert body["latest"]["epoch"] == 4.0
    assert body["csv"] == "results/20260101T000000Z-live/lag.csv"
    assert body["split_unavailable"].startswith("MariaDB 10.11.14 has no per-transaction applier timestamps")


def test_a_further_replicas_lag_and_metrics(make_app):
    """A scaled mysql-target on Kubernetes: each further replica is in `replicas`, in its own window
    (?replica=mysql-target-1) and in /metrics; an unknown one is a 404 naming those recorded."""
    recorder = FakeRecorder([1.0, 2.0])
    client = authorized(make_app(recorder=recorder))
    recorder.further["mysql-target-1"] = collections.deque(
        [LagSample(time="x", epoch=e, status="ok", lag_seconds=0.5, replica="mysql-target-1") for e in (1.5, 2.5)],
        maxlen=3000,
    )
    body = client.get("/api/lag?seconds=0.5&replica=mysql-target-1").json
    assert sorted(body["replicas"]) == ["mysql-target", "mysql-target-1"] and body["latest"]["epoch"] == 2.5
    assert [s["epoch"] for s in body["samples"]] == [2.5]
    missing = client.get("/api/lag?replica=mysql-target-2")
    assert missing.status_code == 404 and "(recorded: mysql-target, mysql-target-1)" in missing.json["error"]
    assert 'laglab_replication_lag_seconds{replica="mysql-target-1"} 0.5' in client.get("/metrics").text


def test_lag_bad_window_names_the_parameter(make_app):
    client = authorized(make_app(recorder=FakeRecorder([1.0])))
    response = client.get("/api/lag?seconds=abc")
    assert response.status_code == 400
    assert response.json == {"error": "seconds: 'abc' is not a number", "status": 400}
    response = client.get("/api/lag?seconds=-1")
    assert response.json == {"error": "seconds: -1 is out of range 0..86400", "status": 400}
    assert client.get("/api/lag?seconds=nan").status_code == 400


def test_consistency_bad_timeout(client):
    response = client.get("/api/consistency?timeout=0")
    assert response.status_code == 400
    assert response.json["error"] == "timeout: 0 is out of range 1..600"


def test_health_before_the_recorder_runs(client):
    """A lab whose recorder has not started (or whose threads died) says so, and every part is listed."""
    body = client.get("/api/health").json
    assert body["status"] == "ok" and body["problems"] == []
    assert body["recorder"]["running"] is False and body["recorder"]["samples"] == 0
    assert body["shaping"] == {"backend": "kernel", "netem_available": True, "last_error": None}
    assert body["platform"] == {"name": "fake", "project": "laglab"} and body["token"] == "LAB_API_TOKEN"


def test_token_is_required_when_configured(tmp_path):
    secret = "s3cret-s3cret-s3cret"
    app = fake_app(tmp_path, environ={"LAB_API_TOKEN": secret})
    client = app.test_client()
    denied = client.get("/api/lag")
    assert denied.status_code == 401
    assert denied.json["status"] == 401
    assert client.get("/api/lag", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/lag", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
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


def test_a_window_longer_than_the_recorder_keeps_gives_all_it_keeps(make_app):
    """Fuzzing found ?seconds=6645.5 schema-valid but refused (the document said 0..86400)."""
    client = authorized(make_app(recorder=FakeRecorder([1.0, 2.0, 3.0])))
    body = client.get("/api/lag?seconds=6645.5").json
    assert body["window_seconds"] == 300.0 and len(body["samples"]) == 3


def test_a_405_says_which_methods_are_allowed(client):
    response = client.post("/api/lag")
    assert response.status_code == 405 and set(response.headers["Allow"].split(", ")) >= {"GET", "HEAD"}


def test_schema_invalid_input_is_400_naming_the_field_and_out_of_range_is_422(client):
    cases = [
        ("DELETE", "/api/shaping/mysql-source?peer=", None, 400, "peer: '' is not a service name"),
        ("GET", "/api/shaping/%C3%BB", None, 400, "service: 'û' is not a service name"),
        (
            "PUT",
            "/api/shaping/mysql-source",
            {"delay": "10ms", "correlation": ""},
            400,
            "correlation: '' is not a percentage",
        ),
        ("PUT", "/api/shaping/mysql-source", {"loss": "120%"}, 422, "loss: '120%' is out of range 0%..100%"),
        ("PUT", "/api/shaping/mysql-source", {"jitter": "5ms"}, 422, "jitter: needs a delay"),
        ("PUT", "/api/shaping/mysql-source", {"delay": "1ms", "latency": 1}, 400, None),
        ("POST", "/api/verify", {"from": "", "to": ""}, 400, "from: '' is not a service name"),
        ("POST", "/api/runs", {"scenario": "   "}, 400, "scenario: must not be empty"),
        ("POST", "/api/runs", {"scenario": "name: x\nload: {duration: 60}\n"}, 422, None),
        ("POST", "/api/load", {"rate": "5"}, 400, "rate: input should be a valid integer, got '5'"),
        ("POST", "/api/load", {"prepare": "yes"}, 400, None),
        ("POST", "/api/load", {"tables": 65}, 400, "tables: 65 is out of range 1..64"),
    ]
    for method, path, body, status, message in cases:
        response = client.open(path, method=method, json=body)
        assert (response.status_code, response.json["status"]) == (status, status), (path, body, response.json)
        if message:
            assert response.json["error"] == message


def test_an_integral_float_is_an_integer():
    from laglab.api.models import LoadBody

    assert LoadBody.model_validate({"seconds": 30.0}).seconds == 30


def test_an_unexpected_error_does_not_echo_its_text(app):
    @app.get("/api/boom")
    def boom():
        raise RuntimeError("/var/lib/mysql/secret: SELECT password FROM users")

    response = authorized(app).get("/api/boom")
    assert response.status_code == 500
    assert "secret" not in response.text and "SELECT" not in response.text


def test_delete_interrupts_a_run_in_progress_and_forgets_a_finished_one(app, client):
    class FakeRun:
        def __init__(self, status):
            self.status, self.cancelled = status, False
            self.busy = status == "running"

        def cancel(self):
            self.cancelled = True

        def as_json(self):
            return {"id": "r", "status": self.status}

    runs = app.extensions["laglab"].runs
    runs["running"], runs["done"] = FakeRun("running"), FakeRun("completed")
    assert client.delete("/api/runs/running").status_code == 202
    assert runs["running"].cancelled and "running" in runs, "interrupted, still listed until its cleanup is done"
    assert client.delete("/api/runs/done").status_code == 202
    assert "done" not in runs and client.get("/api/runs/done").status_code == 404


def test_a_whole_number_written_as_a_float_is_a_gap(client):
    """Fuzzer: `"gap": 99.0` is an integer to JSON Schema, and was a 400 (`input should be a valid
    integer`)."""
    from laglab.api.models import ShapingBody

    assert ShapingBody.model_validate({"gap": 99.0, "reorder": "10%", "delay": "1ms"}).gap == 99


def test_the_gaps_range_is_in_the_document():
    """A float-tolerant gap lost its range in the document ({"ge": 1} inside anyOf): 0 was schema-valid."""
    from laglab.api.models import ShapingBody

    gap = ShapingBody.model_json_schema()["properties"]["gap"]["anyOf"][0]
    assert (gap["minimum"], gap["maximum"]) == (1, 1000)
