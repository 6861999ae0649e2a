"""The controller holds NET_ADMIN, SYS_ADMIN, the host's PIDs and the Docker socket: it refuses what
could turn that against the host."""

import time

import pytest

from laglab import config
from laglab.api import access
from laglab.platforms.docker import DockerPlatform
from laglab.shaping.executor import Executor, NamespaceGone

from .fakes import FakeDocker, fake_app


def test_a_foreign_host_name_is_refused_dns_rebinding(tmp_path):
    client = fake_app(tmp_path).test_client()
    assert client.get("/api/health", headers={"Host": "attacker.example:8080"}).status_code == 421
    for host in ("127.0.0.1:8080", "localhost", "controller:8080"):
        assert client.get("/api/health", headers={"Host": host}).status_code == 200
    extra = fake_app(tmp_path, environ={"CONTROLLER_HOSTS": "lab.internal"}).test_client()
    assert extra.get("/api/health", headers={"Host": "lab.internal:8080"}).status_code == 200


TOKEN = "s3cret-s3cret-s3cret"


def test_results_files_open_with_a_signed_link_and_no_cookie_opens_anything(tmp_path):
    """A cookie for 127.0.0.1 reaches every port of it (RFC 6265 section 8.5: cookies do not provide
    isolation by port), Grafana's on :3000 included: results links carry a signature instead."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.md").write_text("# report\n")
    (tmp_path / "run" / "lag.png").write_bytes(b"png")
    app = fake_app(tmp_path, {"RESULTS_DIR": str(tmp_path)}, environ={"LAB_API_TOKEN": TOKEN})
    client = app.test_client()
    assert client.get("/results/run/report.md").status_code == 401
    client.set_cookie("laglab-token", TOKEN, path="/")
    assert client.get("/results/run/report.md").status_code == 401  # the old cookie opens nothing
    link = access.signed_link(TOKEN, "/results/run/report.md")
    with client.get(link) as response:
        assert response.status_code == 200 and response.text == "# report\n"
    path, query = link.split("?")
    assert client.get(link.replace("report.md", "lag.png")).status_code == 401  # for its own file only
    forged = f"{path}?{query[:-1]}{'x' if query[-1] != 'x' else 'y'}"
    assert client.get(forged).status_code == 401
    expired = access.signed_link(TOKEN, "/results/run/report.md", now=time.time() - access.LINK_SECONDS - 1)
    assert client.get(expired).status_code == 401
    assert client.get(access.signed_link("another-token-0123", "/results/run/report.md")).status_code == 401
    assert client.post(link).status_code in (401, 405)  # a signature is for reading
    assert client.get(link.replace("/results/run/report.md", "/api/events")).status_code == 401


def test_health_says_nothing_but_ok_without_the_token(tmp_path):
    app = fake_app(tmp_path, environ={"LAB_API_TOKEN": TOKEN})
    client = app.test_client()
    assert client.get("/api/health").json == {"status": "ok", "authenticated": False}
    full = client.get("/api/health", headers={"Authorization": f"Bearer {TOKEN}"}).json
    assert full["authenticated"] is True and full["token"] == "LAB_API_TOKEN" and "problems" in full


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://127.0.0.1:3000"},  # Grafana's page: another port is another origin
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Origin": "http://attacker.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # 127.0.0.1:3000 -> 127.0.0.1:8080 is same-site
    ],
)
def test_a_page_of_another_origin_is_refused_even_with_the_token_and_for_a_get(headers, tmp_path):
    app = fake_app(tmp_path, environ={"LAB_API_TOKEN": TOKEN})
    client = app.test_client()
    auth = {"Authorization": f"Bearer {TOKEN}", "Host": "127.0.0.1:8080"}
    for method, path in (("GET", "/api/consistency?timeout=600"), ("POST", "/api/faults"), ("GET", "/api/lag")):
        answer = client.open(path, method=method, headers={**auth, **headers})
        assert answer.status_code == 403, (method, path, headers)
        assert answer.json["status"] == 403 and answer.json["error"].startswith(next(iter(headers)))
    assert client.get("/api/lag", headers={**auth, "Origin": "http://127.0.0.1:8080"}).status_code == 200
    assert client.get("/api/lag", headers={**auth, "Sec-Fetch-Site": "same-origin"}).status_code == 200
    with client.get("/", headers={"Sec-Fetch-Site": "none"}) as page:  # typed or bookmarked
        assert page.status_code == 200
    assert client.get("/metrics", headers=headers).status_code == 200  # probes send no browser headers


def test_without_a_configured_token_the_controller_makes_one_and_keeps_it(tmp_path):
    first = fake_app(tmp_path)
    token = first.config["API_TOKEN"]
    assert len(token) >= 16 and (tmp_path / "api-token").read_text().strip() == token
    assert (tmp_path / "api-token").stat().st_mode & 0o777 == 0o600
    client = first.test_client()
    assert client.get("/api/shaping").status_code == 401  # no token configured is no open API
    assert client.get("/api/shaping", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    again = fake_app(tmp_path)
    assert again.config["API_TOKEN"] == token  # the same after a restart: the CLI's copy stays good
    assert again.config["API_TOKEN_ORIGIN"].startswith("generated earlier")


def test_an_exposed_controller_needs_a_token():
    with pytest.raises(config.ConfigError) as caught:
        config.load({"CONTROLLER_BIND": "192.0.2.10"})
    assert caught.value.variable == "CONTROLLER_BIND" and "LAB_API_TOKEN" in str(caught.value)
    assert config.load({"CONTROLLER_BIND": "192.0.2.10", "LAB_API_TOKEN": TOKEN}).CONTROLLER_BIND == "192.0.2.10"


def test_a_recycled_pid_is_never_entered(tmp_path):
    (tmp_path / "4321").mkdir()
    cgroup = tmp_path / "4321" / "cgroup"
    containers = DockerPlatform("laglab", client=FakeDocker({"abc123" * 10: {"service": "mysql-source", "pid": 4321}}),
                            proc=str(tmp_path))  # fmt: skip
    containers.list()
    cgroup.write_text("8:pids:/docker/" + "abc123" * 10 + "\n")
    executor = Executor(dry_run=True, owns=containers.owns)
    executor.run(["tc", "qdisc", "show"], netns_pid=4321)
    cgroup.write_text("8:pids:/user.slice/sshd.service\n")  # the container died, the PID went to the host
    with pytest.raises(NamespaceGone):
        executor.run(["tc", "qdisc", "del", "dev", "eth0", "root"], netns_pid=4321)
    with pytest.raises(NamespaceGone):
        executor.run(["ip", "link"], netns_pid=999)  # a PID Docker never gave this project
    assert executor.ran == [["nsenter", "--target=4321", "--net", "--", "tc", "qdisc", "show"]]


def test_the_docker_daemon_is_the_peer_of_its_socket_not_any_process_named_dockerd(tmp_path):
    """#35.5: any user can start a process called dockerd in a network namespace of its own (unshare
    -Urn) holding a device of the bridge's name; the kernel's SO_PEERCRED on the API socket names the
    real daemon. Here the daemon is this test process, listening on a unix socket."""
    import os
    import socket as sockets
    import threading

    path = str(tmp_path / "docker.sock")
    server = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    server.bind(path)
    server.listen(8)

    def serve():
        try:
            while True:
                server.accept()[0].close()
        except OSError:  # closed at the end of the test
            pass

    threading.Thread(target=serve, daemon=True).start()
    proc = tmp_path / "proc"
    impostor = 7  # a lower PID than ours: the old /proc walk met it first
    for pid in (impostor, os.getpid()):
        (proc / str(pid) / "net").mkdir(parents=True)
        (proc / str(pid) / "comm").write_text("dockerd\n")
        (proc / str(pid) / "net" / "dev").write_text("Inter-|\n face |\n  br-lab0: 0 0\n")

    class Network:
        id, attrs = (
            "n" * 64,
            {"Labels": {"com.docker.compose.network": "lab"}, "Options": {"com.docker.network.bridge.name": "br-lab0"}},
        )

    class Client:
        class networks:
            @staticmethod
            def list(filters):
                return [Network()]

    platform = DockerPlatform("laglab", client=Client(), proc=str(proc), socket_path=path)
    try:
        assert platform.procs.daemon_pid() == os.getpid()
        assert platform.bridge().pid == os.getpid()
        assert platform.owns(os.getpid()) and not platform.procs.holds_device(impostor, "br-lab0")
        (proc / str(os.getpid()) / "net" / "dev").write_text("Inter-|\n face |\n  eth0: 0 0\n")
        platform._bridge, platform.procs._daemon = None, None
        with pytest.raises(RuntimeError) as caught:
            platform.bridge()  # the daemon lost the bridge: refused, never the impostor's namespace
        assert "peer of its API socket" in str(caught.value)
    finally:
        server.shutdown(sockets.SHUT_RDWR)
        server.close()
