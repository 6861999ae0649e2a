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

from dataclasses import dataclass, field

from .params import Shaping


@dataclass(frozen=True)
class Entry:
    service: str
    peer: str | None
    direction: str
    shaping: Shaping
    expires_at: float | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.service, self.peer)


@dataclass(frozen=True)
class Hold:
    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    distribution: str | None = None
    correlation: float = 0.0  # of successive draws (jitter, loss, reorder), as netem's
    reorder: float = 0.0  # this share goes at once, ahead of the held packets
    gemodel: tuple[float, float, float, float] | None = None  # Gilbert-Elliott loss: p r 1-h 1-k
    duplicate: float = 0.0
    corrupt: float = 0.0
    gap: int = 0

    def plus(self, other: Hold) -> Hold:
        return Hold(
            delay=self.delay + other.delay,
            jitter=self.jitter + other.jitter,
            loss=1.0 - (1.0 - self.loss) * (1.0 - other.loss),
            distribution=self.distribution or other.distribution,
            correlation=max(self.correlation, other.correlation),
            reorder=max(self.reorder, other.reorder),
            gemodel=self.gemodel or other.gemodel,
            duplicate=max(self.duplicate, other.duplicate),
            corrupt=max(self.corrupt, other.corrupt),
            gap=max(self.gap, other.gap),
        )

    def as_worker_rule(self) -> dict:
        return {
            "delay": self.delay,
            "jitter": self.jitter,
            "loss": self.loss,
            "distribution": self.distribution or "uniform",
            "correlation": self.correlation,
            "reorder": self.reorder,
            "gemodel": list(self.gemodel) if self.gemodel else None,
            "duplicate": self.duplicate,
            "corrupt": self.corrupt,
            "gap": self.gap,
        }


@dataclass
class NamespacePlan:
    hold: dict[str, Hold] = field(default_factory=dict)  # source ip or "*" -> impairments
    rates: dict[str | None, float] = field(default_factory=dict)  # destination ip or None -> bits/s
    address: str | None = None  # the container's own address on the lab network
    queue: int = 0  # the userspace backend's NFQUEUE number for packets to this container

    def add_hold(self, source: str, hold: Hold) -> None:
        self.hold[source] = self.hold[source].plus(hold) if source in self.hold else hold

    @property
    def empty(self) -> bool:
        return not self.hold and not self.rates


def hold_of(shaping: Shaping) -> Hold | None:
    s = shaping
    hold = Hold(s.delay, s.jitter, s.loss, s.distribution, s.correlation, s.reorder, s.gemodel, s.duplicate,
                s.corrupt, s.gap)  # fmt: skip
    acts = hold.delay or hold.jitter or hold.loss or hold.gemodel or hold.duplicate or hold.corrupt
    return hold if acts else None


def build(entries: list[Entry], ips: dict[str, str]) -> dict[str, NamespacePlan]:
    """service -> plan, for every service in `ips` (service -> address on the lab network).
    Entries naming a service or peer that is not running are skipped (re-applied when it runs)."""
    plans = {service: NamespacePlan(address=ip) for service, ip in ips.items()}
    for entry in sorted(entries, key=lambda e: (e.service, e.peer or "")):
        if entry.service not in ips or (entry.peer is not None and entry.peer not in ips):
            continue
        hold = hold_of(entry.shaping)
        own_ip = ips[entry.service]
        peers = [entry.peer] if entry.peer else [s for s in ips if s != entry.service]
        if entry.direction in ("egress", "both"):
            if hold:
                for peer in peers:
                    plans[peer].add_hold(own_ip, hold)
            if entry.shaping.rate:
                dest = ips[entry.peer] if entry.peer else None
                plans[entry.service].rates[dest] = entry.shaping.rate
        if entry.direction in ("ingress", "both") and hold:
            if entry.peer:
                plans[entry.service].add_hold(ips[entry.peer], hold)
            else:
                plans[entry.service].add_hold("*", hold)
    return plans


def combine(a: Shaping, b: Shaping) -> Shaping:
    """Two settings on the same packets: delays and jitters add, losses combine, the lower rate wins."""
    rates = [r for r in (a.rate, b.rate) if r]
    return Shaping(
        delay=a.delay + b.delay,
        jitter=a.jitter + b.jitter,
        loss=1.0 - (1.0 - a.loss) * (1.0 - b.loss),
        rate=min(rates) if rates else None,
        correlation=max(a.correlation, b.correlation),
        distribution=a.distribution or b.distribution,
        duplicate=max(a.duplicate, b.duplicate),
        corrupt=max(a.corrupt, b.corrupt),
        reorder=max(a.reorder, b.reorder),
        gemodel=a.gemodel or b.gemodel,
        gap=max(a.gap, b.gap),
    )


@dataclass
class EgressPlan:
    """The kernel backend's view of one container: everything on its own egress."""

    service_wide: Shaping | None = None
    per_peer: dict[str, Shaping] = field(default_factory=dict)  # destination ip -> settings

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
            per_peer = plans[entry.service].per_peer
            base = per_peer.get(ips[entry.peer]) or plans[entry.service].service_wide
            per_peer[ips[entry.peer]] = combine(base, entry.shaping) if base else entry.shaping
    return plans
