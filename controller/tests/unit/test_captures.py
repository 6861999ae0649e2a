"""Captures of a link (laglab/measurement/captures.py): what is refused and why, how tcpdump is started and
stopped, the size bound, the shaping side file, the report's section, the API's refusals. tcpdump
itself is fake_tcpdump.py here (this host has none): it answers with tcpdump 4.99's own words; the real
one runs in tests/integration/test_captures.py (the lab) and tests/kernel (User-mode Linux)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from laglab import limits
from laglab.errors import Kind, LabError
from laglab.measurement.captures import Captures, Side, tcpdump_argv
from laglab.platforms import LabContainer
from laglab.scenarios.report import captures as report_captures
from laglab.shaping.executor import Executor, NamespaceGone
from laglab.shaping.params import parse_request

from .fakes import FakePlatform, fake_app, shaping_manager

FAKE = Path(__file__).with_name("fake_tcpdump.py")


class FakeTcpdumpExecutor(Executor):
    """The real executor's checks (argv of strings, the lab still owning the PID), then the argv it
    would run inside the namespace run by fake_tcpdump.py instead of nsenter + tcpdump."""

    def spawn(self, argv, netns_pid, talks=False, tells=False):
        self._enter(netns_pid, argv)
        self.ran.append(list(argv))
        return subprocess.Popen([sys.executable, str(FAKE), *argv], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE if tells else None, text=True, bufsize=1)  # fmt: skip


@pytest.fixture
def captures(tmp_path):
    shaping = shaping_manager(tmp_path, "mysql-source", "mysql-target", "loadgen", "controller")
    platform = shaping.platform
    platform.lab["controller"] = LabContainer("controller", "laglab-controller-1", "f" * 64, 1999, "10.0.0.9", True,
                                              shapeable=False)  # fmt: skip
    made = Captures(platform, FakeTcpdumpExecutor(), shaping, tmp_path / "results")
    yield made
    made.stop_all()


def refused(kind: Kind, field: str, call) -> str:
    with pytest.raises(LabError) as caught:
        call()
    assert caught.value.kind is kind, caught.value.message
    assert caught.value.message.startswith(f"{field}: "), caught.value.message
    return caught.value.message


def test_tcpdump_is_bounded_by_time_snap_length_and_the_peer():
    assert tcpdump_argv("10.0.0.3", 30, 96, Path("/results/captures/x/a.pcap")) == [
        "timeout", "--signal=INT", "30", "tcpdump", "-i", "eth0", "-n", "-p", "--immediate-mode", "-U", "-Z", "root",
        "-s", "96",
        "-w", "/results/captures/x/a.pcap", "host", "10.0.0.3",
    ]  # fmt: skip


def test_a_capture_writes_a_pcap_per_side_and_ends_by_its_duration(captures):
    made = captures.start("mysql-source", "mysql-target", 1)
    assert made.running
    assert made.wait(10)
    shown = made.as_json()
    assert shown["status"] == "done" and shown["stopped_by"] == "duration"
    for service in ("mysql-source", "mysql-target"):
        pcap = made.folder / f"{service}.pcap"
        assert pcap.read_bytes()[:4] == bytes.fromhex("d4c3b2a1")  # pcap-savefile(5)'s magic, little-endian
        assert shown["files"][service]["captured"] == 0
    # each side keeps the other's packets only: the peer's address in its filter
    peers = {argv[-1] for argv in captures.executor.ran}
    assert peers == {"10.0.0.2", "10.0.0.3"}
    assert json.loads((made.folder / "capture.json").read_text())["stopped_by"] == "duration"


def test_stopping_one_keeps_what_it_captured(captures, monkeypatch):
    monkeypatch.setenv("FAKE_TCPDUMP_RATE", "20000")
    made = captures.start("loadgen", "mysql-target", 60)
    time.sleep(0.5)
    made.stop("asked")
    assert made.wait(15)
    shown = made.as_json()
    assert shown["stopped_by"] == "asked" and shown["elapsed_seconds"] < 30
    assert shown["files"]["loadgen"]["captured"] > 0 and shown["files"]["loadgen"]["bytes"] > 24


def test_a_capture_stops_when_a_pcap_reaches_its_size(captures, monkeypatch):
    monkeypatch.setenv("FAKE_TCPDUMP_RATE", "200000")
    made = captures.start("mysql-source", "mysql-target", 60, max_bytes=20000)
    assert made.wait(20)
    assert made.as_json()["stopped_by"] == "size"
    assert made.as_json()["elapsed_seconds"] < 10


def test_what_a_capture_refuses(captures, monkeypatch):
    refused(Kind.INVALID, "link", lambda: captures.start("mysql-source", "mysql-source", 5))
    refused(Kind.NOT_FOUND, "link", lambda: captures.start("mysql-source", "nosuch", 5))
    refused(Kind.CONFLICT, "link", lambda: captures.start("controller", "mysql-source", 5))  # the apparatus
    refused(Kind.INVALID, "for", lambda: captures.start("mysql-source", "mysql-target", 0))
    refused(Kind.INVALID, "for", lambda: captures.start("mysql-source", "mysql-target", 0.0001))  # the fuzzer's .1 msec
    refused(Kind.INVALID, "for", lambda: captures.start("mysql-source", "mysql-target", limits.CAPTURE_SECONDS + 1))
    refused(Kind.INVALID, "max_bytes", lambda: captures.start("mysql-source", "mysql-target", 5, max_bytes=0))
    refused(Kind.INVALID, "snaplen", lambda: captures.start("mysql-source", "mysql-target", 5, snaplen=10))
    first = captures.start("mysql-source", "mysql-target", 30)
    message = refused(Kind.CONFLICT, "link", lambda: captures.start("mysql-target", "mysql-source", 5))
    assert first.id in message
    assert not captures.executor.ran[2:], "nothing was started for a refused capture"
    first.stop()
    first.wait(10)


def test_at_most_the_limit_run_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "CAPTURES", 2)
    platform = FakePlatform.running_services("a", "b", "c")
    made = Captures(platform, FakeTcpdumpExecutor(), None, tmp_path)
    running = [made.start("a", "b", 30), made.start("a", "c", 30)]
    message = refused(Kind.CONFLICT, "capture", lambda: made.start("b", "c", 30))
    assert "limit captures" in message
    made.stop_all()
    assert all(not c.running for c in running)


def test_not_where_the_controller_enters_no_namespace(tmp_path):
    platform = FakePlatform({s: LabContainer(s, f"pod-{s}", "0" * 64, 0, "10.1.0.2", True, entered=False)
                             for s in ("mysql-source", "mysql-target")})  # fmt: skip
    platform.name = "kubernetes"
    message = refused(Kind.INVALID, "link", lambda: Captures(platform, FakeTcpdumpExecutor(), None, tmp_path).start(
        "mysql-source", "mysql-target", 5))  # fmt: skip
    assert "kubernetes" in message


def test_a_container_that_went_away_is_not_entered(captures):
    captures.executor.owns = lambda pid: False  # the PID now belongs to something else
    with pytest.raises(LabError) as caught:
        captures.start("mysql-source", "mysql-target", 5)
    assert caught.value.kind is Kind.FAILED and "no longer a container of this lab" in caught.value.message
    assert isinstance(NamespaceGone("x"), OSError)


def test_a_tcpdump_that_cannot_start_is_said_with_its_words(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "laglab.measurement.captures.tcpdump_argv",
        lambda ip, s, n, f: ["eth9" if a == "eth0" else a for a in tcpdump_argv(ip, s, n, f)],
    )
    platform = FakePlatform.running_services("a", "b")
    message = refused(
        Kind.FAILED, "capture", lambda: Captures(platform, FakeTcpdumpExecutor(), None, tmp_path).start("a", "b", 5)
    )
    assert "eth9: No such device exists" in message


def test_the_side_file_says_what_the_link_held_and_each_change(captures):
    shaping = captures.shaping
    shaping.put("mysql-target", parse_request({"delay": "50ms", "peer": "mysql-source"}))
    made = captures.start("mysql-source", "mysql-target", 30)
    shaping.put("mysql-source", parse_request({"delay": "20ms", "loss": "1%", "peer": "mysql-target", "ports": [3306]}))
    shaping.put("loadgen", parse_request({"delay": "70ms"}))  # another link: not a row
    shaping.delete("mysql-target")
    made.stop()
    made.wait(10)
    with (made.folder / "shaping.csv").open() as f:
        rows = [(r["direction"], r["shaping"]) for r in csv.DictReader(f)]
    # an entry on a service holds what it sends (egress): mysql-target's is the direction to mysql-source
    assert rows == [
        ("mysql-source->mysql-target", "unshaped"),
        ("mysql-target->mysql-source", "delay 50ms"),
        ("mysql-source->mysql-target", "delay 20ms loss 1% on ports 3306"),
        ("mysql-target->mysql-source", "delay 50ms"),
        ("mysql-source->mysql-target", "delay 20ms loss 1% on ports 3306"),
        ("mysql-target->mysql-source", "unshaped"),
    ]
    assert not shaping.links.watching, "an ended capture no longer watches the link"


def test_the_reports_section_links_each_pcap(tmp_path):
    folder = tmp_path / "captures" / "point1-step2-mysql-source-mysql-target"
    folder.mkdir(parents=True)
    (folder / "capture.json").write_text(json.dumps({
        "link": ["mysql-source", "mysql-target"], "elapsed_seconds": 30.2, "stopped_by": "duration",
        "files": {"mysql-source": {"file": "mysql-source.pcap", "captured": 120, "dropped_by_kernel": 0},
                  "mysql-target": {"file": "mysql-target.pcap", "captured": 118, "dropped_by_kernel": 0}},
    }))  # fmt: skip
    (folder / "shaping.csv").write_text(
        "epoch,time,since_start_s,direction,shaping\n1,t,0.000001,mysql-source->mysql-target,delay 90ms\n"
    )
    text = "\n".join(report_captures.lines(tmp_path))
    assert "## Captures" in text
    assert "[mysql-source.pcap](captures/point1-step2-mysql-source-mysql-target/mysql-source.pcap) (120, 0)" in text
    assert "+0.0 s mysql-source->mysql-target delay 90ms" in text
    assert report_captures.lines(tmp_path / "nothing") == []


def test_tcpdumps_counts_are_read_as_it_writes_them():
    side = Side("a", Path("a.pcap"))
    side.said = ["tcpdump: listening on eth0, link-type EN10MB (Ethernet), snapshot length 96 bytes",
                 "1 packet captured", "14 packets received by filter", "3 packets dropped by kernel"]  # fmt: skip
    assert side.counts() == {"captured": 1, "received_by_filter": 14, "dropped_by_kernel": 3}


def test_a_capture_step_captures_for_its_duration_into_the_runs_folder(captures, tmp_path):

    from laglab.deadline import WALL
    from laglab.scenarios.plan import load_text
    from laglab.scenarios.run.parts import TimelineParts
    from laglab.scenarios.run.timeline import TimelineRun

    from ..polling import wait_until

    plan = load_text("name: t\nload: {duration: 5s}\ntimeline:\n"
                     "  - {at: 0.1s, duration: 1s, capture: {link: [mysql-source, mysql-target], snaplen: 128}}\n")  # fmt: skip
    events = []
    lab = TimelineParts(captures.shaping, None, captures, WALL)  # a capture step changes no fault
    timeline = TimelineRun(lab, plan.points[0].plan().timeline, 5, 2, events.append, folder=tmp_path / "run")
    timeline.start(time.time())
    wait_until(lambda: len(events) >= 2, timeout=10)
    timeline.stop()
    assert [e["text"] for e in events] == [
        "capture mysql-source<->mysql-target",
        "capture mysql-source<->mysql-target ends",
    ]
    assert all(not e.get("error") for e in events), events
    folder = tmp_path / "run" / "captures" / "point2-step1-mysql-source-mysql-target"
    meta = json.loads((folder / "capture.json").read_text())
    assert meta["snaplen"] == 128 and meta["stopped_by"] == "duration" and meta["elapsed_seconds"] < 3, meta
    assert "-s" in captures.executor.ran[0] and "128" in captures.executor.ran[0]


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("{at: 0s, duration: 601s, capture: {link: [a, b]}}", "limit capture_seconds"),
        ("{at: 0s, duration: 500ms, capture: {link: [a, b]}}", "a capture lasts 1s to 600s"),
        ("{at: 0s, capture: {link: [a, b], snaplen: 10}}", "snaplen"),
        ("{at: 0s, capture: {link: [a, b], max_bytes: 0}}", "max_bytes"),
        ("{at: 0s, capture: {link: [a]}}", "link"),
    ],
)
def test_a_capture_step_out_of_its_bounds_is_refused_naming_the_key(step, message):
    from laglab.scenarios.plan import load_text
    from laglab.scenarios.schema.scenario import ScenarioError

    with pytest.raises(ScenarioError) as caught:
        load_text(f"name: t\nload: {{duration: 700s}}\ntimeline:\n  - {step}\n")
    assert message in str(caught.value), str(caught.value)


def test_deleting_a_capture_stops_it_answers_its_end_and_forgets_it(tmp_path, monkeypatch):
    """DELETE /api/captures/<id>: the answer is the capture as it ended; then it is gone (404), as a
    deleted resource is (schemathesis's stateful check ST301 found it still listed)."""
    monkeypatch.setenv("FAKE_TCPDUMP_RATE", "20000")
    platform = FakePlatform.running_services("a", "b")
    captures = Captures(platform, FakeTcpdumpExecutor(), None, tmp_path / "results")
    app = fake_app(tmp_path, environ={"LAB_API_TOKEN": "t" * 32}, captures=captures)
    client = app.test_client()
    headers = {"Authorization": "Bearer " + "t" * 32}
    started = client.post("/api/captures", json={"link": ["a", "b"], "for": "60s"}, headers=headers)
    assert started.status_code == 201, started.json
    assert started.json["results"] == f"results/captures/{started.json['id']}"
    assert started.json["links"]["a.pcap"].startswith(f"/results/captures/{started.json['id']}/a.pcap?expires=")
    time.sleep(0.3)
    ended = client.delete(f"/api/captures/{started.json['id']}", headers=headers)
    assert ended.status_code == 200 and ended.json["status"] == "done" and ended.json["stopped_by"] == "asked"
    assert ended.json["files"]["a"]["captured"] > 0
    assert client.get(f"/api/captures/{started.json['id']}", headers=headers).status_code == 404
    assert client.get("/api/captures", headers=headers).json == {"captures": []}
    assert (tmp_path / "results" / "captures" / started.json["id"] / "a.pcap").exists()  # the files stay


def test_the_api_refuses_a_bad_capture_body_naming_the_field(tmp_path):
    app = fake_app(tmp_path, environ={"LAB_API_TOKEN": "t" * 32})
    client, headers = app.test_client(), {"Authorization": "Bearer " + "t" * 32}
    for body, field in (({"link": ["a"]}, "link"), ({"link": ["a", "b"], "for": "20"}, "for"),
                        ({"link": ["a", "b"], "snaplen": 10}, "snaplen"), ({"link": ["a", "b"], "max_bytes": 2**40}, "max_bytes")):  # fmt: skip
        answer = client.post("/api/captures", json=body, headers=headers)
        assert answer.status_code == 400 and field in answer.json["error"], (body, answer.json)
    answer = client.post("/api/captures", json={"link": ["mysql-source", "nobody"]}, headers=headers)
    assert answer.status_code == 404 and answer.json["error"].startswith("link: no service 'nobody' in this lab")


@pytest.mark.parametrize(
    ("typed", "size"), [("20MB", 20_000_000), ("512KiB", 524288), ("1000", 1000), ("1.5 GiB", 1610612736)]
)
def test_a_size_as_a_person_types_it(typed, size):
    from laglab.cli.capture import SizeType

    assert SizeType().convert(typed, None, None) == size


def test_a_size_without_a_number_is_a_usage_error_naming_the_units():
    import click

    from laglab.cli.capture import SizeType

    with pytest.raises(click.BadParameter, match="units: B, kB, MB"):
        SizeType().convert("lots", None, None)
