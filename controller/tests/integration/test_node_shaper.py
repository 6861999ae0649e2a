"""The shaper DaemonSet's data path on this host's kernel (userspace backend: no sch_netem here): two
"nodes" joined by VXLAN, a pod on each side, the real node shaper on each node taking its desired
state from the ConfigMap the controller's daemonset backend writes (tests/nodes.py). Needs no lab."""

from __future__ import annotations

import pytest

from laglab.shaping.params import parse_request

from ..nodes import TwoNodes, userspace_backend


@pytest.fixture(scope="module")
def nodes():
    two = TwoNodes("lgt")
    two.start_shapers(userspace_backend)
    yield two
    two.close()


def test_a_link_across_two_nodes_is_held_on_the_receivers_node_and_cleared(nodes, tmp_path):
    manager = nodes.controller(tmp_path / "shaping.json")
    try:
        before = nodes.ping("mysql-source", "mysql-target")
        assert before["received"] == 20 and before["median"] < 5, before["output"][-300:]
        manager.put("mysql-source", parse_request({"delay": "60ms", "peer": "mysql-target"}))
        got = nodes.ping("mysql-source", "mysql-target")
        assert got["received"] == 20 and abs(got["median"] - 60) <= 4, got["output"][-300:]
        # Only that link: a pod on the source's node to the same receiver, and the two pods of node-a.
        assert nodes.ping("loadgen", "mysql-target")["median"] < 5
        assert nodes.ping("mysql-source", "loadgen")["median"] < 5
        # The receiver's node holds it (the userspace backend); the sender's has nothing to do.
        statuses = {s.platform.node: s.reconciler.applied for s in nodes.shapers}
        assert not statuses["node-b"]["mysql-target"].plan.empty
        manager.clear()
        after = nodes.ping("mysql-source", "mysql-target")
        assert after["received"] == 20 and after["median"] < 5
    finally:
        manager.stop(clear_kernel=False)
        manager.platform.unwatch()
