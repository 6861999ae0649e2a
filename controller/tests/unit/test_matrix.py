"""The delay matrix and the presets: bodies per member pair, region round trips from the table, what
is refused (naming the key), and the manager replacing one matrix by the next."""

import pytest
from pydantic import ValidationError

from laglab.scenarios.plan import load_text
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping import backends, presets
from laglab.shaping.matrix import Matrix, MatrixError
from laglab.shaping.params import Impairment, Request

from .test_manager import LAB, manager

THREE_SITES = {
    "groups": {"eu": ["galera-node1"], "us": ["galera-node2"], "ap": ["galera-node3"]},
    "regions": {"eu": "eu-west-1", "us": "us-east-1", "ap": "ap-southeast-1"},
}


def test_regions_give_every_pair_its_round_trip_half_each_way():
    m = Matrix.model_validate(THREE_SITES)
    bodies = dict(((s, b["peer"]), b["delay"]) for s, b in m.bodies())
    assert bodies == {
        ("galera-node1", "galera-node2"): "40.25ms",
        ("galera-node2", "galera-node1"): "40.25ms",
        ("galera-node1", "galera-node3"): "119.3ms",
        ("galera-node3", "galera-node1"): "119.3ms",
        ("galera-node2", "galera-node3"): "108.35ms",
        ("galera-node3", "galera-node2"): "108.35ms",
    }
    assert m.rtt_ms("galera-node3", "galera-node1") == 238.6


def test_an_explicit_link_wins_and_an_access_preset_is_asymmetric():
    m = Matrix.model_validate({**THREE_SITES, "links": [{"between": ["ap", "us"], "preset": "dsl"}]})
    bodies = {(s, b["peer"]): b for s, b in m.bodies()}
    assert bodies[("galera-node3", "galera-node2")] == {"peer": "galera-node2", "delay": "25ms", "rate": "384kbit"}
    assert bodies[("galera-node2", "galera-node3")]["rate"] == "1.5mbit", "down: to the access side"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"regions": {"eu": "eu-west-1", "us": "us-east-1", "ap": "mars-1"}}, "regions: no round trip between"),
        ({"regions": {"eu": "eu-west-1"}}, "regions: no region for group us"),
        ({"links": [{"between": ["eu", "moon"], "rtt": "5ms"}]}, "links.0.between: no group 'moon'"),
        ({"links": [{"between": ["eu", "us"]}]}, "links.0: give rtt or preset"),
        ({"groups": {"a": ["x"], "b": ["x"]}, "regions": None}, "groups.b: x is already in a"),
    ],
)
def test_refusals_name_the_key(change, message):
    with pytest.raises(MatrixError) as caught:
        Matrix.model_validate({**THREE_SITES, **change}).check()
    assert str(caught.value).startswith(message)


def test_the_schema_refuses_an_empty_group():
    with pytest.raises(ValidationError):
        Matrix.model_validate({"groups": {"a": [], "b": ["x"]}})


def test_every_preset_table_has_a_source_and_a_date():
    for table in presets.sources():
        assert table["source"] and table["date"], table
    assert presets.link("eu-west-1/us-east-1") == presets.link("us-east-1/eu-west-1") == {"rtt": "80.5ms"}


def test_a_scenario_preset_fills_the_link_and_its_own_keys_win():
    (point,) = load_text("name: t\nlink: {preset: lte, rtt: 20ms}\n").points
    assert point.plan().shaping == (
        ("mysql-source", Request(Impairment(delay=0.01, rate=12e6), peer="mysql-target")),
        ("mysql-target", Request(Impairment(delay=0.01, rate=12e6), peer="mysql-source")),
    )
    with pytest.raises(ScenarioError) as caught:
        load_text("name: t\nlink: {preset: moon}\n")
    assert str(caught.value).startswith("link.preset: no preset 'moon'")


def test_the_manager_replaces_one_matrix_by_the_next(tmp_path):
    m = manager(backends.KernelBackend(), tmp_path, LAB)
    first = Matrix.model_validate({"groups": {"a": ["mysql-source"], "b": ["mysql-target"]},
                                   "links": [{"between": ["a", "b"], "rtt": "80ms"}]})  # fmt: skip
    m.set_matrix(first)
    assert {k: e.shaping.delay for k, e in m.desired.entries.items()} == {
        ("mysql-source", "mysql-target"): 0.04,
        ("mysql-target", "mysql-source"): 0.04,
    }
    m.set_matrix(None)
    assert m.desired.entries == {} and m.desired.matrix is None


def test_the_document_refuses_the_group_names_the_server_refuses():
    """Fuzzer: a matrix group named "" was valid by the document and a 422 from the server. The
    document is checked with the JSON Schema validator schemathesis itself uses (jsonschema_rs)."""
    import jsonschema_rs
    from pydantic import ValidationError

    validator = jsonschema_rs.validator_for(Matrix.model_json_schema())
    body = {"groups": {"": ["mysql-source"], "b": ["mysql-target"]}}
    assert not validator.is_valid(body)
    with pytest.raises(ValidationError):
        Matrix.model_validate(body)
    assert validator.is_valid({"groups": {"eu": ["mysql-source"], "us-1": ["mysql-target"]}, "regions": {"eu": "x"}})


def test_a_matrixs_ports_hold_only_those_packets_and_a_link_may_name_its_own():
    """#40.1: `ports` on a matrix (every link) and on one of its links (over the matrix's)."""
    body = {**THREE_SITES, "ports": [4567, "4568"],
            "links": [{"between": ["eu", "us"], "rtt": "80ms", "ports": [3306], "protocol": "tcp"}]}  # fmt: skip
    requests = Matrix.model_validate(body).check().requests()
    ports = {(s, r.peer): r.ports.text() for s, r in requests}
    assert ports[("galera-node1", "galera-node2")] == "3306/tcp"
    assert ports[("galera-node1", "galera-node3")] == "4567,4568"
    assert dict(((s, b["peer"]), b.get("ports")) for s, b in Matrix.model_validate(body).bodies())[
        ("galera-node3", "galera-node2")] == "4567,4568"  # fmt: skip


def test_a_matrix_link_with_a_rate_and_ports_is_refused_naming_ports(tmp_path):
    from laglab.shaping.manager import ShapingError

    body = {"groups": {"a": ["mysql-source"], "b": ["mysql-target"]}, "ports": [3306],
            "links": [{"between": ["a", "b"], "rtt": "80ms", "rate": "2mbit"}]}  # fmt: skip
    m = manager(backends.KernelBackend(), tmp_path)
    with pytest.raises(ShapingError) as caught:
        m.set_matrix(Matrix.model_validate(body).check())
    assert caught.value.message.startswith("links: ports: the link a <-> b has a rate and ports"), caught.value.message


def test_a_matrix_is_refused_by_the_work_it_asks_before_any_of_it_is_built(client):
    """#54: a 15 KB PUT /api/matrix (16 groups of 64, every pair linked) built 983,040 link requests,
    14 s of the GIL, before any service was looked up: a few at once exhausted the controller's 1 GiB.
    The member pairs are counted first and refused naming the limit (CPU time: a busy host cannot
    make this fail, building them would)."""
    import time

    from laglab import limits

    groups = {f"g{i}": [f"s{i}-{j}" for j in range(64)] for i in range(16)}
    body = {"groups": groups, "regions": {g: f"r{i}" for i, g in enumerate(groups)}}
    started = time.process_time()
    # 120 pairs of groups x 64 x 64 members: 491,520 pairs, the 983,040 requests (one each way)
    with pytest.raises(MatrixError, match=r"^groups: 491520 member pairs to shape; at most \d+ \(limit matrix_pairs\)"):
        Matrix.model_validate(body).check()
    assert time.process_time() - started < 1.0
    answer = client.put("/api/matrix", json=body)
    assert answer.status_code == 422 and "limit matrix_pairs" in answer.get_json()["error"], answer.get_json()
    # within the limit it is as before: two groups of 32 are 1024 pairs
    small = {"groups": {"a": [f"a{j}" for j in range(32)], "b": [f"b{j}" for j in range(32)]},
             "links": [{"between": ["a", "b"], "rtt": "80ms"}]}  # fmt: skip
    assert len(Matrix.model_validate(small).check().requests()) == 2 * limits.MATRIX_PAIRS
