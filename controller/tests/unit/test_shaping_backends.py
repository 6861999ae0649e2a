"""Golden argv for both backends and the plan they are built from."""

import json
from pathlib import Path

from laglab.shaping import backends
from laglab.shaping.executor import Executor, in_netns
from laglab.shaping.impairment import Impairment
from laglab.shaping.plan import Entry, build
from laglab.shaping.userspace import chain_name, queue_numbers

IPS = {"mysql-source": "10.0.0.2", "mysql-target": "10.0.0.3", "loadgen": "10.0.0.4"}


def test_egress_delay_of_a_service_is_held_at_every_peer():
    plans = build([Entry("mysql-source", None, "egress", Impairment(delay=0.1))], IPS)
    assert plans["mysql-target"].hold == {"10.0.0.2": Impairment(delay=0.1)}
    assert plans["loadgen"].hold == {"10.0.0.2": Impairment(delay=0.1)}
    assert plans["mysql-source"].empty


def test_link_settings_and_ingress_add_up():
    entries = [
        Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.1, loss=0.1, rate=2e6)),
        Entry("mysql-target", None, "ingress", Impairment(delay=0.05)),
        Entry("mysql-target", "mysql-source", "both", Impairment(delay=0.01)),
    ]
    plans = build(entries, IPS)
    assert plans["mysql-target"].hold["10.0.0.2"].delay == 0.11  # link egress + target's link ingress
    assert plans["mysql-target"].hold["*"] == Impairment(delay=0.05)
    assert plans["mysql-source"].hold == {"10.0.0.3": Impairment(delay=0.01)}
    assert plans["mysql-source"].rates == {"10.0.0.3": 2e6}
    assert "10.0.0.2" not in plans["loadgen"].hold


def test_entries_for_absent_services_wait():
    assert build([Entry("mysql-source", "gone", "egress", Impairment(delay=0.1))], IPS)["mysql-source"].empty


def test_userspace_golden_chain_and_rules():
    plans = build(
        [Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.125, jitter=0.005, loss=0.005))], IPS
    )
    rules = backends.receiver_rules("LAGLAB-1", "br-lab0", plans["mysql-target"], 4242)
    assert backends.restore_input("LAGLAB-1", rules) == (
        "*raw\n:LAGLAB-1 - [0:0]\n"
        "-A LAGLAB-1 -s 10.0.0.2/32 -d 10.0.0.3/32 -i br-lab0 -j NFQUEUE --queue-num 4242 --queue-bypass\nCOMMIT\n"
    )
    ingress = build([Entry("mysql-target", None, "ingress", Impairment(delay=0.01))], IPS)["mysql-target"]
    assert backends.receiver_rules("LAGLAB-1", "br-lab0", ingress, 7) == [
        "-A LAGLAB-1 -d 10.0.0.3/32 -i br-lab0 -j NFQUEUE --queue-num 7 --queue-bypass"
    ]
    assert json.loads(backends.worker_rules(plans["mysql-target"])) == {
        "10.0.0.2": {"delay": 0.125, "jitter": 0.005, "loss": 0.005, "rate": None, "correlation": 0.0,
                     "distribution": None, "duplicate": 0.0, "corrupt": 0.0, "reorder": 0.0, "gemodel": None, "gap": 0}
    }  # fmt: skip


def test_userspace_golden_htb_per_peer():
    cmds = backends.htb_commands({None: 2e6, "10.0.0.3": 256e3})
    assert cmds[0] == ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10"]
    assert cmds[2] == ["tc", "class", "replace", "dev", "eth0", "parent", "1:1", "classid", "1:10", "htb",
                       "rate", "2mbit", "ceil", "2mbit", "burst", "15140", "cburst", "15140", "quantum", "1514"]  # fmt: skip
    assert cmds[4] == ["tc", "filter", "replace", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1",
                       "handle", "800::b", "u32", "match", "ip", "dst", "10.0.0.3/32", "flowid", "1:11"]  # fmt: skip


def test_userspace_refuses_what_it_cannot_honour():
    refuse = backends.UserspaceBackend.unsupported
    assert refuse(Entry("a", None, "ingress", Impairment(rate=1e6)))[0] == "rate"
    # netem's whole vocabulary: the worker does it all; only a rate on ingress stays refused
    assert refuse(Entry("a", None, "egress", Impairment(delay=0.1, corrupt=0.01, duplicate=0.01))) is None
    # netem's distributions, correlation and reorder: the worker does them too
    assert refuse(Entry("a", None, "egress", Impairment(delay=0.1, jitter=0.01, distribution="pareto"))) is None
    assert refuse(Entry("a", None, "egress", Impairment(delay=0.1, reorder=0.2, loss=0.1, correlation=0.5))) is None
    assert refuse(Entry("a", None, "both", Impairment(delay=0.1))) is None


def test_kernel_golden_netem_with_tbf_child():
    cmds = backends.KernelBackend().tc_commands(Impairment(delay=0.125, jitter=0.005, loss=0.005, rate=2e6), {})
    assert cmds == [
        ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "netem", "limit", "1000",
         "delay", "125ms", "5ms", "loss", "0.5%"],
        ["tc", "qdisc", "replace", "dev", "eth0", "parent", "1:1", "handle", "10:", "tbf",
         "rate", "2mbit", "burst", "15140", "limit", "60560"],
    ]  # fmt: skip


def test_kernel_netem_limit_grows_with_rate_times_delay():
    args = backends.KernelBackend.netem_args(Impairment(delay=0.5), 1e9)
    assert args[:3] == ["netem", "limit", "62500"]  # 1 gbit x 500 ms = 41 667 full frames, x 1.5


def test_kernel_golden_per_peer_htb_with_netem_leaves():
    cmds = backends.KernelBackend().tc_commands(None, {"10.0.0.3": Impairment(delay=0.1, rate=2e6)})
    assert cmds[-1] == [
        "tc",
        "qdisc",
        "replace",
        "dev",
        "eth0",
        "parent",
        "1:11",
        "handle",
        "11:",
        "netem",
        "limit",
        "1000",
        "delay",
        "100ms",
    ]
    assert ["tc", "filter", "replace", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "handle", "800::b",
            "u32", "match", "ip", "dst", "10.0.0.3/32", "flowid", "1:11"] in cmds  # fmt: skip


def test_kernel_backend_refuses_ingress():
    assert backends.KernelBackend.unsupported(Entry("a", None, "ingress", Impairment(delay=0.1)))[0] == "direction"


def test_executor_enters_the_namespace_with_argv_only():
    executor = Executor(dry_run=True)
    executor.run(["tc", "qdisc", "show"], netns_pid=4242)
    assert executor.ran == [["nsenter", "--target=4242", "--net", "--", "tc", "qdisc", "show"]]
    try:
        in_netns(1, ["true"])
    except ValueError as error:
        assert "not a container process id" in str(error)
    else:
        raise AssertionError("pid 1 must be refused")


def test_in_place_rate_change_uses_class_change():
    from laglab.shaping.plan import NamespacePlan

    executor = Executor(dry_run=True)
    backends.apply_userspace_tc(executor, 4242, NamespacePlan(rates={None: 5e6}), NamespacePlan(rates={None: 2e6}))
    assert all(cmd[4:7] == ["tc", "class", "change"] for cmd in executor.ran)
    executor.ran.clear()
    backends.apply_userspace_tc(
        executor, 4242, NamespacePlan(rates={"10.0.0.3": 5e6}), NamespacePlan(rates={None: 2e6})
    )
    assert executor.ran[0][4:] == ["tc", "qdisc", "del", "dev", "eth0", "root"]


def test_queue_numbers_are_stable_distinct_and_per_project():
    services = ["mysql-source", "mysql-target", "loadgen"]
    first = queue_numbers("laglab", services)
    assert first == queue_numbers("laglab", list(reversed(services)))  # the same after a restart
    assert len(set(first.values())) == 3 and all(1000 <= q < 61000 for q in first.values())
    assert first != queue_numbers("other", services)
    assert chain_name("laglab") != chain_name("other") and len(chain_name("laglab")) <= 28


def test_kernel_loss_takes_the_correlation_too():
    args = backends.KernelBackend.netem_args(Impairment(delay=0.05, jitter=0.01, loss=0.2, correlation=0.25), None)
    assert args[3:] == ["delay", "50ms", "10ms", "25%", "loss", "20%", "25%"]


def test_gemodel_maps_one_to_one_to_netems_words():
    from laglab.shaping.params import ParamError, parse_request

    simple = parse_request({"gemodel": {"p": "1%", "r": "25%"}, "peer": "mysql-target"}).shaping
    assert simple.gemodel == (0.01, 0.25, 1.0, 0.0)  # 1-h and 1-k: netem's defaults (Simple Gilbert)
    assert simple.to_json() == {"gemodel": {"p": "1%", "r": "25%", "1-h": "100%", "1-k": "0%"}}
    assert parse_request({"gemodel": {"p": "10%"}}).shaping.gemodel == (0.1, 0.9, 1.0, 0.0)  # Bernoulli: r = 1-p
    args = backends.KernelBackend.netem_args(Impairment(delay=0.01, gemodel=(0.01, 0.25, 0.9, 0.001)), None)
    assert args[5:] == ["loss", "gemodel", "1%", "25%", "90%", "0.1%"]
    for body, field in (({"gemodel": {"r": "5%"}}, "gemodel.p"), ({"gemodel": {"p": "1%", "h": "5%"}}, "gemodel.h"),
                        ({"gemodel": {"p": "1%"}, "loss": "1%"}, "gemodel")):  # fmt: skip
        try:
            parse_request(body)
        except ParamError as error:
            assert error.field == field, (body, error.field)
        else:
            raise AssertionError(f"{body} was accepted")
    assert backends.UserspaceBackend.unsupported(Entry("a", None, "egress", simple)) is None


def test_kernel_takes_the_correlation_and_gap_where_netem_does():
    args = backends.KernelBackend.netem_args(
        Impairment(delay=0.01, reorder=0.25, gap=5, duplicate=0.1, correlation=0.5), None
    )
    assert args[5:] == ["duplicate", "10%", "50%", "reorder", "25%", "50%", "gap", "5"]


def test_a_prepared_receiver_gets_its_worker_before_any_rule_and_keeps_it_idle(tmp_path):
    """A timeline prepares its links: the worker (a Python process, 150-300 ms to start) runs before the
    first step, so the step only writes rules to it; unprepared, an idle worker goes."""
    from laglab.shaping.params import parse_request

    from .test_manager import manager

    m = manager(backends.UserspaceBackend(), tmp_path)
    m.prepare(["mysql-target"])
    spawned = [argv for argv in m.executor.ran if "laglab.shaping.nfqueue" in argv]
    assert len(spawned) == 1 and "mysql-target" in m.backend.workers
    m.put("mysql-source", parse_request({"delay": "5ms", "peer": "mysql-target"}))
    m.put("mysql-source", parse_request({"delay": "6ms", "peer": "mysql-target"}))
    m.delete("mysql-source")
    assert len([argv for argv in m.executor.ran if "laglab.shaping.nfqueue" in argv]) == 1, "no second start"
    assert "mysql-target" in m.backend.workers, "kept, idle, while prepared"
    m.prepare(["mysql-target"], warm=False)
    assert "mysql-target" not in m.backend.workers
    kernel = manager(backends.KernelBackend(), tmp_path / "k")
    kernel.prepare(["mysql-target"])  # nothing to start
    assert kernel.executor.ran == []


def test_shaping_imports_without_the_controllers_web_stack():
    """The kernel suite runs the real manager and backends inside User-mode Linux, whose root has no
    Flask, pydantic or PyYAML (seen: a CI run whose guest failed to import the manager)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for name in ('flask', 'werkzeug', 'pydantic', 'yaml', 'docker'):\n"
        "    sys.modules[name] = None\n"
        "import laglab.shaping.manager, laglab.shaping.backends, laglab.shaping.userspace, laglab.platforms.docker\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_change_on_one_link_sends_nothing_to_the_other_receivers_workers(tmp_path):
    """Issue #22: every PUT rebuilt the rules of every worker, resetting every link's Gilbert-Elliott
    and correlation state. Only a worker whose rules changed gets a message."""
    from laglab.shaping.params import parse_request

    from .test_manager import manager

    m = manager(backends.UserspaceBackend(), tmp_path)
    m.put("mysql-source", parse_request({"gemodel": {"p": "5%", "r": "30%"}, "peer": "mysql-target"}))
    m.put("mysql-target", parse_request({"delay": "5ms", "peer": "mysql-source"}))
    target = m.backend.workers["mysql-target"][1].stdin
    before = target.getvalue()
    m.put("mysql-target", parse_request({"delay": "9ms", "peer": "mysql-source"}))  # another receiver's link
    assert target.getvalue() == before, "the mysql-target worker was not written to"
    assert '"delay": 0.009' in m.backend.workers["mysql-source"][1].stdin.getvalue()


def test_a_worker_keeps_the_state_of_the_rules_that_did_not_change():
    from laglab.shaping import nfqueue

    worker = nfqueue.Worker(1, connect=False)
    ge = {"gemodel": [0.05, 0.3, 1.0, 0.0], "correlation": 0.0}
    worker.set_rules({"10.0.0.2": ge, "10.0.0.4": {"delay": 0.005}})
    kept = worker.rules["10.0.0.2"]
    kept.bad = True  # the chain is in its bad state
    worker.set_rules({"10.0.0.2": ge, "10.0.0.4": {"delay": 0.009}})
    assert worker.rules["10.0.0.2"] is kept and kept.bad
    assert worker.rules["10.0.0.4"].delay == 0.009
    worker.set_rules({"10.0.0.2": {**ge, "gemodel": [0.1, 0.3, 1.0, 0.0]}})
    assert worker.rules["10.0.0.2"] is not kept and worker.rules["10.0.0.2"].bad is False


def test_after_a_change_a_new_packet_gets_the_new_delay_at_once_as_netem():
    """A lowered delay showed only once the packets held at the old one had gone (~40 ms for 60 -> 20):
    now, as netem, the next packet is held for the new delay and may overtake them."""
    from laglab.shaping import nfqueue

    worker = nfqueue.Worker(1, connect=False)
    worker.set_rules({"10.0.0.2": {"delay": 0.060}})
    worker.last_due["10.0.0.2"] = 100.060  # a packet that arrived at 100.0 is held until 100.060
    worker.set_rules({"10.0.0.2": {"delay": 0.060}})  # the same rule again: order kept
    assert worker.last_due["10.0.0.2"] == 100.060
    worker.set_rules({"10.0.0.2": {"delay": 0.020}})
    assert "10.0.0.2" not in worker.last_due  # a packet at 100.001 is due at 100.021, ahead of the held one


def test_the_kernel_backend_writes_no_empty_capability_and_the_userspace_one_has_them_all():
    from laglab.shaping.backend import Backend, Batching, Preparing, Seeding, Supervised

    kernel, userspace = backends.KernelBackend(), backends.UserspaceBackend()
    required = [n for n, v in vars(Backend).items() if callable(v) and not n.startswith("_")]
    assert all(callable(getattr(b, n, None)) for b in (kernel, userspace) for n in required)
    assert [isinstance(kernel, c) for c in (Batching, Preparing, Supervised)] == [False, False, False]
    assert [isinstance(userspace, c) for c in (Batching, Preparing, Supervised)] == [True, True, True]
    assert isinstance(kernel, Seeding) and isinstance(userspace, Seeding)  # #40: both seed their links


class SeedProbe(Executor):
    """tc as each version answers the seed probe (`tc -batch -`: add a seeded netem on lo, show it):
    iproute2 6.1 (this machine's and User-mode Linux's, run here) stops at the unknown word with
    'What is "seed"?' and its usage on stderr, exit 1; from iproute2 6.6 (netem_print_opt, François
    Michel's patch of 2023-08-22) `qdisc show` prints " seed %llu" after the loss, when the kernel
    kept TCA_NETEM_PRNG_SEED; a kernel before 6.6 drops the attribute and nothing is printed."""

    def __init__(self, answer: str):
        super().__init__(dry_run=False)
        self.answer, self.probes = answer, 0

    def run(self, argv, netns_pid=None, check=True, timeout=None, stdin=None):
        from laglab.shaping.executor import CommandError

        assert argv == ["unshare", "--net", "tc", "-batch", "-"] and "seed 1" in stdin
        self.probes += 1
        if self.answer == "tc-6.1":
            raise CommandError(argv, 1, 'What is "seed"?\nUsage: ... netem [ limit PACKETS ]\n')
        seed = " seed 1" if self.answer == "kernel-6.6" else ""
        return f"qdisc netem 8001: root refcnt 2 limit 1000 loss 1%{seed}\n"


def test_the_kernel_backend_seeds_netem_only_where_tc_and_the_kernel_keep_the_seed():
    entries = [Entry("mysql-source", "mysql-target", "egress", Impairment(loss=0.01))]
    for answer, said in (("tc-6.1", 'tc said: What is "seed"?'), ("kernel-6.1", "the kernel did not keep it")):
        kernel, probe = backends.KernelBackend(), SeedProbe(answer)
        note = kernel.seed(1234, probe)
        assert note.startswith("not seeded: this host's netem takes no seed") and said in note, note
        assert kernel.seed(99, probe) == note and probe.probes == 1  # asked once
        plan = kernel.plan(entries, IPS)["mysql-source"]
        assert plan.seeds == {} and "seed" not in kernel.tc_commands(None, plan.per_peer, seeds=plan.seeds)[-1]
    kernel = backends.KernelBackend()
    assert kernel.seed(1234, SeedProbe("kernel-6.6")) is None
    plan = kernel.plan(entries, IPS)["mysql-source"]
    leaf = kernel.tc_commands(plan.service_wide, plan.per_peer, seeds=plan.seeds)[-1]
    assert leaf[-2:] == ["seed", str(plan.seeds["10.0.0.3"])]
    assert kernel.seed(None, SeedProbe("kernel-6.6")) is None and kernel.plan(entries, IPS)["mysql-source"].seeds == {}


def test_a_seeded_userspace_plan_gives_each_link_its_own_seed_by_service_names():
    from laglab.shaping.plan import link_seed

    userspace = backends.UserspaceBackend()
    entries = [Entry("mysql-source", None, "egress", Impairment(loss=0.1))]
    assert userspace.seed(1234, Executor(dry_run=True)) is None
    plans = userspace.plan(entries, IPS)
    rules = json.loads(backends.worker_rules(plans["mysql-target"]))
    assert rules["10.0.0.2"]["seed"] == link_seed(1234, "mysql-target", "mysql-source")
    # Another address for the same services (a lab started again): the same seed.
    moved = {service: ip.replace("10.0.0.", "10.9.0.") for service, ip in IPS.items()}
    assert (
        json.loads(backends.worker_rules(userspace.plan(entries, moved)["mysql-target"]))["10.9.0.2"]["seed"]
        == (rules["10.0.0.2"]["seed"])
    )
    seeds = {json.loads(backends.worker_rules(p))[IPS["mysql-source"]]["seed"] for s, p in plans.items() if p.hold}
    assert len(seeds) == len([p for p in plans.values() if p.hold]) > 1  # each receiver's link its own
    userspace.seed(None, Executor(dry_run=True))
    assert "seed" not in json.loads(backends.worker_rules(userspace.plan(entries, IPS)["mysql-target"]))["10.0.0.2"]
