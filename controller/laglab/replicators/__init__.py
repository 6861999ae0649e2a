"""Replicator kinds: one module each, one interface (`base.Replicator`) the scenario runner drives.

To add a kind: a module here with a subclass of `Replicator` (or `SourceToTarget`, `Cluster`), with
its options as its own `Options` model (and the ones a sweep may vary in `sweepable`), and its class in
KINDS below. The scenario schema builds its `replicator:` section from the kinds.
"""

from __future__ import annotations

from laglab.replicators.base import Parts, Replicator
from laglab.replicators.cluster import Cluster
from laglab.replicators.dm import Dm
from laglab.replicators.dtle import Dtle
from laglab.replicators.galera import Galera
from laglab.replicators.group_replication import GroupReplication
from laglab.replicators.native import Native

KINDS: dict[str, type[Replicator]] = {cls.kind: cls for cls in (Native, GroupReplication, Galera, Dtle, Dm)}
CLUSTERS: dict[str, type[Cluster]] = {name: cls for name, cls in KINDS.items() if cls.clustered}  # type: ignore[misc]


def for_kind(kind: str, parts: Parts) -> Replicator:
    """A kind, given only the parts of the lab it may use."""
    return KINDS[kind](parts)
