"""The shaper DaemonSet's data path on this host's kernel (userspace backend: no sch_netem here): two
"nodes" joined by VXLAN, a pod on each side, the real node shaper on each node taking its desired
state from the ConfigMap the controller's daemonset backend writes (tests/nodes.py). Needs no lab."""

from __future__ import annotations

import pytest

from ..nodes import TwoNodes, check_a_link_across_the_nodes, userspace_backend


@pytest.fixture(scope="module")
def nodes():
    two = TwoNodes("lgt")
    two.start_shapers(userspace_backend)
    yield two
    two.close()


def test_a_link_across_two_nodes_is_held_on_the_receivers_node_and_cleared(nodes, tmp_path):
    applied = check_a_link_across_the_nodes(nodes, tmp_path / "shaping.json")
    assert not applied["node-b"]["mysql-target"].plan.empty  # the receiver's node holds it (userspace backend)
