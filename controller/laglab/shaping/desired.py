"""Desired shaping: what the lab was asked for, as values, and its file. No I/O but load and save.

The entries (service, peer) -> Entry, the partitions (each a 100 % loss on the links it cuts, on top of
their shaping), and the delay matrix in force (its links' entries are among the entries). What the
backends get is `planned_entries()`: the entries and one blocking entry per partitioned direction.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from laglab.shaping.impairment import Impairment
from laglab.shaping.plan import Entry
from laglab.shaping.ports import ALL, Ports
from laglab.state.recovery import read_state, set_aside, write_state

if TYPE_CHECKING:  # pydantic is not in the kernel suite's User-mode Linux root: imported where used
    from laglab.shaping.matrix import Matrix

BLOCK = Impairment(loss=1.0)
Key = tuple[str, str | None]


@dataclass(frozen=True)
class Partition:
    """Every packet from a service of `a` to one of `b` is lost (and back, unless `oneway`). It adds a
    100 % loss to those links on top of their shaping, which is left as it is and back once healed."""

    id: str
    a: tuple[str, ...]
    b: tuple[str, ...]
    oneway: bool = False
    expires_at: float | None = None
    ports: Ports = ALL  # only the packets to or from these ports are cut (absent: every packet)

    def pairs(self) -> list[tuple[str, str]]:
        """(sender, receiver) of every blocked direction."""
        forward = [(x, y) for x in self.a for y in self.b]
        return forward if self.oneway else forward + [(y, x) for x, y in forward]

    def as_json(self) -> dict:
        out = {"id": self.id, "a": list(self.a), "b": list(self.b), "oneway": self.oneway}
        out["ports"] = self.ports.text() if self.ports else None
        out["expires_in"] = None if not self.expires_at else f"{max(0.0, self.expires_at - time.time()):.1f}s"
        return out

    def to_wire(self) -> dict:
        return {
            "id": self.id,
            "a": list(self.a),
            "b": list(self.b),
            "oneway": self.oneway,
            "expires_at": self.expires_at,
            "ports": self.ports.to_wire(),
        }

    @classmethod
    def from_wire(cls, item: dict) -> Partition:
        return cls(item["id"], tuple(item["a"]), tuple(item["b"]), item["oneway"], item.get("expires_at"),
                   Ports.from_wire(item.get("ports")))  # fmt: skip


@dataclass
class DesiredState:
    entries: dict[Key, Entry] = field(default_factory=dict)
    partitions: dict[str, Partition] = field(default_factory=dict)
    matrix: Matrix | None = None
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1), repr=False)

    def planned_entries(self) -> list[Entry]:
        """What the backends get: the entries, and a 100 % loss per partitioned direction."""
        blocked = [Entry(s, r, "egress", BLOCK, ports=p.ports) for p in self.partitions.values() for s, r in p.pairs()]
        return list(self.entries.values()) + blocked

    def next_partition_id(self) -> str:
        return f"p{next(self._ids)}"

    def expire(self, now: float) -> list[str]:
        """Drop what outlived its duration; what went, in the events' words."""
        gone = []
        for key in [k for k, e in self.entries.items() if e.expires_at and e.expires_at <= now]:
            del self.entries[key]
            gone.append(f"{key[0]} -> {key[1] or 'all'}: duration over, cleared")
        for pid in [p for p, v in self.partitions.items() if v.expires_at and v.expires_at <= now]:
            del self.partitions[pid]
            gone.append(f"partition {pid}: duration over, healed")
        return gone

    # --- its file ---
    def to_wire(self) -> dict:
        return {
            "entries": [e.to_wire() for e in self.entries.values()],
            "partitions": [p.to_wire() for p in self.partitions.values()],
            "matrix": None if self.matrix is None else self.matrix.model_dump(mode="json", exclude_none=True),
        }

    @classmethod
    def from_wire(cls, raw: dict) -> DesiredState:
        state = cls()
        for item in raw.get("entries", []):
            entry = Entry.from_wire(item)
            state.entries[entry.key] = entry
        for item in raw.get("partitions", []):
            partition = Partition.from_wire(item)
            state.partitions[partition.id] = partition
        if raw.get("matrix"):
            from laglab.shaping.matrix import Matrix

            state.matrix = Matrix.model_validate(raw["matrix"])
        numbers = [int(p.removeprefix("p")) for p in state.partitions if p.removeprefix("p").isdigit()]
        state._ids = itertools.count(max(numbers, default=0) + 1)  # ids go on after a restart
        return state

    @classmethod
    def load(cls, path: Path, restart=None) -> DesiredState:
        """The saved state; a file that cannot be read or understood is set aside, never a crash."""
        raw = read_state(path, restart, {})
        try:
            return cls.from_wire(raw)
        except Exception as error:  # valid JSON, not this lab's state (hand-edited, another version)
            set_aside(Path(path), restart, error)
            return cls()

    def save(self, path: Path) -> None:
        write_state(path, self.to_wire())
