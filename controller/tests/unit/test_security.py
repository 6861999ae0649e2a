"""The controller holds NET_ADMIN, SYS_ADMIN, the host's PIDs and the Docker socket: it refuses what
could turn that against the host."""

import pytest

from laglab import config
from laglab.app import create_app
from laglab.executor import Executor, NamespaceGone
from laglab.platforms.docker import DockerPlatform

from .fakes import FakeDocker

BASE = {"START_RECORDER": False, "START_SHAPING": False}


def test_a_foreign_host_name_is_refused_dns_rebinding():
    client = create_app(BASE, environ={}).test_client()
    assert client.get("/api/health", headers={"Host": "attacker.example:8080"}).status_code == 421
    for host in ("127.0.0.1:8080", "localhost", "controller:8080"):
        assert client.get("/api/health", headers={"Host": host}).status_code == 200
    extra = create_app(BASE, environ={"CONTROLLER_HOSTS": "lab.internal"}).test_client()
    assert extra.get("/api/health", headers={"Host": "lab.internal:8080"}).status_code == 200


def test_results_files_open_with_the_token_cookie_and_nothing_else_does(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.md").write_text("# report\n")
    app = create_app({**BASE, "RESULTS_DIR": str(tmp_path)}, environ={"LAB_API_TOKEN": "s3cret"})
    client = app.test_client()
    assert client.get("/results/run/report.md").status_code == 401
    client.set_cookie("laglab-token", "s3cret", path="/results")
    with client.get("/results/run/report.md") as response:
        assert response.status_code == 200 and response.text == "# report\n"
    client.set_cookie("laglab-token", "s3cret", path="/")
    assert client.get("/api/events").status_code == 401  # the cookie opens results files only
    client.set_cookie("laglab-token", "wrong", path="/results")
    assert client.get("/results/run/report.md").status_code == 401


def test_an_exposed_controller_needs_a_token():
    with pytest.raises(config.ConfigError) as caught:
        config.load({"CONTROLLER_BIND": "192.0.2.10"})
    assert caught.value.variable == "CONTROLLER_BIND" and "LAB_API_TOKEN" in str(caught.value)
    assert config.load({"CONTROLLER_BIND": "192.0.2.10", "LAB_API_TOKEN": "t"}).CONTROLLER_BIND == "192.0.2.10"


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
