"""Partitions in the shaping manager: a 100 % loss per cut direction on top of a link's own shaping,
on both backends, persisted, healed back to exactly the shaping there was."""

import pytest

from laglab.errors import status_of
from laglab.shaping import backends
from laglab.shaping.manager import ShapingError
from laglab.shaping.params import parse_request
from laglab.shaping.plan import build, build_egress

from .test_manager import manager


def netem_of(ran, pid):
    return [argv for argv in ran if argv[1] == f"--target={pid}" and "netem" in argv]


def test_kernel_backend_cuts_one_way_with_a_full_loss_on_the_senders_egress(tmp_path):
    m = manager(backends.KernelBackend(), tmp_path)
    m.partition(["mysql-source"], ["mysql-target"], oneway=True)
    assert any("loss" in argv and argv[argv.index("loss") + 1] == "100%" for argv in netem_of(m.executor.ran, 1001))
    assert netem_of(m.executor.ran, 1002) == [], "oneway: the target still reaches the source"


def test_a_partition_adds_to_the_links_shaping_and_heal_gives_it_back(tmp_path):
    m = manager(backends.KernelBackend(), tmp_path)
    m.put("mysql-source", parse_request({"delay": "40ms", "peer": "mysql-target"}))
    made = m.partition(["mysql-source"], ["mysql-target"])
    (plan,) = [p for s, p in build_egress(m.desired.planned_entries(), {"mysql-source": "10.0.0.2", "mysql-target": "10.0.0.3"}).items() if s == "mysql-source"]  # fmt: skip
    link = plan.per_peer["10.0.0.3"]
    assert (link.delay, link.loss) == (0.04, 1.0), "the delay stays, the loss is total"
    assert [p.id for p in m.desired.partitions.values()] == [made.id]
    m.heal(made.id)
    assert m.desired.partitions == {}
    assert list(m.desired.entries) == [("mysql-source", "mysql-target")], "heal leaves the shaping there was"
    last = netem_of(m.executor.ran, 1001)[-1]
    assert "40ms" in last and "loss" not in last


def test_userspace_backend_drops_at_the_receiver_both_ways(tmp_path):
    m = manager(backends.UserspaceBackend(), tmp_path)
    m.partition(["mysql-source"], ["mysql-target"])
    plans = build(m.desired.planned_entries(), {"mysql-source": "10.0.0.2", "mysql-target": "10.0.0.3"})
    assert plans["mysql-target"].hold["10.0.0.2"].loss == 1.0
    assert plans["mysql-source"].hold["10.0.0.3"].loss == 1.0
    assert m.reconciler.applied["mysql-target"].plan.hold["10.0.0.2"].loss == 1.0, "and that is what was applied"


def test_partitions_are_saved_and_expire(tmp_path):
    m = manager(backends.UserspaceBackend(), tmp_path)
    made = m.partition(["mysql-source"], ["mysql-target"], duration=60)
    again = manager(backends.UserspaceBackend(), tmp_path)
    again.load()
    assert again.desired.partitions[made.id].pairs() == [
        ("mysql-source", "mysql-target"),
        ("mysql-target", "mysql-source"),
    ]
    assert again.desired.next_partition_id() == f"p{int(made.id[1:]) + 1}", "ids go on after a restart"


@pytest.mark.parametrize(
    ("a", "b", "status", "message"),
    [
        ([], ["mysql-target"], 422, "a: name at least one service"),
        (["mysql-source"], ["mysql-source"], 422, "b: mysql-source on both sides"),
        (["controller"], ["mysql-target"], 409, "a: controller is not shaped"),
        (["nobody"], ["mysql-target"], 404, "a: no service 'nobody' in this lab"),
    ],
)
def test_partition_refusals_name_the_field(tmp_path, a, b, status, message):
    m = manager(backends.KernelBackend(), tmp_path)
    with pytest.raises(ShapingError) as caught:
        m.partition(a, b)
    assert status_of(caught.value) == status
    assert caught.value.message.startswith(message)


def test_clear_heals_every_partition(tmp_path):
    m = manager(backends.KernelBackend(), tmp_path)
    m.partition(["mysql-source"], ["mysql-target"])
    m.clear()
    assert m.desired.partitions == {} and m.desired.planned_entries() == []


@pytest.mark.parametrize("backend", [backends.KernelBackend, lambda: backends.UserspaceBackend(python="python3")])
def test_a_ported_partition_cuts_only_those_ports_and_is_kept_across_a_restart(tmp_path, backend):
    """#40.1: `ports` on a partition: the block holds only those ports' packets (a u32 filter per port on
    the kernel backend, multiport on the userspace one), it says so, and a controller started again
    reloads it with its ports."""
    from laglab.shaping.desired import DesiredState
    from laglab.shaping.params import parse_ports

    m = manager(backend(), tmp_path)
    made = m.partition(["mysql-source"], ["mysql-target"], ports=parse_ports([3306], "tcp"))
    assert made.as_json()["ports"] == "3306/tcp"
    assert {e.ports.text() for e in m.desired.planned_entries()} == {"3306/tcp"}
    if m.backend.name == "userspace":  # its rules go to iptables-restore's stdin: what it writes, from the plan
        from laglab.shaping.userspace import receiver_rules

        plans = m.backend.plan(m.desired.planned_entries(), {"mysql-source": "10.0.0.2", "mysql-target": "10.0.0.3"})
        rules = receiver_rules("C", "br", plans["mysql-target"], 1)
        assert rules and all("-p tcp -m multiport --ports 3306 " in rule for rule in rules), rules
    else:
        ran = " ".join(" ".join(argv) for argv in m.executor.ran)
        assert "match ip dport 3306 0xffff" in ran and "match ip sport 3306 0xffff" in ran, ran[-2000:]
    again = DesiredState.load(m.state_path)
    assert again.partitions[made.id].ports.text() == "3306/tcp"


def test_a_ported_partition_on_a_link_shaped_on_other_ports_is_refused_naming_ports(tmp_path):
    from laglab.shaping.params import parse_ports

    m = manager(backends.KernelBackend(), tmp_path)
    m.put("mysql-source", parse_request({"delay": "40ms", "peer": "mysql-target", "ports": [4567]}))
    with pytest.raises(ShapingError) as caught:
        m.partition(["mysql-source"], ["mysql-target"], ports=parse_ports([3306]))
    assert status_of(caught.value) == 409 and caught.value.message.startswith("ports: "), caught.value.message
    assert m.desired.partitions == {}, "nothing half-made"
    made = m.partition(["mysql-source"], ["mysql-target"])  # a block of every packet covers a ported delay
    assert made.as_json()["ports"] is None


def test_a_partition_step_takes_ports_and_refuses_bad_ones_naming_the_key():
    from laglab.scenarios.plan import load_text
    from laglab.scenarios.schema.scenario import ScenarioError

    head = "name: t\nload: {duration: 60s}\ntimeline:\n  - {at: 1s, partition: {a: [x], b: [y], "
    (step,) = load_text(head + "ports: [3306], protocol: tcp}}\n").points[0].plan().timeline
    assert step.kind.describe() == "partition x <-> y on ports 3306/tcp"
    with pytest.raises(ScenarioError) as caught:
        load_text(head + "ports: [70000]}}\n")
    assert str(caught.value).startswith("timeline.0.partition"), str(caught.value)
    assert "ports" in str(caught.value)


def test_a_port_written_as_a_whole_float_is_that_port():
    """JSON has one number type: 3306.0 is schema-valid as an integer (the fuzzer sent 468.0; the API
    answered 400)."""
    from laglab.api.models import PartitionBody
    from laglab.shaping.matrix import Matrix

    assert PartitionBody.model_validate({"a": ["x"], "b": ["y"], "ports": [468.0, "4567-4568"]}).ports == [
        468,
        "4567-4568",
    ]
    matrix = Matrix.model_validate({"groups": {"a": ["x"], "b": ["y"]}, "ports": [3306.0]})
    assert matrix.ports == [3306]
    with pytest.raises(ValueError):
        PartitionBody.model_validate({"a": ["x"], "b": ["y"], "ports": [3306.5]})
    item = PartitionBody.model_json_schema()["properties"]["ports"]["anyOf"][0]["items"]["anyOf"][0]
    assert (item["minimum"], item["maximum"]) == (1, 65535), item  # the document says it (the fuzzer sent 0)
