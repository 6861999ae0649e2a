"""Every NetworkChaos and PodChaos object the controller would create for the shipped scenarios (their
points' links, their timelines' shaping steps, trace rows and faults), validated offline (issue #23):
against Chaos Mesh's CRD schemas (fixtures/chaos-mesh, copied unchanged from chaos-mesh/chaos-mesh),
and against what only its admission webhook checks (a `from`/`both` direction needs a target,
externalTargets only with `to`, a spec is never updated: one object per link and direction)."""

from pathlib import Path

import jsonschema
import pytest
import yaml

from laglab.errors import status_of
from laglab.platforms import pod_chaos
from laglab.scenarios.plan import load_text
from laglab.scenarios.steps.target import Target
from laglab.shaping import chaos_mesh
from laglab.shaping.impairment import Impairment
from laglab.shaping.params import Direction, Request, ShapingError, parse_request

from . import chaos_mesh_admission as admission

ROOT = Path(__file__).resolve().parents[3]
CRDS = Path(__file__).parent / "fixtures" / "chaos-mesh"
NAMESPACE = "laglab"


def validator(kind: str) -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((CRDS / f"chaos-mesh.org_{kind.lower()}.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    # Draft 7 ignores the keywords it does not know (x-kubernetes-*, nullable); we never send a null.
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


VALIDATORS = {"NetworkChaos": validator("NetworkChaos"), "PodChaos": validator("PodChaos")}


def check(obj: dict) -> dict:
    errors = sorted(VALIDATORS[obj["kind"]].iter_errors(obj), key=str)
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors]
    spec = obj["spec"]
    if obj["kind"] == "NetworkChaos":  # the webhooks' rules (chaos_mesh_admission.py, from their source)
        stored, denied = admission.admit(obj)
        assert denied is None, denied
        assert stored == obj, "what the webhook and the API server default is already written (converge compares)"
        assert spec["action"] != "bandwidth" or not ({"delay", "loss", "duplicate", "corrupt"} & set(spec)), spec
    name = obj["metadata"]["name"]
    assert len(name) <= 63 and name == name.lower() and not name.endswith("-"), name
    return obj


def scenario_objects(path: Path) -> tuple[list[dict], list[str]]:
    """What the controller would create for one scenario file, and the refusals (field: message)."""
    plan = load_text(path.read_text(), source=path.name, base_dir=path.parent)
    made, refused = [], []

    def shaping(service: str, request: Request) -> None:
        try:
            made.append(check(chaos_mesh.network_chaos(NAMESPACE, service, request)))
        except ShapingError as error:
            refused.append(error.message)

    for point in plan.points:
        for service, request in point.plan().shaping:
            shaping(service, request)
        for step in point.scenario.timeline:
            kind = step.kind
            if getattr(kind, "_impairment", None) is not None and hasattr(kind, "requests_of"):
                for service, request in kind.requests_of(kind._impairment):
                    shaping(service, request)
            for row in getattr(kind, "rows", None) or []:
                if row._impairment is not None:
                    for service, request in Target(link=kind.link).requests_of(row._impairment):
                        shaping(service, request)
            if step.action == "partition":
                made.append(check(chaos_mesh.partition_chaos(NAMESPACE, f"p{len(made)}", kind.a, kind.b, kind.oneway)))
            if step.action == "fault" and kind.action in pod_chaos.POD_ACTIONS:
                made.append(check(pod_chaos.pod_chaos(NAMESPACE, kind.service, kind.action, "mysql", step.duration)))
    return made, refused


SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_object_of_a_shipped_scenario_is_valid_for_chaos_mesh(path):
    made, refused = scenario_objects(path)
    for message in refused:  # what NetworkChaos cannot say is refused naming the field
        assert message.split(":")[0] in ("distribution", "gemodel", "direction"), message
    names = [(o["kind"], o["metadata"]["name"], o["spec"].get("direction")) for o in made]
    assert len(set(names)) == len({(k, n) for k, n, _ in names}), "one name, one link and direction"


def test_the_shipped_scenarios_do_make_objects():
    made = [o for path in SCENARIOS for o in scenario_objects(path)[0]]
    kinds = {(o["kind"], o["spec"]["action"]) for o in made}
    assert {("NetworkChaos", "netem"), ("NetworkChaos", "partition"), ("PodChaos", "container-kill")} <= kinds
    assert len(made) > 20


def test_a_link_maps_netem_field_by_field():
    request = parse_request({"delay": "100ms", "jitter": "5ms", "correlation": "25%", "loss": "1%", "rate": "2mbit",
                             "duplicate": "0.5%", "corrupt": "0.1%", "reorder": "10%", "gap": 5, "peer": "mysql-target"})  # fmt: skip
    obj = check(chaos_mesh.network_chaos(NAMESPACE, "mysql-source", request))
    assert obj["spec"] == {
        "action": "netem",
        "mode": "all",
        "selector": {"namespaces": ["laglab"], "labelSelectors": {"app.kubernetes.io/name": "mysql-source"}},
        "direction": "to",
        "target": {"mode": "all", "selector": {"namespaces": ["laglab"], "labelSelectors": {"app.kubernetes.io/name": "mysql-target"}}},
        "delay": {"latency": "100ms", "jitter": "5ms", "correlation": "25", "reorder": {"reorder": "10", "correlation": "25", "gap": 5}},
        "loss": {"loss": "1", "correlation": "25"},
        "duplicate": {"duplicate": "0.5", "correlation": "25"},
        "corrupt": {"corrupt": "0.1", "correlation": "25"},
        "rate": {"rate": "2mbit"},
    }  # fmt: skip
    assert obj["metadata"]["name"] == "laglab-mysql-source-to-mysql-target"


def test_a_change_is_the_same_object_name_so_it_is_deleted_and_created_not_updated():
    """The webhook refuses any update of a spec: the platform deletes the object of that name, waits
    for AllRecovered, and creates it again. So a link's name never depends on its values."""
    one = chaos_mesh.network_chaos(NAMESPACE, "mysql-source", parse_request({"delay": "10ms", "peer": "loadgen"}))
    two = chaos_mesh.network_chaos(NAMESPACE, "mysql-source", parse_request({"delay": "90ms", "peer": "loadgen"}))
    other = chaos_mesh.network_chaos(NAMESPACE, "mysql-source", parse_request({"delay": "90ms"}))
    assert one["metadata"]["name"] == two["metadata"]["name"] != other["metadata"]["name"]
    assert one["spec"] != two["spec"]


def test_what_networkchaos_cannot_say_is_refused_naming_the_field():
    for body, field in (({"delay": "40ms", "jitter": "8ms", "distribution": "pareto"}, "distribution"),
                        ({"gemodel": {"p": "1%"}}, "gemodel")):  # fmt: skip
        with pytest.raises(ShapingError) as caught:
            chaos_mesh.network_chaos(NAMESPACE, "mysql-source", parse_request(body))
        assert caught.value.message.startswith(f"{field}:") and status_of(caught.value) == 422
    ingress = Request(Impairment(delay=0.05), direction=Direction.INGRESS)
    with pytest.raises(ShapingError, match="direction: Chaos Mesh shapes what a pod receives only from a named peer"):
        chaos_mesh.network_chaos(NAMESPACE, "mysql-target", ingress)
    from_peer = check(
        chaos_mesh.network_chaos(
            NAMESPACE, "mysql-target", Request(Impairment(delay=0.05), "mysql-source", Direction.INGRESS)
        )
    )
    # #38.5: what mysql-source sends mysql-target, on mysql-source (where Chaos Mesh puts `from` rules)
    assert from_peer["metadata"]["name"] == "laglab-mysql-source-to-mysql-target"
    assert from_peer["spec"]["direction"] == "to" and from_peer["spec"]["target"]["selector"]["labelSelectors"] == {
        "app.kubernetes.io/name": "mysql-target"}  # fmt: skip


def test_the_apparatus_is_never_shaped():
    with pytest.raises(ShapingError) as caught:
        chaos_mesh.network_chaos(
            NAMESPACE, "controller", parse_request({"delay": "1ms"}), never=frozenset({"controller"})
        )
    assert status_of(caught.value) == 409


def test_partitions_and_faults():
    cut = check(
        chaos_mesh.partition_chaos(NAMESPACE, "p1", ["mysql-source"], ["mysql-target", "loadgen"], oneway=False)
    )
    assert cut["spec"]["action"] == "partition" and cut["spec"]["direction"] == "both"
    assert cut["spec"]["target"]["selector"]["expressionSelectors"][0]["values"] == ["loadgen", "mysql-target"]
    assert check(chaos_mesh.partition_chaos(NAMESPACE, "p2", ["a"], ["b"], oneway=True))["spec"]["direction"] == "to"
    kill = check(pod_chaos.pod_chaos(NAMESPACE, "mysql-target", "kill", "mysql"))
    assert kill["spec"]["action"] == "container-kill" and kill["spec"]["containerNames"] == ["mysql"]
    stop = check(pod_chaos.pod_chaos(NAMESPACE, "mysql-target", "stop", "mysql", seconds=20))
    assert stop["spec"] == {**stop["spec"], "action": "pod-failure", "duration": "20000ms"}
    with pytest.raises(ShapingError, match="action: pause has no PodChaos"):
        pod_chaos.pod_chaos(NAMESPACE, "mysql-target", "pause", "mysql")


def test_the_schemas_catch_what_they_should():
    """The check above can fail: a value the schema refuses is reported."""
    obj = chaos_mesh.network_chaos(NAMESPACE, "mysql-source", parse_request({"delay": "10ms"}))
    obj["spec"]["delay"]["latency"] = "10 milliseconds"
    with pytest.raises(AssertionError, match="latency"):
        check(obj)
    obj = chaos_mesh.network_chaos(NAMESPACE, "mysql-source", parse_request({"delay": "10ms"}))
    obj["spec"]["direction"] = "both"
    with pytest.raises(AssertionError):
        check(obj)  # both without a target: the webhook's rule
