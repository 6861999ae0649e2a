"""deploy/kubernetes, offline (issue #23; no API server can run on this project's machines): each
kustomization rendered by kubectl's kustomize, the output validated strictly against the schemas of
Kubernetes 1.30 to 1.37 (kubernetes-validate), and what the schemas cannot say checked here: the
controller holds no host privileges and only namespaced rights, databases spread over nodes, a Pod
Security level is stated, the configuration copies match the files compose.yaml mounts.
`make test` installs kubectl (scripts/setup-host kubectl) and kubernetes-validate (requirements-dev)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy" / "kubernetes"
KUSTOMIZATIONS = ["base", "overlays/chaos-mesh"]
VERSIONS = [f"1.{minor}" for minor in range(30, 38)]


def kubectl() -> str:
    found = shutil.which("kubectl") or (ROOT / ".cache/bin/kubectl")
    assert Path(found).exists(), "no kubectl: scripts/setup-host kubectl installs Debian unstable's into .cache/bin"
    return str(found)


def render(name: str) -> list[dict]:
    done = subprocess.run([kubectl(), "kustomize", str(DEPLOY / name)], capture_output=True, text=True, check=False)
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
    assert chaos == [{"apiGroups": ["chaos-mesh.org"], "resources": ["networkchaos", "podchaos"],
                      "verbs": ["get", "list", "watch", "create", "delete"]}]  # fmt: skip
    env = of_kind(render("overlays/chaos-mesh"), "Deployment")["controller"]["spec"]["template"]["spec"]
    assert {"name": "SHAPING_BACKEND", "value": "chaos-mesh"} in env["containers"][0]["env"]
    base_rules = of_kind(render("base"), "Role")["laglab-controller"]["rules"]
    assert not any(r["apiGroups"] == ["chaos-mesh.org"] for r in base_rules)


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
    copies = DEPLOY / "base" / "config"
    for copy, original in (("source.cnf", "config/mysql/source.cnf"), ("target.cnf", "config/mysql/target.cnf"),
                           ("db-health.sh", "config/db-health.sh")):  # fmt: skip
        assert (copies / copy).read_text() == (ROOT / original).read_text(), f"{copy} differs from {original}"
