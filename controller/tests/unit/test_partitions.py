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
