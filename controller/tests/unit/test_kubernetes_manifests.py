"""deploy/kubernetes, offline (issue #23; no API server can run on this project's machines): each
kustomization rendered by kubectl's kustomize, the output validated strictly against the schemas of
Kubernetes 1.30 to 1.37 (kubernetes-validate), and what the schemas cannot say checked here: the
controller holds no host privileges and only namespaced rights, databases spread over nodes, a Pod
Security level is stated, the configuration copies match the files compose.yaml mounts.
`make test` installs kubectl (scripts/setup-host kubectl) and kubernetes-validate (requirements-dev)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy" / "kubernetes"
KUSTOMIZATIONS = ["base", "overlays/chaos-mesh", "overlays/shaper", "overlays/everything"]
VERSIONS = [f"1.{minor}" for minor in range(30, 38)]


def kubectl() -> str:
    found = shutil.which("kubectl") or (ROOT / ".cache/bin/kubectl")
    assert Path(found).exists(), "no kubectl: scripts/setup-host kubectl installs Debian unstable's into .cache/bin"
    return str(found)


def render(name: str) -> list[dict]:
    """`name`: a folder under deploy/kubernetes, or an absolute path (kustomize needs --load-restrictor
    LoadRestrictionsNone for an overlay outside the tree)."""
    argv = [kubectl(), "kustomize", str(DEPLOY / name), "--load-restrictor", "LoadRestrictionsNone"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_kustomization_validates_strictly_for_kubernetes_1_30_to_1_37(name, tmp_path):
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(render(name)))
    validate = Path(sys.executable).with_name("kubernetes-validate")
    for version in VERSIONS:
        done = subprocess.run([str(validate), "--strict", "--quiet", "-k", version, str(rendered)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        assert done.returncode == 0, f"Kubernetes {version}: {done.stdout}{done.stderr}"


def controller_rights(name: str) -> list[dict]:
    """The controller's pod and Role, checked: no host privileges, only namespaced and named rights."""
    docs = render(name)
    pod = of_kind(docs, "Deployment")["controller"]["spec"]["template"]["spec"]
    assert not any(pod.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))
    assert not any("hostPath" in volume for volume in pod.get("volumes", []))
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["capabilities"] == {"drop": ["ALL"]} and context["allowPrivilegeEscalation"] is False
        assert not context.get("privileged")
    assert pod["serviceAccountName"] == "laglab-controller"
    assert not of_kind(docs, "ClusterRole") and not of_kind(docs, "ClusterRoleBinding")
    rules = of_kind(docs, "Role")["laglab-controller"]["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
        assert "secrets" not in rule["resources"], rule
    return rules


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_controller_holds_no_host_privileges_and_only_namespaced_rights(name):
    assert controller_rights(name)


def test_the_chaos_mesh_component_grants_its_objects_and_says_so():
    rules = controller_rights("overlays/chaos-mesh")
    chaos = [r for r in rules if r["apiGroups"] == ["chaos-mesh.org"]]
    assert {r for rule in chaos for r in rule["resources"]} == {"networkchaos", "podchaos"}  # the exact verbs:
    # test_kubernetes_platform.py's test_the_controllers_role_grants_exactly_what_its_code_asks
    env = of_kind(render("overlays/chaos-mesh"), "Deployment")["controller"]["spec"]["template"]["spec"]
    assert {"name": "SHAPING_BACKEND", "value": "chaos-mesh"} in env["containers"][0]["env"]
    base_rules = of_kind(render("base"), "Role")["laglab-controller"]["rules"]
    assert not any(r["apiGroups"] == ["chaos-mesh.org"] for r in base_rules)


def test_the_shaper_component_is_the_one_privileged_pod_and_says_so():
    docs = render("overlays/shaper")
    rules = controller_rights("overlays/shaper")  # the controller itself still holds nothing of the host
    assert {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update"]} in rules
    env = of_kind(docs, "Deployment")["controller"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "SHAPING_BACKEND", "value": "daemonset"} in env
    shaper = of_kind(docs, "DaemonSet")["laglab-shaper"]["spec"]["template"]
    pod = shaper["spec"]
    assert pod["hostPID"] and pod["hostNetwork"] and shaper["metadata"]["labels"]["laglab.shaped"] == "never"
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "laglab.shaping.node_shaper"]
    assert container["securityContext"] == {"capabilities": {"add": ["NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"]}}
    assert not any("hostPath" in volume for volume in pod.get("volumes", []))
    assert {e["name"] for e in container["env"]} == {"NODE_NAME", "LAB_NAMESPACE", "SHAPING_BACKEND"}
    assert of_kind(docs, "Role")["laglab-shaper"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},  # NodePlatform lists the lab's pods
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update"]},  # node_wire
    ]
    # #38.8: a privileged pod needs its namespace to allow it: its own, so that the lab's stays at
    # baseline (whoever may create a pod in the lab's namespace is not root on a node).
    namespaces = {
        n: d["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] for n, d in of_kind(docs, "Namespace").items()
    }
    assert namespaces == {"laglab": "baseline", "laglab-shaper": "privileged"}
    daemonset = of_kind(docs, "DaemonSet")["laglab-shaper"]
    assert daemonset["metadata"]["namespace"] == "laglab-shaper"
    # It reads and writes the lab's namespace (LAB_NAMESPACE), as the Role it is bound to from there.
    assert {"name": "LAB_NAMESPACE", "value": "laglab"} in container["env"]
    binding = of_kind(docs, "RoleBinding")["laglab-shaper"]
    assert binding["metadata"]["namespace"] == "laglab" and binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "laglab-shaper", "namespace": "laglab-shaper"}]  # fmt: skip
    assert of_kind(docs, "ServiceAccount")["laglab-shaper"]["metadata"]["namespace"] == "laglab-shaper"
    assert not of_kind(render("base"), "DaemonSet")


def test_the_controller_may_add_only_an_ephemeral_container_and_the_setup_job_read_one_statefulset():
    """Throughput in verify adds laglab-tools to a pod (patch of pods/ephemeralcontainers, nothing else of
    a pod may be changed); the set-up Job's own account may get the mysql-target StatefulSet alone."""
    docs = render("base")
    rules = controller_rights("base")
    assert {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch"]} in rules
    assert not any(
        "pods" in r["resources"] and {"patch", "update", "create", "delete"} & set(r["verbs"]) for r in rules
    )
    job = of_kind(docs, "Job")["replication-setup"]["spec"]["template"]["spec"]
    assert job["serviceAccountName"] == "laglab-setup"
    assert of_kind(docs, "Role")["laglab-setup"]["rules"] == [
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "resourceNames": ["mysql-target"], "verbs": ["get"]}
    ]
    binding = of_kind(docs, "RoleBinding")["laglab-setup"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "laglab-setup", "namespace": "laglab"}]
    env = {e["name"]: e.get("value") for e in job["containers"][0]["env"]}
    assert env["LAGLAB_TARGET"] == "mysql-target-0.mysql-target:3306"
    assert env["LAGLAB_TARGET_STATEFULSET"] == "mysql-target"
    controller = of_kind(docs, "Deployment")["controller"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "LAGLAB_TARGET", "value": "mysql-target-0.mysql-target:3306"} in controller["env"]
    target = of_kind(docs, "StatefulSet")["mysql-target"]["spec"]
    assert target["podManagementPolicy"] == "Parallel" and target["serviceName"] == "mysql-target"


def test_databases_spread_over_nodes_and_run_the_official_image():
    sets = of_kind(render("base"), "StatefulSet")
    assert set(sets) == {"mysql-source", "mysql-target"}
    for statefulset in sets.values():
        pod = statefulset["spec"]["template"]["spec"]
        term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {"app.kubernetes.io/component": "database"}
        assert statefulset["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "database"
        assert pod["containers"][0]["image"] == "mysql:8.4"


def test_a_pod_security_level_is_stated_and_the_apparatus_is_never_shaped():
    docs = render("base")
    labels = of_kind(docs, "Namespace")["laglab"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    for kind, name in (("Deployment", "controller"), ("Job", "replication-setup")):
        assert of_kind(docs, kind)[name]["spec"]["template"]["metadata"]["labels"]["laglab.shaped"] == "never"


def test_the_configuration_copies_are_the_files_compose_mounts():
    pairs = {
        "base/config/source.cnf": "config/mysql/source.cnf", "base/config/target.cnf": "config/mysql/target.cnf",
        "base/config/db-health.sh": "config/db-health.sh",
        "components/group-replication/config/node.cnf": "config/group-replication/node.cnf",
        "components/group-replication/config/start.sh": "config/group-replication/start.sh",
        "components/group-replication/config/db-health.sh": "config/db-health.sh",
        "components/galera/config/node.cnf": "config/galera/node.cnf",
        "components/galera/config/start.sh": "config/galera/start.sh",
        "components/galera/config/db-health.sh": "config/db-health.sh",
        "components/monitoring/config/prometheus.yml": "config/monitoring/prometheus.yml",
    }  # fmt: skip
    for copy, original in pairs.items():
        assert (DEPLOY / copy).read_text() == (ROOT / original).read_text(), f"{copy} differs from {original}"
    found = {str(p.relative_to(DEPLOY)) for p in DEPLOY.glob("*/*/config/*")} | {
        str(p.relative_to(DEPLOY)) for p in DEPLOY.glob("base/config/*")
    }
    assert found == set(pairs), "a copy without its original, or an original without its copy"


BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}  # fmt: skip


def pod_templates(docs: list[dict]) -> dict[str, dict]:
    return {f"{d['kind']}/{d['metadata']['name']}": d["spec"]["template"]["spec"] for d in docs
            if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")}  # fmt: skip


def baseline(pod: dict) -> list[str]:
    """What Pod Security's baseline level forbids in a pod (the parts our manifests could hold)."""
    broken = [k for k in ("hostPID", "hostNetwork", "hostIPC") if pod.get(k)]
    broken += ["hostPath" for volume in pod.get("volumes", []) if "hostPath" in volume]
    for container in pod["containers"]:
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            broken.append("privileged")
        broken += sorted(set((context.get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES)
    return broken


@pytest.mark.parametrize("component", sorted(p.name for p in (DEPLOY / "components").iterdir()))
def test_each_component_states_its_pod_security_level_and_its_pods_keep_to_it(component, tmp_path):
    text = (DEPLOY / "components" / component / "kustomization.yaml").read_text()
    level = re.search(r"^# Pod Security: (baseline|privileged)\b", text, re.M)
    assert level, f"components/{component} states no Pod Security level"
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    relative = lambda path: os.path.relpath(path, overlay)  # noqa: E731 - kustomize takes no absolute paths
    components = [relative(DEPLOY / "components" / c) for c in dict.fromkeys([component, "lab"])]  # lab: last
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [relative(DEPLOY / "base")], "components": components}))  # fmt: skip
    docs = render(str(overlay))
    enforced = {
        n: d["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] for n, d in of_kind(docs, "Namespace").items()
    }
    assert enforced["laglab"] == "baseline"  # the lab's namespace, whatever the component (#38.8)
    assert max(enforced.values(), key=["baseline", "privileged"].index) == level[1], enforced
    broken = {name: baseline(pod) for name, pod in pod_templates(docs).items() if baseline(pod)}
    if level[1] == "baseline":
        assert broken == {}
    else:  # only the component's own pod needs more
        assert set(broken) == {"DaemonSet/laglab-shaper"}, broken


# The kinds an API server keeps outside every namespace, as kustomize's namespace transformer knows them
# (kubernetes-sigs/kustomize api/resid/gvk.go, notNamespaceableKinds; Kubernetes' docs, "Not all objects
# are in a namespace"): the ones a manifest of ours could hold.
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PersistentVolume",
                  "PriorityClass", "RuntimeClass", "StorageClass", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "CSIDriver", "APIService"}  # fmt: skip


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_namespaced_object_is_in_the_labs_namespace(name):
    """#38.1: an object without a namespace lands in the context's (usually `default`): the shaper then
    read LAB_NAMESPACE=default and every shaping change timed out. 19 of overlays/everything's 36."""
    docs = render(name)
    shaper = {"ServiceAccount/laglab-shaper", "DaemonSet/laglab-shaper"}  # in a namespace of their own
    outside = [f"{d['kind']}/{d['metadata']['name']}" for d in docs
               if d["kind"] not in CLUSTER_SCOPED and d["metadata"].get("namespace") != "laglab"]  # fmt: skip
    assert set(outside) <= shaper and all(d["metadata"]["namespace"] == "laglab-shaper" for d in docs
                                          if f"{d['kind']}/{d['metadata']['name']}" in outside)  # fmt: skip
    namespaces = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    assert namespaces == ({"laglab", "laglab-shaper"} if outside else {"laglab"}), namespaces


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_image_is_pinned_and_the_labs_come_from_one_place(name):
    """#38.1: the set-up Jobs and the shaper ran `laglab/controller` (docker.io, :latest), which the
    base's `images:` never reached. Each lab image is as components/lab names it (the one place a
    registry is set); every other image names its tag."""
    lab = yaml.safe_load((DEPLOY / "components/lab/kustomization.yaml").read_text())["images"]
    ours = {i["name"]: f"{i.get('newName', i['name'])}:{i['newTag']}" for i in lab}
    assert set(ours) == {"laglab/controller", "laglab/loadgen"}
    for pod_name, pod in pod_templates(render(name)).items():
        for container in pod.get("initContainers", []) + pod["containers"]:
            image = container["image"]
            repository, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
            assert image in ours.values() or (repository not in ours and tag and tag != "latest"), (pod_name, image)


def references(docs: list[dict]) -> list[tuple[str, str, str]]:
    """Every (kind, name, where) an object of the rendered output refers to by name: what pods mount and
    read (Secrets, ConfigMaps, claims), run as (ServiceAccounts), and what RoleBindings bind."""
    out = []
    for owner, pod in pod_templates(docs).items():
        out.append(("ServiceAccount", pod.get("serviceAccountName", "default"), owner))
        for volume in pod.get("volumes", []):
            for key, kind, field in (("configMap", "ConfigMap", "name"), ("secret", "Secret", "secretName"),
                                     ("persistentVolumeClaim", "PersistentVolumeClaim", "claimName")):  # fmt: skip
                if key in volume:
                    out.append((kind, volume[key][field], owner))
        for container in pod.get("initContainers", []) + pod["containers"]:
            for source in container.get("envFrom", []):
                for key, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                    if key in source:
                        out.append((kind, source[key]["name"], owner))
            for variable in container.get("env", []):
                for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                    if key in variable.get("valueFrom", {}):
                        out.append((kind, variable["valueFrom"][key]["name"], owner))
    for binding in (d for d in docs if d["kind"] == "RoleBinding"):
        owner = f"RoleBinding/{binding['metadata']['name']}"
        out.append((binding["roleRef"]["kind"], binding["roleRef"]["name"], owner))
        out += [(s["kind"], s["name"], owner) for s in binding["subjects"] if s["kind"] == "ServiceAccount"]
    return out


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_reference_resolves_in_the_rendered_output(name):
    """kustomize renames its generated Secret and ConfigMaps (a hash suffix) and rewrites the references
    it knows of at the level that generated them: the cluster components' StatefulSets named
    `lab-credentials` while the Secret was `lab-credentials-<hash>` (the kubelet: CreateContainerConfigError).
    A claim may come from the StatefulSet's own volumeClaimTemplates; `default` is every namespace's."""
    docs = render(name)
    present = {(d["kind"], d["metadata"]["name"]) for d in docs} | {("ServiceAccount", "default")}
    for d in docs:
        if d["kind"] == "StatefulSet":
            present |= {
                ("PersistentVolumeClaim", t["metadata"]["name"]) for t in d["spec"].get("volumeClaimTemplates", [])
            }
    missing = [ref for ref in references(docs) if ref[:2] not in present]
    assert missing == []


def test_the_clusters_are_compose_profiles_services_and_the_apparatus_is_never_shaped():
    docs = render("overlays/everything")
    sets = of_kind(docs, "StatefulSet")
    assert set(sets) >= {f"{kind}-node{n}" for kind in ("gr", "galera") for n in (1, 2, 3)}
    for kind, nodes in (("gr", "gr-node"), ("galera", "galera-node")):
        for n in (1, 2, 3):
            pod = sets[f"{nodes}{n}"]["spec"]["template"]["spec"]
            env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
            assert env[f"{'GR' if kind == 'gr' else 'GALERA'}_NODE"] == str(n)
            assert pod["containers"][0]["command"] == [
                f"/laglab/{'group-replication' if kind == 'gr' else 'galera'}/start.sh"
            ]
            assert of_kind(docs, "Service")[f"{nodes}{n}"]["spec"]["publishNotReadyAddresses"] is True
    for job in ("gr-setup", "galera-setup"):
        template = of_kind(docs, "Job")[job]["spec"]["template"]
        assert template["metadata"]["labels"]["laglab.shaped"] == "never"
        assert template["spec"]["containers"][0]["command"][:3] == ["python", "-m", "laglab"]
    prometheus = of_kind(docs, "Deployment")["prometheus"]["spec"]["template"]
    assert prometheus["metadata"]["labels"]["laglab.shaped"] == "never"


def test_group_replication_members_on_other_nodes_are_allowed(tmp_path):
    """#38.6: XCom's AUTOMATIC allowlist admits each interface's own subnet (MySQL's manual,
    group_replication_ip_allowlist); a pod's subnet is its node's, and the anti-affinity puts members
    on different nodes. Every member runs start.sh (run here, with a stand-in docker-entrypoint.sh that
    prints what mysqld would get) with an allowlist covering the pod networks of kind (10.244.0.0/16),
    k3s (10.42.0.0/16), Calico (192.168.0.0/16) and CGNAT ranges (100.64.0.0/10)."""
    import ipaddress

    sets = {n: s for n, s in of_kind(render("overlays/everything"), "StatefulSet").items() if n.startswith("gr-node")}
    assert len(sets) == 3
    entry = tmp_path / "docker-entrypoint.sh"
    entry.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    entry.chmod(0o755)
    for name, made in sets.items():
        env = {e["name"]: e["value"] for e in made["spec"]["template"]["spec"]["containers"][0]["env"] if "value" in e}
        allowed = [ipaddress.ip_network(n) for n in env["GR_IP_ALLOWLIST"].split(",")]
        for pod_ip in ("10.244.1.7", "10.42.2.9", "192.168.33.4", "100.64.3.2"):
            assert any(ipaddress.ip_address(pod_ip) in net for net in allowed), (name, pod_ip)
        done = subprocess.run(["sh", str(DEPLOY / "components/group-replication/config/start.sh")], capture_output=True,
                              text=True, env={**env, "PATH": f"{tmp_path}:/usr/bin:/bin"}, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"--loose-group-replication-ip-allowlist={env['GR_IP_ALLOWLIST']}" in done.stdout.splitlines()
    done = subprocess.run(["sh", str(ROOT / "config/group-replication/start.sh")], capture_output=True, text=True,
                          env={"GR_NODE": "1", "GR_GROUP_NAME": "x", "PATH": f"{tmp_path}:/usr/bin:/bin"}, check=False)  # fmt: skip
    assert done.returncode == 0 and "allowlist" not in done.stdout  # compose: AUTOMATIC, one network


def test_the_controllers_readiness_probe_is_answered_as_the_kubelet_sends_it(app):
    """#38.8: an httpGet probe carries `Host: <pod IP>:<port>` unless its httpHeaders name one (the
    kubelet, pkg/probe/http/request.go); the API answers a Host that is not a name of the controller
    with 421, so the pod was never Ready. The probe is sent to the app as the kubelet would."""
    container = of_kind(render("base"), "Deployment")["controller"]["spec"]["template"]["spec"]["containers"][0]
    probe = container["readinessProbe"]["httpGet"]
    headers = {h["name"]: h["value"] for h in probe.get("httpHeaders", [])}
    host = headers.pop("Host", "10.244.1.7:8080")  # the pod's IP, as the kubelet fills it in
    answer = app.test_client().get(probe["path"], headers={**headers, "Host": host, "User-Agent": "kube-probe/1.33"})
    assert answer.status_code == 200, answer.get_json()


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_only_the_labs_own_pods_may_reach_the_controller(name):
    """#38.8: every pod of the cluster could shape, fault and run (the token is the only gate). A
    NetworkPolicy selects the controller's pods (their template's labels) and lets in the lab's own
    namespace only, on the API's port."""
    docs = render(name)
    (policy,) = of_kind(docs, "NetworkPolicy").values()
    pod = of_kind(docs, "Deployment")["controller"]["spec"]["template"]
    selected = policy["spec"]["podSelector"]["matchLabels"]
    assert selected.items() <= pod["metadata"]["labels"].items() and selected
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["metadata"]["namespace"] == "laglab"
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {}}]  # no namespaceSelector, no ipBlock: this namespace only
    (port,) = [p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]]
    assert rule["ports"] == [{"port": port, "protocol": "TCP"}]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_pod_requests_its_resources_and_runs_a_seccomp_filter(name):
    """#38.8: the databases were BestEffort (no requests: first evicted, scheduled anywhere) and the
    databases and the privileged shaper ran without a seccomp profile. Each container requests cpu and
    memory; each pod runs the container runtime's default filter (RuntimeDefault)."""
    for owner, pod in pod_templates(render(name)).items():
        profile = (pod.get("securityContext") or {}).get("seccompProfile") or {}
        assert profile.get("type") == "RuntimeDefault", owner
        for container in pod["containers"]:
            requests = (container.get("resources") or {}).get("requests") or {}
            assert {"cpu", "memory"} <= set(requests), (owner, container["name"])
