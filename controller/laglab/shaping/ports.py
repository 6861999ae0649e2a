"""Which packets of a link a shaping entry holds: all of them, or only those to or from some ports
(`ports: [3306, "4567-4568"]`, optionally `protocol: tcp|udp`). A packet matches when its source or
its destination port is one of them: the binlog stream leaves the source from 3306 and its acks go back
to 3306, so one entry covers both directions of the connection.

The userspace backend matches with iptables' multiport (`-p tcp -m multiport --ports 3306,4567:4568`),
which takes 15 ports, a range counting as two (xt_multiport.h: XT_MULTI_PORTS 15); the kernel backend
with u32 filters (`match ip sport|dport P 0xffff`), one per port: at most KERNEL_PORTS of them.
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOLS = ("tcp", "udp")
PROTOCOL_NUMBERS = {"tcp": 6, "udp": 17}
MULTIPORT_SLOTS = 15  # xt_multiport.h: XT_MULTI_PORTS
KERNEL_PORTS = 32  # the kernel backend's u32 filters: two per port per protocol per peer


@dataclass(frozen=True)
class Ports:
    ranges: tuple[tuple[int, int], ...] = ()  # (low, high), sorted; empty: every packet of the link
    protocol: str | None = None  # None: tcp and udp

    def __bool__(self) -> bool:
        return bool(self.ranges)

    @property
    def protocols(self) -> tuple[str, ...]:
        return (self.protocol,) if self.protocol else PROTOCOLS

    @property
    def numbers(self) -> list[int]:
        """Every port, ranges expanded (the kernel backend's filters)."""
        return [port for low, high in self.ranges for port in range(low, high + 1)]

    def text(self) -> str:
        """`3306,4567-4568` (`/tcp` when one protocol): the API's and the report's words."""
        words = ",".join(str(low) if low == high else f"{low}-{high}" for low, high in self.ranges)
        return words + (f"/{self.protocol}" if self.protocol else "")

    def multiport(self) -> str:
        """iptables multiport's list: `3306,4567:4568`."""
        return ",".join(str(low) if low == high else f"{low}:{high}" for low, high in self.ranges)

    def to_wire(self) -> dict | None:
        if not self:
            return None
        return {"ports": [[low, high] for low, high in self.ranges], "protocol": self.protocol}

    @classmethod
    def from_wire(cls, item: dict | None) -> Ports:
        if not item:
            return cls()
        return cls(tuple((int(low), int(high)) for low, high in item["ports"]), item.get("protocol"))


ALL = Ports()


def ports_text(ports: Ports) -> str:
    """`all` or the ports' words, for the events and the API's answers."""
    return ports.text() if ports else "all"
