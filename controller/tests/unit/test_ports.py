"""#40.1 rules per port: parsing, each backend's rules, and what two entries on one link may ask."""

import pytest

from laglab.errors import Kind
from laglab.shaping import backends
from laglab.shaping.chaos_mesh import ChaosMeshBackend
from laglab.shaping.impairment import Impairment
from laglab.shaping.params import ParamError, ShapingError, parse_ports, parse_request
from laglab.shaping.plan import Entry, build, build_egress
from laglab.shaping.ports import ALL, Ports

IPS = {"mysql-source": "10.0.0.2", "mysql-target": "10.0.0.3", "loadgen": "10.0.0.4"}
BINLOG = Ports(((3306, 3306),))


def test_ports_are_read_as_a_list_or_words_with_ranges():
    assert parse_ports([3306, "4567-4568"]) == Ports(((3306, 3306), (4567, 4568)))
    assert parse_ports("4444,4567-4568,4567-4568", "tcp") == Ports(((4444, 4444), (4567, 4568)), "tcp")
    assert parse_ports(None) == ALL and not ALL
    ports = parse_ports([3306, "4567-4568"], "udp")
    assert (ports.text(), ports.multiport(), ports.numbers) == (
        "3306,4567-4568/udp",
        "3306,4567:4568",
        [3306, 4567, 4568],
    )


@pytest.mark.parametrize(
    "ports, protocol, field, kind",
    [
        ([0], None, "ports", Kind.INVALID), ([65536], None, "ports", Kind.INVALID), (["4568-4567"], None, "ports", Kind.INVALID),
        ([True], None, "ports", Kind.MALFORMED), (["33o6"], None, "ports", Kind.MALFORMED), ([], None, "ports", Kind.MALFORMED),
        ({"a": 1}, None, "ports", Kind.MALFORMED), (list(range(1, 17)), None, "ports", Kind.INVALID),
        ([f"{p}-{p + 1}" for p in range(1000, 1016, 2)], None, "ports", Kind.INVALID),  # 8 ranges: 16 slots
        ([3306], "sctp", "protocol", Kind.MALFORMED), (None, "tcp", "protocol", Kind.INVALID),
    ],
)  # fmt: skip
def test_ports_that_iptables_multiport_cannot_take_are_refused_naming_the_field(ports, protocol, field, kind):
    with pytest.raises(ParamError) as refused:
        parse_ports(ports, protocol)
    assert (refused.value.field, refused.value.kind) == (field, kind)


def test_a_request_with_ports_and_a_rate_is_refused():
    assert parse_request({"delay": "100ms", "ports": [3306]}).ports == BINLOG
    with pytest.raises(ParamError, match=r"^ports: a rate shapes every packet of the link"):
        parse_request({"rate": "2mbit", "ports": [3306]})


def test_userspace_queues_only_the_ports_packets_with_multiport():
    entries = [
        Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.1), ports=parse_ports([3306, "4567-4568"]))
    ]
    plan = build(entries, IPS)["mysql-target"]
    assert backends.receiver_rules("LAGLAB-1", "br-lab0", plan, 7) == [
        f"-A LAGLAB-1 -s 10.0.0.2/32 -d 10.0.0.3/32 -i br-lab0 -p {p} -m multiport --ports 3306,4567:4568 "
        "-j NFQUEUE --queue-num 7 --queue-bypass"
        for p in ("tcp", "udp")
    ]
    whole = build([Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.1))], IPS)["mysql-target"]
    assert backends.receiver_rules("LAGLAB-1", "br-lab0", whole, 7) == [
        "-A LAGLAB-1 -s 10.0.0.2/32 -d 10.0.0.3/32 -i br-lab0 -j NFQUEUE --queue-num 7 --queue-bypass"
    ]  # unchanged without ports


def test_the_kernel_backend_filters_each_port_both_ways_into_the_peers_class():
    kernel = backends.KernelBackend()
    entries = [
        Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.1), ports=Ports(((3306, 3306),), "tcp"))
    ]
    plan = kernel.plan(entries, IPS)["mysql-source"]
    filters = [c for c in kernel.tc_commands(plan.service_wide, plan.per_peer, ported=plan.ports) if c[1] == "filter"]
    assert [f[f.index("handle") + 1] for f in filters] == ["800::580", "800::581"]  # node ids 11 << 7, + 1
    assert filters[0][filters[0].index("u32") :] == [
        "u32", "match", "ip", "dst", "10.0.0.3/32", "match", "ip", "protocol", "6", "0xff",
        "match", "ip", "sport", "3306", "0xffff", "flowid", "1:11",
    ]  # fmt: skip
    assert filters[1][-5:-3] == ["dport", "3306"]
    # Another selection of ports is another layout: the peer's old filters do not stay.
    other = Ports(((3307, 3307),), "tcp")
    assert kernel.layout(None, plan.per_peer, plan.ports) != kernel.layout(None, plan.per_peer, {"10.0.0.3": other})


@pytest.mark.parametrize(
    "entry, field",
    [
        (Entry("mysql-source", None, "egress", Impairment(delay=0.1), ports=BINLOG), "ports"),
        (Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.1), ports=Ports(((1000, 1040),))), "ports"),
    ],
)
def test_what_the_kernel_backend_cannot_filter_is_refused_naming_ports(entry, field):
    assert backends.KernelBackend.unsupported(entry)[0] == field


def test_chaos_mesh_refuses_ports_its_crd_cannot_say():
    entry = Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.1), ports=BINLOG)
    field, text = ChaosMeshBackend().unsupported(entry)
    assert field == "ports" and "not ports" in text


def test_a_partition_covers_a_ported_link_and_two_selections_on_one_link_conflict():
    block = Entry("mysql-source", "mysql-target", "egress", Impairment(loss=1.0))
    ported = Entry("mysql-source", "mysql-target", "egress", Impairment(delay=0.1), ports=BINLOG)
    for plan_of in (lambda e: build(e, IPS)["mysql-target"], lambda e: build_egress(e, IPS)["mysql-source"]):
        plan = plan_of([ported, block])
        assert plan.ports == {}  # every packet lost, whatever its port
    with pytest.raises(ShapingError) as conflict:
        build([ported, Entry("mysql-target", "mysql-source", "ingress", Impairment(delay=0.01))], IPS)
    assert conflict.value.kind is Kind.CONFLICT and conflict.value.message.startswith("ports: the link with 10.0.0.2")


def test_a_scenarios_link_takes_ports_and_replication_is_the_kinds_own():
    from laglab.scenarios.plan import load_text
    from laglab.scenarios.schema.scenario import ScenarioError

    plan = load_text("name: p\nlink: {rtt: 180ms, ports: [3306, '4567-4568'], protocol: tcp}\n")
    (_, first), (_, second) = plan.points[0].plan().shaping
    assert first.ports == second.ports == Ports(((3306, 3306), (4567, 4568)), "tcp")
    assert plan.points[0].plan().verify.ports == first.ports
    dtle = load_text("name: p\nreplicator: {kind: dtle}\nlink: {rtt: 100ms, ports: replication}\n")
    assert [r.ports for _, r in dtle.points[0].plan().shaping] == [Ports(((8193, 8193),))] * 2  # its NATS link
    native = load_text("name: p\nlink: {rtt: 100ms, ports: replication}\n")
    assert native.points[0].plan().shaping[0][1].ports == BINLOG
    for text, path in (
        ("link: {rtt: 100ms, rate: 2mbit, ports: [3306]}", "link"),
        ("link: {rtt: 100ms, protocol: tcp}", "link"),
        ("link: {rtt: 100ms, ports: [70000]}", "link"),
    ):
        with pytest.raises(ScenarioError) as refused:
            load_text(f"name: p\n{text}\n")
        assert refused.value.path.startswith(path), refused.value


def test_a_ported_links_verification_says_ping_did_not_cross_the_shaped_ports(monkeypatch):
    from laglab.scenarios.plan import VerifyPlan
    from laglab.scenarios.run import measure
    from laglab.scenarios.schema.scenario import Verify

    class Container:
        entered, pid, ip = True, 42, "10.0.0.3"

    class Platform:
        def running(self, *services, hint):
            return Container(), Container()

    monkeypatch.setattr(measure.verify, "rtt_between", lambda *a: {"samples": 20, "median_ms": 0.08})
    result = measure.verify_link(
        Platform(), None, VerifyPlan("mysql-source", "mysql-target", 180.0, None, Verify(), BINLOG)
    )
    assert result["rtt_ok"] is None and result["ok"] is True
    assert result["rtt_note"].startswith("shaped on ports 3306 only; the ping above crossed the link unshaped")
    whole = measure.verify_link(Platform(), None, VerifyPlan("mysql-source", "mysql-target", 180.0, None, Verify()))
    assert whole["rtt_ok"] is False and whole["ok"] is False  # unported: the ping is the check
