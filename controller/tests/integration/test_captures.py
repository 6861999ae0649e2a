"""#40.3 on the lab: a capture of a link (POST /api/captures, what `laglab capture` calls; a scenario's
`capture:` step through `laglab run`) read back by tcpdump itself (`tcpdump -r`, in a throw-away
loadgen container): the same packets in the two sides' files, apart by the delay asked; the side file
says when a change took effect, and the packets after it show the new delay.

Judged as physics allows: a busy host only adds delay, so a group's median may not fall short of what
was asked, and its quickest packet, the one the host delayed least, shows the link itself."""

import csv
import json
import re
import statistics
import subprocess

import pytest

from tests.capture import packet_times, read_pcap

from .conftest import ROOT

SLACK_MS = 1.0  # below what was asked: timestamps of two namespaces on one clock, at microseconds
QUICKEST_MS = 3.0  # above it: the quickest packet of a group on a 2-core host


@pytest.fixture(autouse=True)
def clean(api):
    api.delete("/api/shaping", timeout=60)
    yield
    api.delete("/api/shaping", timeout=60)


def link(api, a: str, b: str, one_way: str) -> None:
    for service, peer in ((a, b), (b, a)):
        response = api.put(f"/api/shaping/{service}", json={"delay": one_way, "peer": peer}, timeout=60)
        assert response.status_code == 200, response.text


def one_way(sender: dict[str, float], receiver: dict[str, float], kind: str) -> dict[str, float]:
    """packet -> ms from the sender's file to the receiver's, for the packets whose line matches `kind`
    seen in both."""
    return {n: 1000 * (receiver[n] - t) for n, t in sender.items() if re.search(kind, n) and n in receiver}


def held(delays: list[float], asked_ms: float) -> bool:
    return bool(delays) and statistics.median(delays) >= asked_ms - SLACK_MS and min(delays) <= asked_ms + QUICKEST_MS


def test_the_two_sides_files_show_the_asked_delay_and_when_a_change_took_effect(api, settings):
    container = f"{settings.COMPOSE_PROJECT_NAME}-loadgen-1"
    link(api, "loadgen", "mysql-target", "40ms")
    started = api.post("/api/captures", json={"link": ["loadgen", "mysql-target"], "for": "60s"}, timeout=60)
    assert started.status_code == 201, started.text
    capture = started.json()

    def pings() -> None:
        done = subprocess.run(["docker", "exec", container, "ping", "-n", "-c", "30", "-i", "0.1", "mysql-target"],
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout[-500:]

    pings()
    link(api, "loadgen", "mysql-target", "70ms")
    pings()
    stopped = api.delete(f"/api/captures/{capture['id']}", timeout=60).json()
    assert (stopped["status"], stopped["stopped_by"]) == ("done", "asked"), stopped
    folder = ROOT / stopped["results"]

    with (folder / "shaping.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["direction"], r["shaping"]) for r in rows] == [
        ("loadgen->mysql-target", "delay 40ms"), ("mysql-target->loadgen", "delay 40ms"),
        ("loadgen->mysql-target", "delay 70ms"), ("mysql-target->loadgen", "delay 40ms"),
        ("loadgen->mysql-target", "delay 70ms"), ("mysql-target->loadgen", "delay 70ms"),
    ], rows  # fmt: skip
    changed = float(rows[-1]["epoch"])  # the second side's change: from here both ways hold 70 ms

    texts = {side: read_pcap(folder / f"{side}.pcap") for side in ("loadgen", "mysql-target")}
    for side, text in texts.items():  # tcpdump's own count of what it wrote is what tcpdump reads back
        assert stopped["files"][side]["captured"] == len(text.splitlines()), (side, stopped["files"][side])
    here, there = (packet_times(texts[s]) for s in ("loadgen", "mysql-target"))
    requests, replies = one_way(here, there, "echo request"), one_way(there, here, "echo reply")
    assert len(requests) == len(replies) == 60, (len(requests), len(replies))
    first = float(rows[0]["epoch"])
    for name, delays in (("requests", requests), ("replies", replies)):
        sent = here if name == "requests" else there
        before = [d for n, d in delays.items() if first < sent[n] < float(rows[2]["epoch"]) - 0.2]
        after = [d for n, d in delays.items() if sent[n] > changed + 0.05]
        print(f"{name}: 40 ms asked: median {statistics.median(before):.2f}, quickest {min(before):.2f} ms; "
              f"70 ms asked: median {statistics.median(after):.2f}, quickest {min(after):.2f} ms")  # fmt: skip
        assert len(before) >= 25 and len(after) >= 25, (len(before), len(after))
        assert held(before, 40.0), (name, sorted(before)[:3], statistics.median(before))
        assert held(after, 70.0), (name, sorted(after)[:3], statistics.median(after))


SCENARIO = """name: captured-link
description: the replication link captured for 3 s of the window, at 80 ms RTT
link: {between: [mysql-source, mysql-target], rtt: 80ms}
load: {tool: none, duration: 8s}
warmup: 0s
timeline:
  - at: 2s
    duration: 3s
    capture: {link: [mysql-source, mysql-target]}
"""


def test_a_capture_step_puts_the_links_pcaps_in_the_run_and_its_report(api, tmp_path):
    path = tmp_path / "captured-link.yaml"
    path.write_text(SCENARIO)
    done = subprocess.run([str(ROOT / "laglab"), "run", str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    match = re.search(r"-> (results/\S+)", done.stdout)
    assert match and done.returncode == 0, done.stdout[-3000:] + done.stderr
    run = ROOT / match.group(1)
    (folder,) = (run / "captures").iterdir()
    assert folder.name == "point1-step1-mysql-source-mysql-target"
    meta = json.loads((folder / "capture.json").read_text())
    assert meta["stopped_by"] == "duration" and 2.5 <= meta["elapsed_seconds"] <= 6, meta
    report = (run / "report.md").read_text()
    assert "## Captures" in report and f"(captures/{folder.name}/mysql-target.pcap)" in report, report[-2000:]
    # The replication stream (the heartbeat's writes, every second) crossed the link: each segment seen
    # at both ends, 40 ms apart each way.
    source, target = (packet_times(read_pcap(folder / f"{s}.pcap", "tcp")) for s in ("mysql-source", "mysql-target"))
    # the target's replica connects to the source's 3306: a segment from port 3306 goes to the target
    forward = list(one_way(source, target, r"^IP \S+\.3306 >").values())
    back = list(one_way(target, source, r"^IP \S+ > \S+\.3306:").values())
    print(f"{len(forward)} segments source->target: median {statistics.median(forward):.2f} ms; "
          f"{len(back)} back: median {statistics.median(back):.2f} ms")  # fmt: skip
    assert len(forward) >= 3 and len(back) >= 3, (len(forward), len(back))
    assert held(forward, 40.0) and held(back, 40.0), (sorted(forward)[:3], sorted(back)[:3])
