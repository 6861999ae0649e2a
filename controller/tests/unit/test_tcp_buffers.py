"""TCP buffers (laglab/shaping/tcp_buffers.py): the values as sysctl writes them, the exact commands the
controller runs in a container's network namespace, and a run's part: set for the points, read back
into each point, put back after."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from laglab.config import ConfigError, _tcp_buffer
from laglab.platforms.base import LabContainer, Unsupported
from laglab.scenarios.plan import load_text
from laglab.scenarios.schema.scenario import ScenarioError
from laglab.shaping import tcp_buffers


def test_values_are_three_sizes_as_sysctl_writes_them():
    assert tcp_buffers.parse("wmem", "4096 16384 64MiB") == (4096, 16384, 64 * 2**20)
    assert tcp_buffers.parse("rmem", "4k 128KiB 6M") == (4096, 131072, 6 * 2**20)
    with pytest.raises(tcp_buffers.BufferError, match="wmem: '4096 16384' is not three sizes"):
        tcp_buffers.parse("wmem", "4096 16384")
    with pytest.raises(tcp_buffers.BufferError, match="need 0 < min <= default <= max"):
        tcp_buffers.parse("wmem", "4096 16384 3GiB")
    assert _tcp_buffer("LAB_TCP_WMEM", "4096 16384 64MiB") == "4096 16384 67108864" and _tcp_buffer("X", " ") == ""
    with pytest.raises(ConfigError, match="LAB_TCP_RMEM: 'lots' is not three sizes"):
        _tcp_buffer("LAB_TCP_RMEM", "lots")


def test_the_write_is_sysctls_arguments_in_a_mount_namespace_of_its_own():
    argv = tcp_buffers.write_argv({"wmem": (4096, 16384, 67108864), "rmem": (4096, 131072, 67108864)})
    assert argv == [
        "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
        'mount -o remount,rw,bind /proc/sys /proc/sys && exec sysctl -q -w "$@"', "sh",
        "net.ipv4.tcp_wmem=4096 16384 67108864", "net.ipv4.tcp_rmem=4096 131072 67108864",
    ]  # fmt: skip
    assert tcp_buffers.parse_read("4096\t16384\t4194304\n4096\t131072\t33554432\n") == {
        "wmem": "4096 16384 4194304", "rmem": "4096 131072 33554432"}  # fmt: skip


class FakeExecutor:
    """A namespace per pid holding the two sysctls: `cat` reads them, the write sets them (as the
    kernel does: only in that namespace)."""

    def __init__(self, pids):
        self.values = {pid: {"wmem": "4096 16384 4194304", "rmem": "4096 131072 33554432"} for pid in pids}
        self.ran = []

    def run(self, argv, netns_pid=None, **_kw):
        self.ran.append((netns_pid, argv))
        if argv == tcp_buffers.read_argv():
            v = self.values[netns_pid]
            return f"{v['wmem'].replace(' ', chr(9))}\n{v['rmem'].replace(' ', chr(9))}\n"
        for setting in argv[9:]:
            key, value = setting.split("=")
            self.values[netns_pid][{"net.ipv4.tcp_wmem": "wmem", "net.ipv4.tcp_rmem": "rmem"}[key]] = value
        return ""


def lab(entered=True):
    pids = {"mysql-source": 101, "mysql-target": 102, "loadgen": 103, "controller": 104}
    found = {s: LabContainer(s, f"laglab-{s}-1", s, pid if entered else 0, "172.18.0.2", True,
                             shapeable=s not in ("controller", "loadgen"), entered=entered)
             for s, pid in pids.items()}  # fmt: skip
    platform = SimpleNamespace(list=lambda max_age=0.0: found, running=lambda *s, hint="": [found[x] for x in s])
    return SimpleNamespace(platform=platform, executor=FakeExecutor(pids.values()))


SCENARIO = "name: x\ntcp_buffers: {wmem: 4096 16384 64MiB, services: [mysql-source]}\n"


def test_a_run_sets_them_where_asked_records_them_and_puts_them_back(scenario_runs):
    the_lab = lab()
    run = scenario_runs(load_text(SCENARIO), the_lab, SCENARIO)
    recorded = run._buffers.set_for(run.plan.points[0].plan().buffers, run._check)
    assert the_lab.executor.values[101]["wmem"] == "4096 16384 67108864"  # only mysql-source's namespace
    assert the_lab.executor.values[102]["wmem"] == "4096 16384 4194304"
    assert recorded == {  # the link's two ends and the load generator, read back
        "loadgen": {"wmem": "4096 16384 4194304", "rmem": "4096 131072 33554432"},
        "mysql-source": {"wmem": "4096 16384 67108864", "rmem": "4096 131072 33554432"},
        "mysql-target": {"wmem": "4096 16384 4194304", "rmem": "4096 131072 33554432"},
    }
    run._buffers.set_for(
        run.plan.points[0].plan().buffers, run._check
    )  # a second point: what was there before the run is kept
    run._buffers.restore()
    assert the_lab.executor.values[101] == {"wmem": "4096 16384 4194304", "rmem": "4096 131072 33554432"}
    assert not run._buffers.before


def test_without_the_knob_they_are_only_read(scenario_runs):
    the_lab = lab()
    run = scenario_runs(load_text("name: x\n"), the_lab)
    assert set(run._buffers.set_for(run.plan.points[0].plan().buffers, run._check)) == {
        "mysql-source",
        "mysql-target",
        "loadgen",
    }
    assert all(argv == tcp_buffers.read_argv() for _pid, argv in the_lab.executor.ran)


def test_where_the_controller_enters_no_namespace_the_knob_is_refused_naming_it(scenario_runs):
    run = scenario_runs(load_text(SCENARIO), lab(entered=False), SCENARIO)
    with pytest.raises(Unsupported, match=r"^tcp_buffers: set only where the controller enters the containers"):
        run._buffers.set_for(run.plan.points[0].plan().buffers, run._check)


def test_the_controllers_own_namespace_is_never_tuned(scenario_runs):
    """#35.5: the controller's namespace holds the shaping and the measurements; a scenario's
    tcp_buffers.services may name the servers and loadgen, not it."""
    text = "name: x\ntcp_buffers: {wmem: 4096 16384 64MiB, services: [controller]}\n"
    the_lab = lab()
    run = scenario_runs(load_text(text), the_lab, text)
    with pytest.raises(Unsupported, match=r"^tcp_buffers.services: controller is the lab's apparatus"):
        run._buffers.set_for(run.plan.points[0].plan().buffers, run._check)
    assert the_lab.executor.values[104]["wmem"] == "4096 16384 4194304"


def test_they_sweep():
    plan = load_text("name: x\nsweep:\n  tcp_buffers.wmem: [4096 16384 4MiB, 4096 16384 64MiB]\n")
    assert [p.scenario.tcp_buffers.values()["wmem"][2] for p in plan.points] == [4 * 2**20, 64 * 2**20]
    with pytest.raises(ScenarioError, match=r"tcp_buffers\.services: List should have at least 1 item"):
        load_text("name: x\ntcp_buffers: {services: []}\n")
