"""Live shaping on real containers: asked vs measured (ping -U, iperf3), per-peer isolation,
clearing, refusals. The userspace backend here (no sch_netem); the same API on the kernel one."""

import subprocess

import pytest

from .conftest import wait_until


def verify(api, src, dst, **extra):
    response = api.session.post(api.base + "/api/verify", json={"from": src, "to": dst, **extra}, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def put(api, service, body):
    return api.session.put(api.base + f"/api/shaping/{service}", json=body, timeout=60)


@pytest.fixture(autouse=True)
def clean(api):
    api.session.delete(api.base + "/api/shaping", timeout=60)
    yield
    api.session.delete(api.base + "/api/shaping", timeout=60)


def test_delay_on_a_link_is_measured_and_only_on_that_link(api):
    response = put(api, "mysql-source", {"delay": "80ms", "peer": "mysql-target"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["backend"] == "userspace"
    assert body["desired"] == [{"peer": "mysql-target", "direction": "egress", "delay": "80ms"}]
    held = body["kernel"]["mysql-target"]
    assert len(held["iptables"]) == 1 and "NFQUEUE" in held["iptables"][0]
    assert held["worker"]["running"] is True

    shaped = verify(api, "mysql-source", "mysql-target", count=20, seconds=1)
    assert shaped["requested"]["rtt_ms"] == 80.0
    median = shaped["measured"]["rtt"]["median_ms"]
    assert abs(median - 80.0) <= max(1.0, 0.02 * 80) + 1.0, shaped["measured"]["rtt"]  # ping -U prints whole ms >= 100
    other = verify(api, "loadgen", "mysql-target", count=20, seconds=1)
    assert other["measured"]["rtt"]["median_ms"] < 5, "a link that was not shaped must stay fast"

    # Replication lag on the shaped link is seen by the recorder.
    wait_until(
        lambda: api.get("/api/lag?seconds=1").json()["latest"]["heartbeat_age_seconds"] >= 0.08,
        10,
        message="lag >= 80 ms",
    )

    # Clearing restores the link.
    assert api.session.delete(api.base + "/api/shaping/mysql-source", timeout=60).status_code == 204
    cleared = verify(api, "mysql-source", "mysql-target", count=20, seconds=1)
    assert cleared["measured"]["rtt"]["median_ms"] < 5
    assert api.get("/api/shaping/mysql-target").json()["kernel"]["mysql-target"]["iptables"] == []


def test_rate_is_measured_with_iperf3(api):
    assert put(api, "loadgen", {"rate": "20mbit", "peer": "mysql-target"}).status_code == 200
    result = verify(api, "loadgen", "mysql-target", count=20, seconds=3)
    forward = result["measured"]["forward_mbit"]
    assert result["requested"]["rate_forward"] == "20mbit"
    assert 0.85 * 20 <= forward <= 1.02 * 20, result["measured"]
    # Only that direction and that link: the reverse path is not limited.
    assert result["measured"]["reverse_mbit"] > 100


def test_bad_input_is_refused_and_nothing_is_applied(api):
    cases = [
        ({"delay": "fast"}, 400, "delay: 'fast' is not a time (units: us, ms, s)"),
        ({"loss": "120%"}, 400, "loss: '120%' is out of range 0%..100%"),
        ({"rate": "1bit"}, 400, "rate: '1bit' is out of range 8kbit..10gbit"),
        ({"delay": "10ms", "bogus": 1}, 400, None),
        ({"delay": "10ms", "peer": "nobody"}, 404, None),
        (
            {"delay": "10ms", "duplicate": "1%"},
            422,
            "duplicate: not supported by the userspace backend (this kernel has no sch_netem)",
        ),
    ]
    for body, status, message in cases:
        response = put(api, "mysql-source", body)
        assert response.status_code == status, (body, response.text)
        assert response.json()["status"] == status
        if message:
            assert response.json()["error"] == message
    assert api.get("/api/shaping").json()["shaping"] == []
    assert api.get("/api/shaping/mysql-target").json()["kernel"]["mysql-target"]["iptables"] == []


def test_a_container_outside_the_project_is_not_found(api):
    name = "laglab-it-outsider"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    subprocess.run(["docker", "run", "-d", "--name", name, "laglab/loadgen:dev"], capture_output=True, check=True)
    try:
        for service in (name, "laglab-it-outsider"):
            response = put(api, service, {"delay": "10ms"})
            assert response.status_code == 404
            assert response.json()["error"].startswith("service: no service")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
