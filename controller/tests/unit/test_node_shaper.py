"""The daemonset backend and the node shaper against the fake API server: the controller writes the
desired entries into a ConfigMap, a shaper per node reads it, converges the lab's pods of its node only
(exact tc argv, through a dry-run executor) and reports; the controller answers once every node did.
The data path itself (packets between two nodes) is tests/nodes.py's, on a real kernel."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest

from laglab.app import shutdown
from laglab.platforms.kube_api import KubeApi
from laglab.platforms.kubernetes import KubernetesPlatform
from laglab.platforms.node import NodePlatform
from laglab.shaping.backends import KernelBackend
from laglab.shaping.daemonset import DaemonSetBackend
from laglab.shaping.executor import CommandError, Executor
from laglab.shaping.impairment import Impairment
from laglab.shaping.manager import ShapingManager
from laglab.shaping.node_shaper import NodeShaper
from laglab.shaping.node_wire import DESIRED, status_name, write_configmap
from laglab.shaping.params import ShapingError, parse_request

from ..conftest import authorized
from ..polling import wait_until
from .fake_kube import FakeKube
from .fakes import shaping_app

NS = "laglab"


@pytest.fixture
def pods():
    """A real process per pod: the shapers' PIDs (a dry-run executor enters nothing, but checks them)."""
    procs = {name: subprocess.Popen(["sleep", "60"]) for name in ("mysql-source-0", "loadgen-1", "mysql-target-0")}
    yield {name: p.pid for name, p in procs.items()}
    for p in procs.values():
        p.kill()
        p.wait()


@pytest.fixture
def kube():
    fake = FakeKube(NS)
    fake.add_pod("mysql-source-0", "mysql-source", "node-a", "10.0.1.10")
    fake.add_pod("loadgen-1", "loadgen", "node-a", "10.0.1.11")
    fake.add_pod("mysql-target-0", "mysql-target", "node-b", "10.0.2.10")
    fake.add_pod("controller-1", "controller", "node-a", "10.0.1.12", labels={"laglab.shaped": "never"})
    yield fake
    fake.close()


class Refusing(KernelBackend):
    """A node whose kernel refuses what it is asked for mysql-target."""

    def converge(self, executor, service, pid, plan, previous, force):
        if service == "mysql-target" and not plan.empty:
            raise CommandError(["tc", "qdisc", "replace"], 2, "Error: Specified qdisc not found.")
        return super().converge(executor, service, pid, plan, previous, force)


def start_shaper(kube, node: str, pids: dict, backend=None) -> NodeShaper:
    platform = NodePlatform(KubeApi(kube.url, NS), node, resolve=lambda pod: pids.get(pod["metadata"]["name"]))
    executor = Executor(dry_run=True, owns=platform.owns)
    shaper = NodeShaper(platform.api, platform, backend or KernelBackend(), interval=0.05, executor=executor)
    threading.Thread(target=shaper.run, daemon=True).start()
    return shaper


@pytest.fixture
def shapers(kube, pods):
    made = {node: start_shaper(kube, node, pods) for node in ("node-a", "node-b")}
    yield made
    for shaper in made.values():
        shaper.stop(clear=False)


def test_a_change_is_a_configmap_each_node_converges_its_own_pods_and_reports(kube, pods, shapers, tmp_path):
    environ = {"LAB_PLATFORM": "kubernetes", "SHAPING_BACKEND": "daemonset", "KUBERNETES_API_URL": kube.url,
               "KUBERNETES_NAMESPACE": NS}  # fmt: skip
    app = shaping_app(tmp_path, environ)
    try:
        for shaper in shapers.values():
            shaper.executor.ran.clear()
        answer = authorized(app).put("/api/shaping/mysql-source", json={"delay": "80ms", "peer": "mysql-target"})
        assert answer.status_code == 200, answer.get_json()
        desired = json.loads(kube.configmaps[DESIRED]["data"]["desired.json"])
        (entry,) = desired["entries"]  # the wire form the Docker backends' state file holds
        assert (entry["service"], entry["peer"], entry["direction"]) == ("mysql-source", "mysql-target", "egress")
        assert entry["shaping"]["delay"] == 0.08 and entry["shaping"]["loss"] == 0.0
        # Both nodes answered this generation before the PUT did.
        for node in ("node-a", "node-b"):
            status = json.loads(kube.configmaps[status_name(node)]["data"]["status.json"])
            assert status["generation"] == desired["generation"] and status["error"] is None
        ran_a = shapers["node-a"].executor.ran
        source_pid = pods["mysql-source-0"]
        delay = [argv for argv in ran_a if f"--target={source_pid}" in argv and "netem" in argv]
        assert (delay and "80ms" in delay[-1]) or "80.0ms" in delay[-1], ran_a
        assert any("10.0.2.10/32" in argv for argv in ran_a if f"--target={source_pid}" in argv)
        # node-b touched only its own pod, and no pod of node-a
        targets_b = {arg for argv in shapers["node-b"].executor.ran for arg in argv if arg.startswith("--target=")}
        assert targets_b <= {f"--target={pods['mysql-target-0']}"}
    finally:
        shutdown(app, clear_kernel=False)


def test_a_nodes_error_fails_the_change_naming_the_node_and_it_is_rolled_back(kube, pods, tmp_path):
    shapers = [start_shaper(kube, "node-a", pods), start_shaper(kube, "node-b", pods, backend=Refusing())]
    platform = KubernetesPlatform(KubeApi(kube.url, NS))
    manager = ShapingManager(
        platform, Executor(dry_run=True), DaemonSetBackend(timeout=10, interval=0.05), tmp_path / "s"
    )
    try:
        with pytest.raises(ShapingError) as caught:
            manager.put("mysql-target", parse_request({"delay": "30ms"}))
        assert "the shaper on node node-b: CommandError" in caught.value.message
        assert "Specified qdisc not found" in caught.value.message
        assert manager.desired.entries == {}
        desired = json.loads(kube.configmaps[DESIRED]["data"]["desired.json"])
        assert desired["entries"] == [] and desired["generation"] == 2  # 1: the change, 2: back
    finally:
        for shaper in shapers:
            shaper.stop(clear=False)
        platform.unwatch()


def test_a_node_without_a_shaper_is_named_after_the_timeout(kube, pods, tmp_path):
    shaper = start_shaper(kube, "node-a", pods)  # nothing runs on node-b
    platform = KubernetesPlatform(KubeApi(kube.url, NS))
    manager = ShapingManager(
        platform, Executor(dry_run=True), DaemonSetBackend(timeout=0.5, interval=0.05), tmp_path / "s"
    )
    try:
        hint = rf"kubectl -n {NS} get pods -l app\.kubernetes\.io/name=laglab-shaper"  # #38.7: laglab-shaper was no namespace
        with pytest.raises(
            ShapingError, match=rf"from the shaper on node-b within 0\.5s \(is the shaper component applied\? {hint}\)"
        ):
            manager.put("mysql-source", parse_request({"delay": "30ms"}))
    finally:
        shaper.stop(clear=False)
        platform.unwatch()


def test_a_node_plans_with_the_other_nodes_pods_by_address(kube, pods):
    platform = NodePlatform(KubeApi(kube.url, NS), "node-b", resolve=lambda pod: pods.get(pod["metadata"]["name"]))
    try:
        local = platform.list()
        assert sorted(local) == ["mysql-target"] and local["mysql-target"].pid == pods["mysql-target-0"]
        assert platform.peers() == {"loadgen": "10.0.1.11", "mysql-source": "10.0.1.10"}  # not the controller
        assert platform.owns(pods["mysql-target-0"]) and not platform.owns(pods["mysql-source-0"])
        assert platform.bridge().name == "+" and platform.bridge().pid == 1
    finally:
        platform.unwatch()


def test_the_pid_of_a_pod_is_found_by_its_uid_in_the_cgroups(tmp_path, kube):
    for pid, cgroup in ((7, "0::/init.scope\n"), (42, "0::/kubepods.slice/kubepods-burstable-poduid_mysql_target_0.slice/cri-x\n")):  # fmt: skip
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(cgroup)
    kube.pods["mysql-target-0"]["metadata"]["uid"] = "uid-mysql-target-0"
    platform = NodePlatform(KubeApi(kube.url, NS), "node-b", proc=str(tmp_path))
    try:
        assert platform.list()["mysql-target"].pid == 42  # systemd's driver writes the UID with underscores
        assert platform.owns(42) and not platform.owns(7)
    finally:
        platform.unwatch()


def test_a_pod_in_the_nodes_own_namespaces_is_never_entered(tmp_path, kube):
    """#38.8: any pod with app.kubernetes.io/name was a lab service; a hostNetwork pod's PID is in the
    node's network namespace, where a forced apply runs `tc qdisc del dev eth0 root`. Such a pod, and
    any PID whose /proc/PID/ns/net is the root PID's, is left out."""
    for pid, net in ((1, "net:[4026531840]"), (42, "net:[4026532999]"), (77, "net:[4026531840]")):
        (tmp_path / str(pid) / "ns").mkdir(parents=True)
        os.symlink(net, tmp_path / str(pid) / "ns" / "net")
    kube.add_pod("node-exporter-x", "node-exporter", "node-b", "10.0.0.2")
    kube.pods["node-exporter-x"]["spec"]["hostNetwork"] = True
    pids = {"mysql-target-0": 42, "loadgen-0": 77, "node-exporter-x": 1}
    kube.add_pod("loadgen-0", "loadgen", "node-b", "10.0.2.11")
    platform = NodePlatform(KubeApi(kube.url, NS), "node-b", resolve=lambda pod: pids.get(pod["metadata"]["name"]),
                            proc=str(tmp_path))  # fmt: skip
    try:
        assert set(platform.list()) == {"mysql-target"}  # loadgen-0's PID shares the node's namespace
        assert platform.list()["mysql-target"].pid == 42 and not platform.owns(77)
    finally:
        platform.unwatch()


@pytest.mark.parametrize("shaping", [{"delay": 1e308}, {"delay": "80ms"}, {"loss": 7.0}, {"nonsense": 1}])
def test_an_entry_the_api_would_refuse_is_answered_with_its_error_not_silence(kube, pods, shaping):
    """#38.8: a ConfigMap entry written by hand (`delay: 1e308`) raised OverflowError, which no one
    caught: the shaper never answered and every PUT timed out. Each entry is held to the API's own
    rules; the generation is answered with the entry and why, and nothing is applied."""
    entry = {"service": "mysql-target", "peer": None, "direction": "egress", "expires_at": None,
             "shaping": {**Impairment(delay=0.05).to_wire(), **shaping}}  # fmt: skip
    write_configmap(KubeApi(kube.url, NS), DESIRED, "desired.json", {"generation": 7, "entries": [entry]})
    shaper = start_shaper(kube, "node-b", pods)
    try:
        status = wait_until(lambda: json.loads(((kube.configmaps.get(status_name("node-b")) or {}).get("data") or {})
                                               .get("status.json") or "{}") or None, 5)  # fmt: skip
        assert status["generation"] == 7 and status["error"].startswith(f"WireError: {DESIRED}: entries.0: "), status
        assert not any("netem" in argv for argv in shaper.executor.ran)
    finally:
        shaper.stop(clear=False)
