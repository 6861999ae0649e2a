"""The desired state alone: its file round trip, what expires, what the backends get."""

from laglab.shaping.desired import BLOCK, DesiredState, Partition
from laglab.shaping.impairment import Impairment
from laglab.shaping.plan import Entry


def test_the_state_survives_its_file(tmp_path):
    state = DesiredState()
    entry = Entry("mysql-source", "mysql-target", "both", Impairment(delay=0.05, gemodel=(0.01, 0.2, 1.0, 0.0)), 9e9)
    state.entries[entry.key] = entry
    partition = Partition(state.next_partition_id(), ("mysql-source",), ("mysql-target",), oneway=True)
    state.partitions[partition.id] = partition
    state.save(tmp_path / "s.json")
    again = DesiredState.load(tmp_path / "s.json")
    assert again.entries == state.entries and again.partitions == state.partitions
    assert again.next_partition_id() == "p2"
    assert DesiredState.load(tmp_path / "none.json").entries == {}


def test_what_outlived_its_duration_goes_and_is_named():
    state = DesiredState()
    for entry in (
        Entry("a", None, "egress", Impairment(delay=0.01), 100.0),
        Entry("b", "a", "egress", Impairment(loss=0.1)),
    ):
        state.entries[entry.key] = entry
    state.partitions["p1"] = Partition("p1", ("a",), ("b",), expires_at=50.0)
    assert state.expire(now=120.0) == ["a -> all: duration over, cleared", "partition p1: duration over, healed"]
    assert list(state.entries) == [("b", "a")] and state.partitions == {}


def test_a_partition_is_a_block_per_cut_direction_on_top_of_the_entries():
    state = DesiredState()
    state.partitions["p1"] = Partition("p1", ("a",), ("b", "c"), oneway=True)
    assert [(e.service, e.peer, e.shaping) for e in state.planned_entries()] == [("a", "b", BLOCK), ("a", "c", BLOCK)]
