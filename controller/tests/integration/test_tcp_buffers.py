"""A scenario's tcp_buffers on the real lab, checked with tools that are not the lab's: the value as
the container itself reads it, and iperf3 from throw-away containers sharing the namespaces. One
stream at 100 ms RTT is bound by its send buffer: with 256 KiB at most ~21 Mbit/s, with the host's
4 MiB hundreds."""

from __future__ import annotations

import json
import subprocess

from laglab.cli.client import Client
from tests.polling import wait_until

from .conftest import ROOT

SMALL = 256 * 1024
SCENARIO = f"""
name: tcp-buffers-check
link: {{between: [loadgen, mysql-target], rtt: 100ms}}
load: {{tool: none, duration: 25s}}
warmup: 0s
tcp_buffers: {{wmem: 4096 16384 {SMALL}, services: [loadgen]}}
"""


def container(settings, service: str) -> str:
    return f"{settings.COMPOSE_PROJECT_NAME}-{service}-1"


def wmem(settings, service: str) -> list[int]:
    """tcp_wmem as the container's own namespace has it (docker exec: the lab's controller not involved)."""
    out = subprocess.run(["docker", "exec", container(settings, service), "cat", "/proc/sys/net/ipv4/tcp_wmem"],
                         capture_output=True, text=True, check=True, timeout=30).stdout  # fmt: skip
    return [int(v) for v in out.split()]


def one_stream_mbit(settings, seconds: int = 5) -> float:
    """iperf3, one stream loadgen -> mysql-target, each end in a throw-away container in that namespace."""
    server = subprocess.run(["docker", "run", "-d", "--rm", "--network", f"container:{container(settings, 'mysql-target')}",
                             "laglab/loadgen:dev", "iperf3", "-s", "-1", "-p", "5299"],
                            capture_output=True, text=True, check=True, timeout=60).stdout.strip()  # fmt: skip
    try:
        done = subprocess.run(["docker", "run", "--rm", "--network", f"container:{container(settings, 'loadgen')}",
                               "laglab/loadgen:dev", "iperf3", "-c", "mysql-target", "-p", "5299", "-t", str(seconds),
                               "-J", "--connect-timeout", "5000"],
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        result = json.loads(done.stdout)
        assert "error" not in result, result.get("error")
        return result["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        subprocess.run(["docker", "rm", "-f", server], capture_output=True, timeout=60, check=False)


def test_a_scenarios_send_buffer_bounds_one_stream_and_is_put_back(api: Client, settings):
    before = wmem(settings, "loadgen")
    started = api.post("/api/runs", json={"scenario": SCENARIO}, timeout=30)
    assert started.status_code == 201, started.text
    run = started.json()["id"]
    wait_until(lambda: api.get(f"/api/runs/{run}").json()["step"] == "load (measuring)", timeout=120,
               message="the run's measured window")  # fmt: skip
    assert wmem(settings, "loadgen") == [4096, 16384, SMALL]
    assert wmem(settings, "mysql-target") == before  # only the services the scenario names
    small = one_stream_mbit(settings)
    wait_until(lambda: api.get(f"/api/runs/{run}").json()["step"] == "done", timeout=120, message="the run's end")
    body = api.get(f"/api/runs/{run}").json()
    assert body["status"] == "completed", body
    folder = ROOT / body["results"]
    point = json.loads((folder / "summary.json").read_text())["points"][0]
    assert point["tcp_buffers"]["loadgen"]["wmem"] == f"4096 16384 {SMALL}", point["tcp_buffers"]
    environment = json.loads((folder / "environment.json").read_text())
    assert environment["tcp_buffers"]["loadgen"]["wmem"] == " ".join(map(str, before))
    assert wmem(settings, "loadgen") == before  # the cleanup put it back

    for service in ("loadgen", "mysql-target"):  # the same 100 ms with the lab's own buffers
        peer = "mysql-target" if service == "loadgen" else "loadgen"
        response = api.put(f"/api/shaping/{service}", json={"delay": "50ms", "peer": peer}, timeout=60)
        assert response.status_code == 200, response.text
    try:
        default = one_stream_mbit(settings)
    finally:
        api.delete("/api/shaping", timeout=60)
    bound = SMALL * 8 / 0.1 / 1e6  # 21 Mbit/s
    assert small <= bound * 1.1, (small, bound)
    assert default >= 3 * small, (default, small)
