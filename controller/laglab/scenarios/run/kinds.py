"""The replication kinds one run uses: each made on its first point (the composition's `kinds`), kept in
the order first used, one of them current. A point of another kind restores the current one first
(DTLE hands back to native before native's point); the consistency check and the cleanup's restores
go over every kind used, the current one first."""

from __future__ import annotations

from collections.abc import Callable

from laglab.replicators.base import Replicator
from laglab.scenarios.analysis import summarise
from laglab.scenarios.plan import PointPlan
from laglab.scenarios.run.orphan import RunMarker
from laglab.scenarios.run.parts import RunClock


class RunKinds:
    def __init__(self, make: Callable[[str], Replicator], marker: RunMarker, clock: RunClock):
        self.make, self.marker, self.clock = make, marker, clock
        self.used: dict[str, Replicator] = {}  # kind -> the replicator driving it, in the order first used
        self.current: Replicator | None = None  # the kind of the point running (or last run)

    def for_point(self, plan: PointPlan, step: Callable[[str], None]) -> Replicator:
        """The point's kind, ready: the current one restored first when it is another, a new one
        recorded (the orphan marker's kinds) and its data prepared. `step` names each wait of it (and
        is where a cancel interrupts)."""
        kind = plan.replicator.kind
        if self.current is not None and self.current.kind != kind:
            step(f"restoring {self.current.kind}")
            self.current.restore()
        if kind not in self.used:
            self.marker.kind_used(kind)
            self.used[kind] = self.current = self.make(kind)
            step(f"preparing data for {kind}")
            self.current.prepare(plan.data, sleep=self.clock.sleep)
        self.current = self.used[kind]
        return self.current

    def ordered(self) -> list[Replicator]:
        """Every kind used, the current one first."""
        first = [self.current] if self.current is not None else []
        return first + [r for r in self.used.values() if r is not self.current]

    def consistency(self, clear_shaping: Callable[[], None]) -> dict:
        """Each thing the kinds replicate into compared once, the current kind first; the links
        cleared first when a kind checks unshaped."""
        ordered = self.ordered()
        if any(r.checks_unshaped for r in ordered):
            clear_shaping()
        reports, scopes = [], set()
        for replicator in ordered:
            if replicator.consistency_scope in scopes:
                continue
            scopes.add(replicator.consistency_scope)
            reports.append(replicator.consistency(sleep=self.clock.sleep))
        return summarise.merge_consistency(reports)
