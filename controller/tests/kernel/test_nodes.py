"""The shaper DaemonSet's data path in User-mode Linux, with the kernel backend (netem on the sender's
pod): two "nodes" joined by VXLAN, the real node shaper on each, desired state from the ConfigMap the
controller's daemonset backend writes (tests/nodes.py; the userspace backend's run is on the host:
tests/integration/test_node_shaper.py)."""

from __future__ import annotations

import pytest

from laglab.shaping.params import parse_request

from ..nodes import TwoNodes, kernel_backend


@pytest.fixture(scope="module")
def nodes():
    two = TwoNodes("lgu")
    two.start_shapers(kernel_backend)
    yield two
    two.close()


def test_a_link_across_two_nodes_is_shaped_on_the_senders_pod_and_cleared(nodes, tmp_path):
    manager = nodes.controller(tmp_path / "shaping.json")
    try:
        before = nodes.ping("mysql-source", "mysql-target")
        assert before["received"] == 20 and before["median"] < 5, before["output"][-300:]
        manager.put("mysql-source", parse_request({"delay": "60ms", "peer": "mysql-target"}))
        got = nodes.ping("mysql-source", "mysql-target")
        assert got["received"] == 20 and abs(got["median"] - 60) <= 4, got["output"][-300:]
        assert nodes.ping("loadgen", "mysql-target")["median"] < 5
        assert nodes.ping("mysql-source", "loadgen")["median"] < 5
        # netem sits on the sender's pod (node-a's shaper); node-b's shaper holds nothing for it.
        statuses = {s.platform.node: s.reconciler.applied for s in nodes.shapers}
        assert not statuses["node-a"]["mysql-source"].plan.empty
        manager.clear()
        after = nodes.ping("mysql-source", "mysql-target")
        assert after["received"] == 20 and after["median"] < 5
    finally:
        manager.stop(clear_kernel=False)
        manager.platform.unwatch()
