"""GET /api/clusters: the three-node clusters of the group-replication and galera profiles."""

from flask import Blueprint

from laglab.api import models, parts
from laglab.api.openapi import operation
from laglab.errors import ApiError
from laglab.replicators import CLUSTERS

bp = Blueprint("clusters", __name__)


def _running(kind) -> bool:
    present = parts.platform().list()
    return any(service in present for service in kind.services())


@operation(
    bp, "GET", "/api/clusters",
    "State of the group-replication and galera clusters (null: that profile is not running)",
    ok=(200, models.Clusters),
)  # fmt: skip
def index():
    lab = parts.lab()
    out = {}
    for name, kind in CLUSTERS.items():
        out[name] = kind.status(kind.endpoints(lab.settings)) if _running(kind) else None
    return {"clusters": out}


@operation(
    bp, "GET", "/api/clusters/<name>",
    "One cluster's nodes: state, role (GR) or cluster size (Galera); formed when all three are members",
    path_params={"name": {"type": "string"}}, ok=(200, models.Cluster), errors=(404, 409),
)  # fmt: skip
def one(name: str):
    lab = parts.lab()
    kind = CLUSTERS.get(name)
    if kind is None:
        raise ApiError(404, f"cluster: {name[:64]!r} is not a cluster of this lab (known: {', '.join(CLUSTERS)})")
    if not _running(kind):
        raise ApiError(409, f"cluster: {name} is not running; start it with: make up PROFILE={name}")
    return kind.status(kind.endpoints(lab.settings))
