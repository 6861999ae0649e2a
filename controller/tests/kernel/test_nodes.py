"""The shaper DaemonSet's data path in User-mode Linux, with the kernel backend (netem on the sender's
pod): two "nodes" joined by VXLAN, the real node shaper on each, desired state from the ConfigMap the
controller's daemonset backend writes (tests/nodes.py; the userspace backend's run is on the host:
tests/integration/test_node_shaper.py)."""

from __future__ import annotations

import pytest

from ..nodes import TwoNodes, check_a_link_across_the_nodes, kernel_backend


@pytest.fixture(scope="module")
def nodes():
    two = TwoNodes("lgu")
    two.start_shapers(kernel_backend)
    yield two
    two.close()


def test_a_link_across_two_nodes_is_shaped_on_the_senders_pod_and_cleared(nodes, tmp_path):
    applied = check_a_link_across_the_nodes(nodes, tmp_path / "shaping.json")
    assert not applied["node-a"]["mysql-source"].plan.empty  # netem on the sender's pod (kernel backend)
