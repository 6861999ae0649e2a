"""From desired shaping to what each container's kernel must hold. Pure: no I/O.

Desired state is a set of entries, each (service, peer or None) -> settings + direction. The plan
says, per container:
- `hold`: impairments applied to packets it RECEIVES, per source address ("*" = any source). Egress
  shaping of a service becomes ingress holding at its peers: delaying a sender's own egress
  starves TCP (TCP Small Queues counts held packets against the socket).
- `rates`: rate limits on its egress, per destination address (None = all traffic).
Settings that apply to the same packets add up (delays and jitters add, losses combine).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from laglab.errors import Kind
from laglab.shaping.impairment import Impairment
from laglab.shaping.params import Direction, ShapingError
from laglab.shaping.ports import ALL, Ports, ports_text


@dataclass(frozen=True)
class Entry:
    service: str
    peer: str | None
    direction: Direction
    shaping: Impairment
    expires_at: float | None = None
    ports: Ports = ALL  # which of the link's packets it holds

    def __post_init__(self):
        object.__setattr__(self, "direction", Direction(self.direction))  # a saved state holds the string

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.service, self.peer)

    def to_wire(self) -> dict:
        return {
            "service": self.service,
            "peer": self.peer,
            "direction": self.direction.value,
            "shaping": self.shaping.to_wire(),
            "expires_at": self.expires_at,
            "ports": self.ports.to_wire(),
        }

    @classmethod
    def from_wire(cls, item: dict) -> Entry:
        shaping = Impairment.from_wire(item["shaping"])
        ports = Ports.from_wire(item.get("ports"))
        return cls(item["service"], item["peer"], item["direction"], shaping, item.get("expires_at"), ports)


SEED_MAX = 2**32 - 1  # netem's seed is a u64, Python's Random takes any int: a scenario's seed fits both


def link_seed(seed: int, *names: str) -> int:
    """One link's own seed, from the run's seed and the link's names (services, not addresses, which a
    restarted lab may hand out again differently): two links of one run draw different sequences, and
    one link draws the same sequence in every run with that seed."""
    digest = hashlib.sha256("/".join((str(seed), *names)).encode()).digest()
    return int.from_bytes(digest[:4], "big")


def seed_links(plans: dict, ips: dict[str, str], seed: int | None, keys: str) -> None:
    """Each plan's `seeds`: its links' own seeds (None: none, the draws are the host's randomness).
    `keys` names the plan's dict of links, keyed by the peer's address, "*" or None (any peer)."""
    names = {ip: service for service, ip in ips.items()}
    for service, plan in plans.items():
        links = getattr(plan, keys)
        plan.seeds = (
            {} if seed is None else {peer: link_seed(seed, service, names.get(peer, str(peer))) for peer in links}
        )


def merge_ports(held: Impairment, held_ports: Ports, more: Impairment, ports: Ports, where: str):
    """Two entries on the packets of one link: on the same ports they add up; a block of every packet
    (a partition) covers a ported entry; otherwise the link would need two rules for one sender, which
    a receiver's worker (by source address) and a peer's class cannot tell apart: refused."""
    if held_ports == ports:
        return held.plus(more), ports
    if not ports and more.loss >= 1.0:
        return more, ALL
    if not held_ports and held.loss >= 1.0:
        return held, ALL
    raise ShapingError(
        Kind.CONFLICT,
        f"ports: the link with {where} is shaped on {ports_text(held_ports)} already; one link holds one "
        f"selection of ports ({ports_text(ports)} asked): clear the other entry first",
    )


@dataclass
class NamespacePlan:
    hold: dict[str, Impairment] = field(default_factory=dict)  # source ip or "*" -> impairments (no rate)
    rates: dict[str | None, float] = field(default_factory=dict)  # destination ip or None -> bits/s
    address: str | None = None  # the container's own address on the lab network
    queue: int = 0  # the userspace backend's NFQUEUE number for packets to this container
    seeds: dict[str, int] = field(default_factory=dict)  # source ip or "*" -> its link's seed (a seeded run)
    ports: dict[str, Ports] = field(default_factory=dict)  # source ip or "*" -> the ports held (absent: all)

    def add_hold(self, source: str, hold: Impairment, ports: Ports = ALL) -> None:
        if source not in self.hold:
            self.hold[source] = hold
            if ports:
                self.ports[source] = ports
            return
        merged = merge_ports(self.hold[source], self.ports.get(source, ALL), hold, ports, source)
        self.hold[source] = merged[0]
        if merged[1]:
            self.ports[source] = merged[1]
        else:
            self.ports.pop(source, None)

    @property
    def empty(self) -> bool:
        return not self.hold and not self.rates


def build(entries: list[Entry], ips: dict[str, str]) -> dict[str, NamespacePlan]:
    """service -> plan, for every service in `ips` (service -> address on the lab network).
    Entries naming a service or peer that is not running are skipped (re-applied when it runs)."""
    plans = {service: NamespacePlan(address=ip) for service, ip in ips.items()}
    for entry in sorted(entries, key=lambda e: (e.service, e.peer or "")):
        if entry.service not in ips or (entry.peer is not None and entry.peer not in ips):
            continue
        hold = entry.shaping.held()
        own_ip = ips[entry.service]
        peers = [entry.peer] if entry.peer else [s for s in ips if s != entry.service]
        if entry.direction.sends:
            if hold:
                for peer in peers:
                    plans[peer].add_hold(own_ip, hold, entry.ports)
            if entry.shaping.rate:
                dest = ips[entry.peer] if entry.peer else None
                plans[entry.service].rates[dest] = entry.shaping.rate
        if entry.direction.receives and hold:
            if entry.peer:
                plans[entry.service].add_hold(ips[entry.peer], hold, entry.ports)
            else:
                plans[entry.service].add_hold("*", hold, entry.ports)
    return plans


@dataclass
class EgressPlan:
    """The kernel backend's view of one container: everything on its own egress."""

    service_wide: Impairment | None = None
    per_peer: dict[str, Impairment] = field(default_factory=dict)  # destination ip -> settings
    seeds: dict[str | None, int] = field(default_factory=dict)  # destination ip or None -> its netem's seed
    ports: dict[str, Ports] = field(default_factory=dict)  # destination ip -> the ports its class takes

    @property
    def links(self) -> dict[str | None, Impairment]:
        """Every netem this container's egress holds: the service-wide one (None) and one per peer."""
        return {**({None: self.service_wide} if self.service_wide else {}), **self.per_peer}

    @property
    def empty(self) -> bool:
        return self.service_wide is None and not self.per_peer


def build_egress(entries: list[Entry], ips: dict[str, str]) -> dict[str, EgressPlan]:
    """service -> egress plan (kernel backend: egress entries only; a link's settings include the
    service-wide ones, since both apply to its packets)."""
    plans = {service: EgressPlan() for service in ips}
    for entry in entries:
        if entry.service in ips and entry.peer is None:
            plans[entry.service].service_wide = entry.shaping
    for entry in entries:
        if entry.service in ips and entry.peer in ips:
            # A link's own entry and a partition's block are two entries on the same packets: combined.
            plan, dest = plans[entry.service], ips[entry.peer]
            if dest in plan.per_peer:
                shaping, ports = merge_ports(
                    plan.per_peer[dest], plan.ports.get(dest, ALL), entry.shaping, entry.ports, entry.peer
                )
            else:
                base = plan.service_wide
                shaping, ports = (base.plus(entry.shaping) if base else entry.shaping), entry.ports
            plan.per_peer[dest] = shaping
            if ports:
                plan.ports[dest] = ports
            else:
                plan.ports.pop(dest, None)
    return plans
