"""DTLE and DM driven by the runner, against a fake Nomad API, fake agents' /metrics and a fake
dm-master container (neither product can run on this project's machines). Checks the exact
requests and dmctl calls, the parsing of their metrics and status, and the summary math."""

import json

import pytest

from laglab.replicators import dm, dtle
from laglab.replicators.base import metrics_summary
from laglab.scenarios.plan import load_text

from .fakes import FakePlatform, kind_parts

PW = {"MYSQL_ROOT_PASSWORD": "pw"}  # the settings the controller reads (config.load), a root password given

DTLE_METRICS = """# HELP dtle_delay_time delay
# TYPE dtle_delay_time gauge
dtle_delay_time{host="dtle-dst",task_name="laglab-dest"} 3
dtle_delay_time{host="dtle-dst",task_name="other-dest"} 99
# TYPE dtle_network_in_bytes gauge
dtle_network_in_bytes{host="dtle-dst",task_name="laglab-dest"} 1000
# TYPE dtle_network_out_bytes gauge
dtle_network_out_bytes{host="dtle-dst",task_name="laglab-dest"} 20
"""


class Response:
    def __init__(self, status, payload=None, text=None):
        self.status_code = status
        self.text = text if text is not None else json.dumps(payload)
        self.content = self.text.encode() if (payload is not None or text) else b""

    def json(self):
        return json.loads(self.text)


class FakeHttp:
    """Answers Nomad's API and the agents' /metrics from tables; records every request."""

    def __init__(self, allocations):
        self.calls = []
        self.allocations = list(allocations)

    def request(self, method, url, timeout=None, **kwargs):
        self.calls.append((method, url, kwargs))
        if method == "POST" and url.endswith("/v1/jobs"):
            return Response(200, {"EvalID": "e1"})
        if method == "GET" and "/allocations" in url:
            return Response(200, self.allocations.pop(0) if len(self.allocations) > 1 else self.allocations[0])
        if method == "DELETE":
            return Response(200, {"EvalID": "e2"})
        return Response(404, text="not found")

    def get(self, url, timeout=None):
        self.calls.append(("GET", url, {}))
        return Response(200, text=DTLE_METRICS) if url.endswith(":8190/metrics") else Response(404, text="")


def alloc(group, status, message=None):
    events = [{"DisplayMessage": message}] if message else []
    return {"TaskGroup": group, "ClientStatus": status, "TaskStates": {group: {"Events": events}}}


def test_nomad_waits_for_both_groups_then_stops_with_purge():
    http = FakeHttp([[alloc("src", "pending")], [alloc("src", "running"), alloc("dest", "running")]])
    nomad = dtle.Nomad(http=http)
    nomad.submit({"Job": {"ID": "laglab"}})
    assert nomad.wait_running("laglab", 10, sleep=lambda s: None) == {"src": "running", "dest": "running"}
    nomad.stop("laglab")
    assert [(m, u) for m, u, _ in http.calls] == [
        ("POST", "http://dtle-src:4646/v1/jobs"),
        ("GET", "http://dtle-src:4646/v1/job/laglab/allocations"),
        ("GET", "http://dtle-src:4646/v1/job/laglab/allocations"),
        ("DELETE", "http://dtle-src:4646/v1/job/laglab"),
    ]
    assert http.calls[0][2]["json"] == {"Job": {"ID": "laglab"}}
    assert http.calls[-1][2]["params"] == {"purge": "true"}


def test_nomad_reports_a_failed_task_group_with_its_last_event():
    http = FakeHttp([[alloc("src", "running"), alloc("dest", "failed", "connect to mysql-target: refused")]])
    with pytest.raises(dtle.DriverError, match="DTLE task group dest failed: connect to mysql-target: refused"):
        dtle.Nomad(http=http).wait_running("laglab", 10, sleep=lambda s: None)


def test_nomad_http_errors_name_the_call():
    class Refusing(FakeHttp):
        def request(self, method, url, timeout=None, **kwargs):
            return Response(400, text="1 error occurred: * Task group src validation failed")

    with pytest.raises(dtle.DriverError, match=r"Nomad POST /v1/jobs: HTTP 400: 1 error occurred"):
        dtle.Nomad(http=Refusing([])).submit({})


def test_dtle_metrics_keep_the_jobs_tasks_only_and_combine_agents():
    dst = dtle.parse_metrics(DTLE_METRICS)
    assert dst == {"delay_seconds": 3.0, "network_in_bytes": 1000.0, "network_out_bytes": 20.0}
    src = {"delay_seconds": 1.0, "network_in_bytes": 13.0, "network_out_bytes": 1000.0}
    # Forward is what dtle-src sent, back what dtle-dst sent: the old sums gave the payload twice
    # (src's out + dst's in, 1013 + ... in both columns).
    assert dtle.combine_metrics({"dtle-src": src, "dtle-dst": dst}) == {
        "delay_seconds": 3.0,
        "forward_bytes": 1000.0,
        "back_bytes": 20.0,
    }
    assert dtle.combine_metrics({"dtle-dst": dst}) == {"delay_seconds": 3.0, "forward_bytes": None, "back_bytes": 20.0}
    assert dtle.parse_metrics("") == {"delay_seconds": None, "network_in_bytes": None, "network_out_bytes": None}


class AgentDown(FakeHttp):
    """dtle-dst killed: its name no longer resolves. The exception is the one requests raises (seen:
    `HTTPConnectionPool(host='dtle-dst', port=8190): Max retries exceeded with url: /metrics (Caused by
    NameResolutionError(...))`)."""

    def __init__(self, down):
        super().__init__([])
        self.down = down

    def get(self, url, timeout=None):
        import requests

        if f"//{self.down}:" in url:
            self.calls.append(("GET", url, {}))
            raise requests.exceptions.ConnectionError(
                f"HTTPConnectionPool(host='{self.down}', port=8190): Max retries exceeded with url: /metrics "
                f'(Caused by NameResolutionError("<urllib3.connection.HTTPConnection object>: Failed to resolve '
                f"'{self.down}' ([Errno -3] Temporary failure in name resolution)\"))"
            )
        return super().get(url, timeout)


def test_an_agent_that_does_not_answer_is_a_gap_with_its_reason_not_a_failed_run():
    """Seen: kill -9 of dtle-dst mid-point ended the run `failed: ConnectionError: ...` (sample() caught
    nothing), the point was lost and the consistency check skipped."""
    driver = dtle.Dtle(kind_parts(), nomad=object(), http=AgentDown("dtle-dst"), consul=object(), native=object())
    figures = driver.sample()
    assert figures["unreachable"] == {"dtle-dst": "ConnectionError: failed to resolve"}
    assert figures["back_bytes"] is None and figures["forward_bytes"] == 20.0  # dtle-src still answered
    answered = {"delay_seconds": 1.0, "forward_bytes": 100.0, "back_bytes": 2.0}
    samples = [(10.0, answered), (11.0, figures), (12.0, figures), (13.0, {**answered, "forward_bytes": 300.0})]
    summary = metrics_summary(samples)
    assert summary["gaps"] == [
        {"agent": "dtle-dst", "from": 11.0, "to": 12.0, "samples": 2, "reason": "ConnectionError: failed to resolve"}
    ]
    assert summary["forward_mbit"] == round(200 * 8 / 1e6 / 3, 4)  # across the gap, from the samples around it


def test_the_report_names_the_gaps_and_the_directions():
    from laglab.scenarios.report.markdown import replicator_lines

    metrics = {"max_delay_seconds": 2.0, "forward_mbit": 1.5, "back_mbit": 0.01,
               "gaps": [{"agent": "dtle-dst", "from": 11.0, "to": 31.0, "samples": 21, "reason": "ConnectionError: failed to resolve"}]}  # fmt: skip
    lines = replicator_lines(
        {"points": [{"point": 2, "params": {}, "max_lag_seconds": 25.0, "replicator_metrics": metrics}]}
    )
    assert "| 2 | - | 25 | 2 | 1.5 / 0.01 |" in lines
    assert (
        "- point 2: dtle-dst did not answer for 20 s (21 samples): ConnectionError: failed to resolve; "
        "its figures have a gap there"
    ) in lines


def test_dtle_options_from_a_scenario_point():
    plan = load_text(
        "name: x\nlink: {rtt: 250ms}\nreplicator: {kind: dtle, group_max_size: 1048576, repl_chan_buffer_size: 600, group_timeout_ms: auto}"
    )
    point = plan.points[0].scenario
    assert point.link.between == ("dtle-src", "dtle-dst")  # the agents' link unless the file says
    asked = plan.points[0].plan().replicator  # what the runner hands the kind
    options = dtle.Dtle(kind_parts(), nomad=object(), http=object()).job_options(asked.options, asked.rtt)
    assert options == dtle.JobOptions(group_max_size=1048576, group_timeout_ms=240, repl_chan_buffer_size=600)


QUERY_STATUS = {
    "result": True,
    "msg": "",
    "sources": [
        {
            "result": True,
            "sourceStatus": {"source": "mysql-source", "worker": "worker1"},
            "subTaskStatus": [
                {"name": "laglab", "stage": "Running", "unit": "Sync", "sync": {"secondsBehindMaster": "2"}}
            ],
        }
    ],
}


def test_dm_query_status_and_metrics():
    assert dm.parse_query_status(json.dumps(QUERY_STATUS)) == {
        "stages": ["Running"],
        "seconds_behind_master": 2.0,
        "syncer_gtid": None,
    }
    with pytest.raises(ValueError, match="query-status failed: task laglab has no source"):
        dm.parse_query_status(json.dumps({"result": False, "msg": "task laglab has no source"}))
    with pytest.raises(ValueError, match="did not answer JSON"):
        dm.parse_query_status("rpc error: connection refused")
    text = (
        "# TYPE dm_syncer_replication_lag_gauge gauge\n"
        'dm_syncer_replication_lag_gauge{source_id="mysql-source",task="laglab",worker="worker1"} 1.5\n'
        'dm_syncer_replication_lag_gauge{source_id="mysql-source",task="other",worker="worker1"} 9\n'
    )
    assert dm.parse_metrics(text) == 1.5
    assert dm.parse_metrics("") is None


class FakeMaster:
    """dm-master's dmctl as it answers (JSON on stdout)."""

    def __init__(self):
        self.argv = []

    def __call__(self, argv):
        self.argv.append(argv)
        if argv[:1] == ["/dmctl"] and argv[2] == "query-status":
            return 0, json.dumps(QUERY_STATUS).encode()
        if argv[:1] == ["/dmctl"] and argv[2:4] == ["operate-source", "show"]:
            return 0, b'{"result": true, "sources": []}'
        return 0, b'{"result": true}'


def dm_parts(master):
    """A DM kind's parts: dm-master running, its dmctl answered by `master`."""
    parts = kind_parts(FakePlatform.running_services("dm-master", execs={"dm-master": master}), environ=PW)
    master.files = parts.platform.files
    return parts


def test_dm_driver_creates_the_source_once_and_resumes_later_points_from_the_checkpoint():
    master = FakeMaster()
    driver = dm.Dm(dm_parts(master), http=object())
    plan = load_text(
        "name: x\nreplicator: {kind: dm, task_mode: all}\nsweep: {replicator.syncer_worker_count: [4, 32]}"
    )
    for point in plan.points:
        driver.start(point.plan().replicator.options, 0.0)
    dmctl = [a[2:] for a in master.argv if a[0] == "/dmctl"]
    assert dmctl == [
        ["operate-source", "show"],
        ["operate-source", "create", "/laglab-dm/source.yaml"],
        ["start-task", "/laglab-dm/task.yaml", "--remove-meta"],
        ["query-status", "laglab"],
        ["stop-task", "laglab"],
        ["start-task", "/laglab-dm/task.yaml"],
        ["query-status", "laglab"],
    ]
    assert all(a[1] == "--master-addr=dm-master:8261" for a in master.argv if a[0] == "/dmctl")
    import yaml

    task = yaml.safe_load(master.files["/laglab-dm/task.yaml"].decode())
    assert task["syncers"]["laglab"]["worker-count"] == 32 and task["task-mode"] == "all"
    assert task["target-database"]["host"] == "tidb"
    assert yaml.safe_load(master.files["/laglab-dm/source.yaml"].decode())["from"]["password"] == "pw"
    assert driver.reports_no_delay() is False  # secondsBehindMaster 2
    driver.stop()
    assert master.argv[-1][2:] == ["stop-task", "laglab"] and driver.running is False


def test_metrics_summary_takes_the_largest_delay_and_the_traffic_rate():
    samples = [
        (100.0, {"delay_seconds": 1.0, "forward_bytes": 0.0, "back_bytes": None}),
        (101.0, {"delay_seconds": 4.0, "forward_bytes": 125_000.0, "back_bytes": None}),
        (102.0, {"delay_seconds": None, "forward_bytes": 250_000.0, "back_bytes": None}),
    ]
    assert metrics_summary(samples) == {
        "samples": 3,
        "max_delay_seconds": 4.0,
        "back_mbit": None,
        "forward_mbit": 1.0,
        "gaps": [],
    }
