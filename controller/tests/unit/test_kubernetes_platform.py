"""The Kubernetes platform and the Chaos Mesh backend against a fake API server (fake_kube.py: real
HTTP and WebSocket, Chaos Mesh's status transitions, a failed injection, a slow recovery, a deleted
pod), comparing the exact requests."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from laglab.config import ConfigError
from laglab.errors import Kind, status_of
from laglab.faults import FaultManager
from laglab.faults.base import FaultError
from laglab.platforms import PlatformError
from laglab.platforms import choose as choose_platform
from laglab.platforms.kube_api import KubeApi, KubeError
from laglab.platforms.kubernetes import KubernetesPlatform
from laglab.shaping.backends import choose as choose_backend
from laglab.shaping.chaos_mesh import ChaosMeshBackend
from laglab.shaping.executor import Executor
from laglab.shaping.manager import ShapingManager
from laglab.shaping.params import ShapingError, parse_request

from ..conftest import authorized
from ..polling import wait_until
from .fake_kube import FakeKube
from .fakes import shaping_app

NS = "laglab"
CHAOS = f"/apis/chaos-mesh.org/v1alpha1/namespaces/{NS}/networkchaos"


@pytest.fixture
def kube():
    fake = FakeKube(NS, inject_after=0.2, recover_after=0.2)
    fake.add_pod("mysql-source-0", "mysql-source", "node-a", "10.0.1.10")
    fake.add_pod("mysql-target-0", "mysql-target", "node-b", "10.0.2.10")
    fake.add_pod("loadgen-5f7c9-x2x4q", "loadgen", "node-a", "10.0.1.11")
    fake.add_pod("controller-6d5b8-abcde", "controller", "node-a", "10.0.1.12", labels={"laglab.shaped": "never"})
    yield fake
    fake.close()


@pytest.fixture
def platform(kube):
    made = KubernetesPlatform(KubeApi(kube.url, NS), owner={"apiVersion": "v1", "kind": "Pod",
                              "name": "controller-6d5b8-abcde", "uid": "uid-controller", "blockOwnerDeletion": False})  # fmt: skip
    yield made
    made.unwatch()


@pytest.fixture
def shaping(platform, tmp_path):
    manager = ShapingManager(
        platform, Executor(dry_run=True), ChaosMeshBackend(timeout=5, interval=0.05), tmp_path / "shaping.json"
    )
    yield manager
    manager.stop(clear_kernel=False)


def test_services_are_the_namespace_pods_by_name_label(kube, platform):
    lab = platform.list()
    assert sorted(lab) == ["controller", "loadgen", "mysql-source", "mysql-target"]
    assert lab["mysql-target"].name == "mysql-target-0" and lab["mysql-target"].ip == "10.0.2.10"
    assert lab["mysql-target"].running and lab["mysql-target"].reachable and lab["mysql-target"].pid == 0
    assert not lab["controller"].shapeable
    assert platform.nodes() == {"controller": "node-a", "loadgen": "node-a", "mysql-source": "node-a",
                                "mysql-target": "node-b"}  # fmt: skip
    assert kube.calls("GET")[0] == (
        "GET",
        f"/api/v1/namespaces/{NS}/pods",
        {"labelSelector": "app.kubernetes.io/name"},
        None,
    )
    assert not platform.owns(1234)  # no namespace is ever entered
    with pytest.raises(PlatformError, match="no bridge"):
        platform.bridge()


def test_a_pod_not_ready_is_down_for_faults_but_runs_and_a_deleted_one_is_gone(kube, platform):
    kube.add_pod("mysql-target-0", "mysql-target", "node-b", "10.0.2.10", ready=False)
    assert platform.list()["mysql-target"].running  # its containers run: shaped, entered by exec
    assert not platform.state("mysql-target").running  # the service is not up (a fault's end waits)
    kube.remove_pod("mysql-target-0")
    assert "mysql-target" not in platform.list()
    with pytest.raises(PlatformError, match="mysql-target not running"):
        platform.running("mysql-target")


def test_exec_goes_through_the_api_websocket_with_the_exit_code(kube, platform):
    kube.exec_answer = lambda pod, argv: (b"hello\n", 0) if argv[0] == "echo" else (b"no such table\n", 3)
    assert platform.exec("loadgen", ["echo", "hello"]) == (0, b"hello\n")
    assert platform.exec("loadgen", ["mysql", "-e", "select 1"]) == (3, b"no such table\n")
    path, query = kube.exec_calls[0]
    assert path == "loadgen-5f7c9-x2x4q"
    assert query == {"command": ["echo", "hello"], "stdout": ["true"], "stderr": ["true"], "container": ["loadgen"]}
    # No working directory in the exec API: a shell changes to it and runs argv unchanged.
    platform.exec("loadgen", ["sysbench", "run"], workdir="/work dir")
    assert kube.exec_calls[-1][1]["command"] == ["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", "/work dir",
                                                 "sysbench", "run"]  # fmt: skip


def test_files_go_in_as_arguments_and_come_out_with_cat(kube, platform):
    kube.exec_answer = lambda pod, argv: (b"pem bytes", 0)
    assert platform.read_file("mysql-source", "/var/lib/mysql/ca.pem") == b"pem bytes"
    assert kube.exec_calls[-1][1]["command"] == ["cat", "--", "/var/lib/mysql/ca.pem"]
    platform.put_files("loadgen", "/tls", {"ca.pem": b"\x00secret; rm -rf /"})
    argv = kube.exec_calls[-1][1]["command"]
    assert argv[:2] == ["sh", "-c"] and argv[4:] == [
        "/tls",
        base64.b64encode(b"\x00secret; rm -rf /").decode(),
        "ca.pem",
    ]
    with pytest.raises(PlatformError, match="not a plain file name"):
        platform.put_files("loadgen", "/tls", {"../etc/passwd": b"x"})
    kube.exec_answer = lambda pod, argv: (b"cat: /nope: No such file or directory\n", 1)
    with pytest.raises(PlatformError, match="cannot read /nope"):
        platform.read_file("mysql-source", "/nope")


def test_a_link_is_one_networkchaos_created_and_in_effect_only_once_injected(kube, shaping):
    shaping.backend.labels = {"laglab.io/run": "20261126T000000Z-live"}  # app.py: the controller's recording
    shaping.put("mysql-source", parse_request({"delay": "90ms", "jitter": "5ms", "peer": "mysql-target"}))
    objects = kube.objects()
    name = "laglab-mysql-source-to-mysql-target"
    assert list(objects) == [name]
    posts = kube.calls("POST", CHAOS)
    assert len(posts) == 1
    assert posts[0][3] == {
        "apiVersion": "chaos-mesh.org/v1alpha1",
        "kind": "NetworkChaos",
        "metadata": {
            "name": name, "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "laglab-controller", "laglab.io/service": "mysql-source",
                       "laglab.io/peer": "mysql-target", "laglab.io/run": "20261126T000000Z-live"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "controller-6d5b8-abcde",
                                 "uid": "uid-controller", "blockOwnerDeletion": False}],
        },
        "spec": {
            "action": "netem", "mode": "all", "direction": "to",
            "selector": {"namespaces": [NS], "labelSelectors": {"app.kubernetes.io/name": "mysql-source"}},
            "target": {"mode": "all", "selector": {"namespaces": [NS],
                                                   "labelSelectors": {"app.kubernetes.io/name": "mysql-target"}}},
            "delay": {"latency": "90ms", "correlation": "0", "jitter": "5ms"},
        },
    }  # fmt: skip
    # put() returned only after the object said AllInjected with every record Injected.
    status = objects[name]["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["AllInjected"] == "True"
    assert [r["phase"] for r in status["experiment"]["containerRecords"]] == ["Injected"]
    assert len(kube.calls("GET", f"{CHAOS}/{name}")) >= 2  # polled while Chaos Mesh was injecting


def test_a_change_is_delete_wait_until_gone_then_create_never_an_update(kube, shaping):
    shaping.put("mysql-source", parse_request({"delay": "90ms", "peer": "mysql-target"}))
    before = len(kube.requests)
    shaping.put("mysql-source", parse_request({"delay": "120ms", "peer": "mysql-target"}))
    name = "laglab-mysql-source-to-mysql-target"
    changes = [(m, p) for m, p, _q, _b in kube.requests[before:] if m in ("POST", "DELETE", "PUT")]
    assert changes == [("DELETE", f"{CHAOS}/{name}"), ("POST", CHAOS)]
    # Between the two, GETs until the finalizer let it go (404).
    gets = [i for i, r in enumerate(kube.requests[before:]) if r[0] == "GET" and r[1] == f"{CHAOS}/{name}"]
    post_at = next(i for i, r in enumerate(kube.requests[before:]) if r[0] == "POST")
    assert any(i < post_at for i in gets)
    assert kube.objects()[name]["spec"]["delay"]["latency"] == "120ms"
    assert not kube.calls("PUT")


def test_the_webhook_refuses_an_update_as_chaos_mesh_does(kube, platform):
    shaping_body = {"spec": {"action": "netem"}, "metadata": {"name": "x"}}
    api = platform.api
    api.request("POST", CHAOS, body={"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "NetworkChaos",
                                     "metadata": {"name": "x", "namespace": NS}, "spec": {"action": "loss"}})  # fmt: skip
    with pytest.raises(Exception, match="Cannot update chaos spec") as caught:
        api.request("PUT", f"{CHAOS}/x", body=shaping_body)
    assert caught.value.status == 403


def test_a_failed_injection_is_an_error_naming_the_object_and_is_rolled_back(kube, shaping):
    kube.no_netem.add("node-b")  # mysql-target's node has no sch_netem
    with pytest.raises(ShapingError) as caught:
        shaping.put("mysql-target", parse_request({"delay": "50ms", "peer": "mysql-source"}))
    assert caught.value.kind is Kind.FAILED
    assert "NetworkChaos laglab-mysql-target-to-mysql-source" in caught.value.message
    # chaos-daemon's words, once Chaos Mesh failed the same way on each of its retries
    assert (
        "Specified qdisc not found" in caught.value.message and "failed to inject it (3 tries)" in caught.value.message
    )
    assert shaping.desired.entries == {}
    deadline = time.monotonic() + 5
    while kube.objects() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kube.objects() == {}  # the rollback deleted it


def test_a_slow_recovery_fails_the_change_after_the_timeout(kube, platform, tmp_path):
    manager = ShapingManager(
        platform, Executor(dry_run=True), ChaosMeshBackend(timeout=0.5, interval=0.05), tmp_path / "s.json"
    )
    manager.put("mysql-source", parse_request({"loss": "5%", "peer": "loadgen"}))
    kube.recover_after = 30  # Chaos Mesh takes its time recovering the pods
    with pytest.raises(ShapingError, match=r"not recovered within 0\.5s"):
        manager.put("mysql-source", parse_request({"loss": "10%", "peer": "loadgen"}))


def test_a_deleted_pod_cannot_be_shaped(kube, shaping):
    kube.remove_pod("mysql-target-0")
    with pytest.raises(ShapingError) as caught:
        shaping.put("mysql-source", parse_request({"delay": "10ms", "peer": "mysql-target"}))
    assert caught.value.kind is Kind.NOT_FOUND and caught.value.message.startswith("peer:")
    with pytest.raises(FaultError, match="service: no service 'mysql-target'"):
        FaultManager(platform_of(shaping)).inject("mysql-target", "kill")
    assert not kube.calls("POST")


def platform_of(manager):
    return manager.platform


def test_partitions_and_clearing(kube, shaping):
    shaping.partition(["mysql-source"], ["mysql-target"])
    objects = kube.objects()
    assert sorted(objects) == ["laglab-mysql-source-to-mysql-target", "laglab-mysql-target-to-mysql-source"]
    assert {o["spec"]["loss"]["loss"] for o in objects.values()} == {"100"}
    shaping.clear()
    deadline = time.monotonic() + 5
    while kube.objects() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kube.objects() == {}


def test_a_service_wide_entry_is_an_object_per_lab_peer_and_adds_to_a_links_own(kube, shaping):
    """#38.5: a service-wide entry was one object without a target: it also held what the pod sends the
    controller (the lag queries' answers: lag read low by the delay). On Docker only lab peers are held;
    here, one object per lab peer (the controller is the apparatus: never a peer)."""
    shaping.put("mysql-source", parse_request({"delay": "10ms"}))
    objects = kube.objects()
    assert sorted(objects) == ["laglab-mysql-source-to-loadgen", "laglab-mysql-source-to-mysql-target"]
    assert all("target" in o["spec"] for o in objects.values())
    shaping.put("mysql-source", parse_request({"delay": "20ms", "peer": "mysql-target"}))
    objects = kube.objects()
    assert sorted(objects) == ["laglab-mysql-source-to-loadgen", "laglab-mysql-source-to-mysql-target"]
    assert objects["laglab-mysql-source-to-mysql-target"]["spec"]["delay"]["latency"] == "30ms"
    assert objects["laglab-mysql-source-to-loadgen"]["spec"]["delay"]["latency"] == "10ms"


def test_an_ingress_beside_an_egress_on_one_link_is_one_object_that_adds_up(kube, shaping):
    """#38.5: mysql-target's ingress from mysql-source was a `from` object, whose rules Chaos Mesh puts
    on mysql-source beside mysql-source's own `to` object for the same address; its tc server keeps
    one of the two (one band per ipset, Go map order). One object per sender and receiver, the entries
    added as on Docker (delays add, the lower rate wins)."""
    shaping.put("mysql-target", parse_request({"delay": "30ms", "rate": "5mbit", "peer": "mysql-source",
                                               "direction": "ingress"}))  # fmt: skip
    shaping.put("mysql-source", parse_request({"delay": "50ms", "rate": "2mbit", "peer": "mysql-target"}))
    objects = kube.objects()
    assert list(objects) == ["laglab-mysql-source-to-mysql-target"]
    spec = objects["laglab-mysql-source-to-mysql-target"]["spec"]
    assert (spec["direction"], spec["delay"]["latency"], spec["rate"]["rate"]) == ("to", "80ms", "2mbit")
    shaping.put("loadgen", parse_request({"loss": "1%", "direction": "both", "peer": "mysql-target"}))
    assert sorted(kube.objects()) == ["laglab-loadgen-to-mysql-target", "laglab-mysql-source-to-mysql-target",
                                      "laglab-mysql-target-to-loadgen"]  # fmt: skip


def test_faults_are_podchaos_objects(kube, platform):
    faults = FaultManager(platform, settle_timeout=5)
    fault = faults.inject("mysql-target", "stop", duration=30, timer=False)
    podchaos = kube.objects("podchaos")
    assert list(podchaos) == ["laglab-mysql-target-stop"]
    assert podchaos["laglab-mysql-target-stop"]["spec"]["action"] == "pod-failure"
    assert platform.state("mysql-target").text == "stopped (PodChaos pod-failure)"
    faults.undo(fault.id)  # start: the pod-failure goes, the pod is ready again
    assert kube.objects("podchaos") == {} and platform.state("mysql-target").running
    faults.inject("mysql-target", "kill")
    assert kube.objects("podchaos")["laglab-mysql-target-kill"]["spec"] == {
        "action": "container-kill", "mode": "all", "containerNames": ["mysql"],
        "selector": {"namespaces": [NS], "labelSelectors": {"app.kubernetes.io/name": "mysql-target"}},
    }  # fmt: skip
    with pytest.raises(FaultError, match="pause has no Chaos Mesh equivalent"):
        faults.inject("mysql-source", "pause")
    # #38.2: the kubelet restarts a killed container at once, so "started again after 20 s" cannot hold
    with pytest.raises(FaultError, match=r"a kill cannot last 20s: `stop` with this duration holds mysql-source") as no:
        faults.inject("mysql-source", "kill", duration=20)
    assert status_of(no.value) == 422 and "laglab-mysql-source-kill" not in kube.objects("podchaos")


def test_choosing_the_platform_and_backend():
    assert choose_platform("auto", {"KUBERNETES_API_URL": "http://127.0.0.1:1"}) == "kubernetes"
    assert choose_platform("auto", {}) == "docker"
    assert choose_platform("docker", {"KUBERNETES_API_URL": "x"}) == "docker"
    assert choose_backend("auto", None, "kubernetes").name == "chaos-mesh"
    assert choose_backend("auto", True, "docker").name == "kernel"
    with pytest.raises(ConfigError, match="SHAPING_BACKEND: chaos-mesh does not shape on the docker platform"):
        choose_backend("chaos-mesh", True, "docker")
    with pytest.raises(ConfigError, match="SHAPING_BACKEND: kernel does not shape on the kubernetes platform"):
        choose_backend("kernel", None, "kubernetes")


def test_the_controller_on_kubernetes_shapes_through_its_api(kube, tmp_path):
    environ = {"LAB_PLATFORM": "kubernetes", "KUBERNETES_API_URL": kube.url, "KUBERNETES_NAMESPACE": NS,
               "POD_NAME": "controller-6d5b8-abcde", "POD_UID": "uid-controller"}  # fmt: skip
    app = shaping_app(tmp_path, environ)
    try:
        client = authorized(app)
        health = client.get("/api/health").get_json()
        assert health["platform"] == {"name": "kubernetes", "project": NS}
        assert health["shaping"]["backend"] == "chaos-mesh" and health["shaping"]["netem_available"] is None
        answer = client.put("/api/shaping/mysql-target", json={"delay": "40ms", "peer": "mysql-source"})
        assert answer.status_code == 200, answer.get_json()
        assert list(kube.objects()) == ["laglab-mysql-target-to-mysql-source"]
        # verify: ping through exec in the pod (loadgen's image has it), the API's figures from its output
        times = [40 + i / 10 for i in range(20)]
        ping = "".join(f"64 bytes from 10.0.2.10: icmp_seq={i} ttl=64 time={t:.1f} ms\n" for i, t in enumerate(times))
        kube.exec_answer = lambda pod, argv: (ping.encode(), 0)
        verified = client.post("/api/verify", json={"from": "loadgen", "to": "mysql-target", "count": 20,
                                                    "throughput": False})  # fmt: skip
        assert verified.status_code == 200, verified.get_json()
        assert (
            verified.get_json()["measured"]["rtt"]["median_ms"] == 40.95
            and verified.get_json()["measured"]["rtt"]["samples"] == 20
        )
        assert kube.exec_calls[-1][1]["command"] == [
            "ping",
            "-U",
            "-n",
            "-c",
            "20",
            "-i",
            "0.05",
            "-W",
            "5",
            "10.0.2.10",
        ]
        kube.exec_answer = lambda pod, argv: (b'exec: "ping": executable file not found in $PATH', 126)
        missing = client.post("/api/verify", json={"from": "mysql-source", "to": "mysql-target", "count": 20,
                                                   "throughput": False})  # fmt: skip
        assert "executable file not found" in missing.get_json()["measured"]["rtt"]["error"]
        kube.no_netem.add("node-a")
        refused = client.put("/api/shaping/mysql-source", json={"delay": "40ms", "peer": "mysql-target"})
        assert refused.status_code == 502
        assert "Specified qdisc not found" in refused.get_json()["error"]
    finally:
        from laglab.app import shutdown

        shutdown(app, clear_kernel=False)


def test_a_load_streams_through_exec_and_stops_with_pkill_in_loadgen(kube, platform):
    from laglab.load.generator import LoadGenerator, Profile

    class Settings:
        LAB_USER, LAB_PASSWORD, LAB_DATABASE = "lab", "lab", "lab"

    stopped = threading.Event()
    line = b"[ 1s ] thds: 4 tps: 99.00 qps: 594.00 (r/w/o: 0/396/198) lat (ms,95%): 5.00 err/s: 0.00 reconn/s: 0.00\n"

    def answer(pod, argv):
        if argv[0] == "sysbench":
            stopped.wait(10)  # runs until pkill: SIGTERM ends it with 143
            return line, 143
        if argv[:3] == ["pkill", "-TERM", "-x"]:
            stopped.set()
        return b"", 0

    kube.exec_answer = answer
    load = LoadGenerator(platform, Settings())
    load.start(Profile(), 30, owner="run-1")
    assert load.running and load.pid is None  # no PID the controller could see
    load.stop(wait=10)
    assert not load.running and load.rows[0]["tps"] == 99.0
    assert [argv["command"][0] for _pod, argv in kube.exec_calls] == ["sh", "sysbench", "pkill"]
    assert kube.exec_calls[2][1]["command"] == ["pkill", "-TERM", "-x", "sysbench"]


def test_without_chaos_mesh_the_controller_starts_and_says_why_shaping_fails(kube, tmp_path):
    kube.chaos_mesh_installed = False
    environ = {"LAB_PLATFORM": "kubernetes", "KUBERNETES_API_URL": kube.url, "KUBERNETES_NAMESPACE": NS}
    app = shaping_app(tmp_path, environ)
    try:
        client = authorized(app)
        assert (
            "the server could not find the requested resource"
            in client.get("/api/health").get_json()["shaping"]["last_error"]
        )
        refused = client.put("/api/shaping/mysql-target", json={"delay": "40ms", "peer": "mysql-source"})
        assert refused.status_code == 502 and "NetworkChaos" in refused.get_json()["error"]
    finally:
        from laglab.app import shutdown

        shutdown(app, clear_kernel=False)


@pytest.fixture
def scaled(tmp_path):
    """mysql-target as a StatefulSet of three replicas on three nodes."""
    fake = FakeKube(NS, inject_after=0.2, recover_after=0.2)
    fake.add_pod("mysql-source-0", "mysql-source", "node-a", "10.0.1.10",
                 labels={"statefulset.kubernetes.io/pod-name": "mysql-source-0"})  # fmt: skip
    fake.add_statefulset("mysql-target", 3)
    platform = KubernetesPlatform(KubeApi(fake.url, NS))
    yield fake, platform
    platform.unwatch()
    fake.close()


def test_a_scaled_statefulsets_pods_are_services_of_their_own(scaled, tmp_path):
    """Pod 0 of mysql-target is the lab's mysql-target (as on Docker), pod k the service
    mysql-target-k; a chaos object selects one of them by its StatefulSet pod name, since the name
    label would select all three."""
    kube, platform = scaled
    assert sorted(platform.list()) == ["mysql-source", "mysql-target", "mysql-target-1", "mysql-target-2"]
    assert (
        platform.list()["mysql-target-2"].name == "mysql-target-2"
        and platform.list()["mysql-target"].name == "mysql-target-0"
    )
    assert platform.kube.pods.shared() == {"mysql-target": "mysql-target-0", "mysql-target-1": "mysql-target-1",
                                      "mysql-target-2": "mysql-target-2"}  # fmt: skip
    manager = ShapingManager(platform, Executor(dry_run=True), ChaosMeshBackend(timeout=5, interval=0.05),
                             tmp_path / "shaping.json")  # fmt: skip
    try:
        manager.put("mysql-source", parse_request({"delay": "40ms", "peer": "mysql-target-2"}))
        (chaos,) = kube.objects().values()
        assert chaos["spec"]["selector"] == {
            "namespaces": [NS],
            "labelSelectors": {"app.kubernetes.io/name": "mysql-source"},
        }
        assert chaos["spec"]["target"]["selector"] == {
            "namespaces": [NS], "labelSelectors": {"statefulset.kubernetes.io/pod-name": "mysql-target-2"}
        }  # fmt: skip
        manager.put("mysql-target-1", parse_request({"loss": "5%", "peer": "mysql-source"}))
        records = kube.objects()["laglab-mysql-target-1-to-mysql-source"]["status"]["experiment"]["containerRecords"]
        assert [r["id"] for r in records] == [f"{NS}/mysql-target-1"]  # that pod alone, not its two siblings
    finally:
        manager.stop(clear_kernel=False)
    FaultManager(platform, settle_timeout=5).inject("mysql-target", "kill")
    assert kube.objects("podchaos")["laglab-mysql-target-kill"]["spec"]["selector"] == {
        "namespaces": [NS], "labelSelectors": {"statefulset.kubernetes.io/pod-name": "mysql-target-0"}
    }  # fmt: skip


def test_the_setup_job_sets_up_every_replica_the_statefulset_asks_for(scaled, monkeypatch):
    """The replication-setup Job reads spec.replicas through the API (its Role may get that one
    StatefulSet and nothing else) and reaches pod k through the headless Service; forbidden, it says so."""
    from laglab.replicators import setup_job
    from laglab.replicators.db import Endpoint

    kube, _ = scaled
    env = {"KUBERNETES_API_URL": kube.url, "KUBERNETES_NAMESPACE": NS, "LAGLAB_TARGET_STATEFULSET": "mysql-target"}
    target = Endpoint("mysql-target-0.mysql-target", 3306, "root", "pw", "mysql-target")
    assert setup_job.replica_endpoints(target, env) == [
        target, *(Endpoint(f"mysql-target-{k}.mysql-target", 3306, "root", "pw", f"mysql-target-{k}") for k in (1, 2))
    ]  # fmt: skip
    assert kube.calls("GET", "/apis/apps") == [
        ("GET", f"/apis/apps/v1/namespaces/{NS}/statefulsets/mysql-target", {}, None)
    ]
    assert setup_job.replica_endpoints(target, {}) == [target]  # on Docker: mysql-target alone, no API
    kube.forbidden.add(f"/apis/apps/v1/namespaces/{NS}/statefulsets/mysql-target")
    with pytest.raises(
        RuntimeError,
        match=r'reading statefulset mysql-target.s replicas: statefulsets.apps "mysql-target" is forbidden',
    ):
        setup_job.replica_endpoints(target, env)


def iperf_json(mbit: float) -> bytes:
    return json.dumps({"end": {"sum_received": {"bits_per_second": mbit * 1e6}}}).encode()


def tools_answer(pod, argv):
    """What iperf3 (a client: 19.25 Mbit/s forward, 9.5 reverse), ss and ping print in the pods."""
    if argv[:2] == ["iperf3", "-c"]:
        return iperf_json(9.5 if "-R" in argv else 19.25), 0
    if argv[0] == "ss":
        return b"LISTEN 0 5 *:5201 *:*\n", 0
    if argv[0] == "ping":
        return b"64 bytes from 10.0.2.10: icmp_seq=1 ttl=64 time=1.0 ms\n" * 20, 0
    return b"", 0


def test_throughput_on_kubernetes_runs_iperf3_in_the_pods_through_an_ephemeral_container(kube, tmp_path):
    """The official MySQL image has no iperf3: the controller adds loadgen's image to the pod as the
    ephemeral container laglab-tools (a strategic merge patch of its ephemeralcontainers, as kubectl
    debug does), waits for the kubelet to run it, and runs the iperf3 server there and the client in
    loadgen's own container; the next measurement reuses it."""
    environ = {"LAB_PLATFORM": "kubernetes", "KUBERNETES_API_URL": kube.url, "KUBERNETES_NAMESPACE": NS}
    app = shaping_app(tmp_path, environ)

    kube.exec_answer = tools_answer
    try:
        client = authorized(app)
        got = client.post("/api/verify", json={"from": "loadgen", "to": "mysql-target", "seconds": 2})
        assert got.status_code == 200, got.get_json()
        measured = got.get_json()["measured"]
        assert (measured["forward_mbit"], measured["reverse_mbit"], measured["forward_other_mbit"]) == (
            19.25,
            9.5,
            None,
        )
        path = f"/api/v1/namespaces/{NS}/pods/mysql-target-0/ephemeralcontainers"
        assert kube.calls("PATCH") == [("PATCH", path, {}, {"spec": {"ephemeralContainers": [{
            "name": "laglab-tools", "image": "image-of-loadgen", "command": ["sleep", "infinity"],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }]}})]  # fmt: skip
        runs = [
            (pod, q.get("container", [None])[0], q["command"])
            for pod, q in kube.exec_calls
            if q["command"][0] != "ping"
        ]
        server = ("mysql-target-0", "laglab-tools")
        assert runs[0] == (*server, ["iperf3", "-s", "-1", "-D", "-p", "5201"])
        assert runs[1] == (*server, ["ss", "-Hltn", "sport = :5201"])
        assert runs[2] == ("loadgen-5f7c9-x2x4q", "loadgen",
                           ["iperf3", "-c", "10.0.2.10", "-p", "5201", "-t", "2", "-P", "1", "-O", "1", "-J"])  # fmt: skip
        assert runs[3] == (*server, ["pkill", "-x", "iperf3"]) and runs[6][2][-1] == "-R"
        again = client.post("/api/verify", json={"from": "loadgen", "to": "mysql-target", "seconds": 1})
        assert again.status_code == 200 and len(kube.calls("PATCH")) == 1  # the container stays; used again
        # A pod whose tools image cannot be pulled, and a Role without the subresource: 502, the cluster's words.
        kube.bad_images.add("image-of-loadgen")
        pulled = client.post("/api/verify", json={"from": "loadgen", "to": "mysql-source", "seconds": 1})
        assert pulled.status_code == 502, pulled.get_json()
        assert pulled.get_json()["error"].startswith("throughput: laglab-tools in pod mysql-source-0: ErrImagePull: ")
        kube.bad_images.clear()
        kube.pods["mysql-source-0"]["spec"].pop("ephemeralContainers")
        kube.forbidden.add(f"/api/v1/namespaces/{NS}/pods/mysql-source-0/ephemeralcontainers")
        denied = client.post("/api/verify", json={"from": "loadgen", "to": "mysql-source", "seconds": 1})
        assert denied.status_code == 502 and "is forbidden" in denied.get_json()["error"], denied.get_json()
    finally:
        from laglab.app import shutdown

        shutdown(app, clear_kernel=False)


def test_a_tools_container_that_never_runs_and_a_body_the_api_refuses(kube, platform):
    """The fake answers as the API server does: a merge patch of another type is 415, a changed
    ephemeral container 422, an exec into a container the pod does not run 400."""
    api = platform.api
    path = api.pods_path("mysql-target-0") + "/ephemeralcontainers"
    body = {"spec": {"ephemeralContainers": [{"name": "laglab-tools", "image": "x"}]}}
    with pytest.raises(KubeError) as refused:
        api.request("PATCH", path, body=body)
    assert refused.value.status == 415
    api.request("PATCH", path, body=body, content_type="application/strategic-merge-patch+json")
    changed = {"spec": {"ephemeralContainers": [{"name": "laglab-tools", "image": "y"}]}}
    with pytest.raises(KubeError, match="may not be changed"):
        api.request("PATCH", path, body=changed, content_type="application/strategic-merge-patch+json")
    with pytest.raises(KubeError) as not_running:  # not running yet: the upgrade is refused
        api.exec("mysql-target-0", "laglab-tools", ["true"])
    assert not_running.value.status == 400
    kube.tools_after = 3600
    platform.TOOLS_TIMEOUT, platform.TOOLS_POLL = 0.3, 0.05
    kube.pods["mysql-source-0"]["spec"]["containers"][0]["image"] = "mysql:8.4"
    with pytest.raises(
        PlatformError, match=r"laglab-tools in pod mysql-source-0 not running after 0.3s \(ContainerCreating\)"
    ):
        platform.tools("mysql-source")


def test_a_fractional_rate_is_created_whole_as_chaos_meshs_webhook_admits_it(kube, shaping):
    """#38.3: isValidRateUnit (ParseUint) refused `1.5mbit`, which a search, a trace or the API asks:
    the fake API plays the validating webhook (chaos_mesh_admission.py), so `1.5mbit` is a 403 there."""
    shaping.put("mysql-source", parse_request({"rate": "1.5mbit", "peer": "mysql-target"}))
    shaping.put("mysql-target", parse_request({"rate": "1234.5678kbit", "peer": "mysql-source"}))
    specs = {name: obj["spec"]["rate"]["rate"] for name, obj in kube.objects().items()}
    assert specs == {
        "laglab-mysql-source-to-mysql-target": "1500kbit",
        "laglab-mysql-target-to-mysql-source": "1234568bit",
    }
    denied = platform_of(shaping).api
    with pytest.raises(Exception, match=r'denied the request: spec\.rate\.rate: Invalid value: "1\.5mbit"') as caught:
        denied.request("POST", CHAOS, body={"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "NetworkChaos",
                                            "metadata": {"name": "y", "namespace": NS},
                                            "spec": {"action": "netem", "rate": {"rate": "1.5mbit"}}})  # fmt: skip
    assert caught.value.status == 403


def test_what_the_webhooks_default_is_no_change_at_the_next_start(kube, platform, tmp_path):
    """#38.3: the mutating webhook stores a jitter-less delay with jitter 0ms: the controller's forced
    converge (every start, every rollback) saw a changed spec and deleted and re-created every delay,
    the link unshaped meanwhile. A new controller over the same objects leaves them alone."""
    first = ShapingManager(platform, Executor(dry_run=True), ChaosMeshBackend(timeout=5, interval=0.05),
                           tmp_path / "shaping.json")  # fmt: skip
    first.put("mysql-source", parse_request({"delay": "90ms", "loss": "1%", "peer": "mysql-target"}))
    stored = kube.objects()["laglab-mysql-source-to-mysql-target"]["spec"]
    assert stored["delay"]["jitter"] == "0ms" and stored["delay"]["correlation"] == "0"
    first.stop(clear_kernel=False)
    before = len(kube.requests)
    again = ShapingManager(platform, Executor(dry_run=True), ChaosMeshBackend(timeout=5, interval=0.05),
                           tmp_path / "shaping.json")  # fmt: skip
    again.load()
    again.apply(force=True)  # as at a start: what the cluster holds against the desired state
    assert [(m, p) for m, p, _q, _b in kube.requests[before:] if m in ("POST", "DELETE", "PUT")] == []
    again.stop(clear_kernel=False)


def test_a_failed_apply_that_chaos_mesh_retries_is_no_failure(kube, shaping):
    """#38.4: an apply error is a record event, an event of reason Failed, and a retry (Chaos Mesh's
    records/controller.go); the condition controller also says Failed for an update conflict. One such
    event failed the change (a 502 and a rollback) while Chaos Mesh went on to inject it."""
    kube.flaky["mysql-target-0"] = 1  # chaos-daemon on node-b was restarting: the first apply fails
    kube.status_conflicts = True
    shaping.put("mysql-target", parse_request({"delay": "50ms", "peer": "mysql-source"}))
    (obj,) = kube.objects().values()
    (record,) = obj["status"]["experiment"]["containerRecords"]
    assert [(e["type"], e["operation"]) for e in record["events"]] == [("Failed", "Apply"), ("Succeeded", "Apply")]
    assert len([e for e in kube.events if e["reason"] == "Failed"]) == 2  # the apply's and the conflict's
    assert shaping.desired.entries  # in force, not rolled back


def test_a_pod_whose_readiness_fails_keeps_its_shaping(kube, shaping, platform):
    """#38.2: mysql-target's probe fails once its IO thread stops (a partition past replica_net_timeout,
    a crash's catch-up): listed as not running, it lost its NetworkChaos objects at the next converge,
    the 100 % loss a partition is made of among them, and the partition healed itself. A pod whose
    containers run keeps its network namespace and its shaping; only a fault's end waits for Ready."""
    shaping.partition(["mysql-source"], ["mysql-target"])
    held = set(kube.objects())
    assert held
    kube.not_ready.add("mysql-target-0")
    wait_until(lambda: not platform.state("mysql-target").running, 5)  # the service is down for faults
    before = len(kube.requests)
    shaping.apply(force=True)  # what the supervisor does when a pod changes, and every start
    assert [(m, p) for m, p, _q, _b in kube.requests[before:] if m in ("POST", "DELETE", "PUT")] == []
    assert set(kube.objects()) == held and platform.list()["mysql-target"].running


def test_a_rate_on_a_chaos_mesh_that_predates_it_is_refused_not_dropped(kube, shaping):
    """#38.7: NetworkChaos `rate` came with Chaos Mesh 2.7.0; on 2.6 the API server prunes the unknown
    field with only a warning, and a 2 Mbit/s limit silently vanished. The created object is compared
    with what was sent: the change fails naming the version, the object is removed."""
    kube.unknown_spec_fields = {"rate"}
    with pytest.raises(ShapingError, match=r"rate: this cluster's Chaos Mesh does not know NetworkChaos spec\.rate "
                                           r"\(the API server dropped it\); it needs Chaos Mesh 2\.7\.0 or later"):  # fmt: skip
        shaping.put("mysql-source", parse_request({"delay": "90ms", "rate": "2mbit", "peer": "mysql-target"}))
    assert kube.objects() == {} and shaping.desired.entries == {}
    shaping.put("mysql-source", parse_request({"delay": "90ms", "peer": "mysql-target"}))  # the rest still works
    assert list(kube.objects()) == ["laglab-mysql-source-to-mysql-target"]


def rbac_of(method: str, path: str, query: dict) -> tuple[str, str, str]:
    """(apiGroup, resource[/subresource], verb) of a request as the API server's authorizer sees it
    (k8s.io/apiserver pkg/endpoints/request/requestinfo.go: GET of a collection is list, or watch
    with ?watch; of an object get; POST create, PUT update, PATCH patch, DELETE delete). An exec is a
    connect request: `create` on pods/exec (its WebSocket GET is authorized as create since
    Kubernetes 1.30's AuthorizePodWebsocketUpgradeCreatePermission, `get` before)."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    assert rest[:1] == ["namespaces"], path  # the controller asks nothing outside its namespace
    resource, *more = rest[2:]
    name, sub = [*more, None, None][:2]
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        verb = "get" if name else ("watch" if query.get("watch") else "list")
    if sub == "exec":
        verb = "create"
    return group, resource + (f"/{sub}" if sub else ""), verb


def test_the_controllers_role_grants_exactly_what_its_code_asks(kube, tmp_path):
    """#38.8: the Role granted services, endpoints, pods/log and watch, which the code never asks. Here
    the controller on Kubernetes (the app itself, chaos-mesh backend) does what a user can make it do:
    shape a link, partition, a fault and its end, verify with ping and iperf3, a load; every request it
    sends the API is mapped to what RBAC checks, and overlays/chaos-mesh's Role must grant exactly
    those (get on pods/exec besides: what API servers before 1.30 check for an exec)."""
    from .test_kubernetes_manifests import render

    environ = {"LAB_PLATFORM": "kubernetes", "KUBERNETES_API_URL": kube.url, "KUBERNETES_NAMESPACE": NS,
               "POD_NAME": "controller-6d5b8-abcde", "POD_UID": "uid-controller"}  # fmt: skip
    app = shaping_app(tmp_path, environ)

    kube.exec_answer = tools_answer
    try:
        client = authorized(app)
        for call, path, body, wanted in (
            (client.put, "/api/shaping/mysql-target", {"delay": "40ms", "peer": "mysql-source"}, 200),
            (client.post, "/api/partitions", {"a": ["mysql-source"], "b": ["loadgen"]}, 201),
            (client.delete, "/api/partitions", None, 204),
            (client.post, "/api/faults", {"service": "mysql-source", "action": "stop"}, 201),
            (client.delete, "/api/faults/f1", None, 200),
            (client.post, "/api/verify", {"from": "loadgen", "to": "mysql-target", "seconds": 1}, 200),
            (client.delete, "/api/shaping", None, 204),
        ):  # fmt: skip
            got = call(path, json=body) if body is not None else call(path)
            assert got.status_code == wanted, (path, got.get_json())
    finally:
        from laglab.app import shutdown

        shutdown(app, clear_kernel=False)
    asked = {rbac_of(m, p, q) for m, p, q, _b in kube.requests}
    asked |= {rbac_of("GET", f"/api/v1/namespaces/{NS}/pods/{pod}/exec", {}) for pod, _q in kube.exec_calls}
    (role,) = [
        d for d in render("overlays/chaos-mesh") if d["kind"] == "Role" and d["metadata"]["name"] == "laglab-controller"
    ]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}  # fmt: skip
    assert asked - granted == set(), "asked, not granted"
    assert granted - asked == {("", "pods/exec", "get")}, "granted, never asked"
