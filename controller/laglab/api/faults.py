"""Faults and partitions: POST/GET /api/faults, DELETE /api/faults/<id> (undo now);
POST/GET /api/partitions, DELETE /api/partitions[/<id>] (heal)."""

from flask import Blueprint

from laglab.api import models, parts
from laglab.api.openapi import operation
from laglab.api.shaping import manager
from laglab.shaping.params import parse_ports, parse_time

bp = Blueprint("faults", __name__)
FAULT_ID = {"fault_id": {"type": "string", "pattern": r"^f[0-9]{1,9}$"}}
PARTITION_ID = {"partition_id": {"type": "string", "pattern": r"^p[0-9]{1,9}$"}}


def faults():
    return parts.faults()


def _seconds(field: str, value) -> float | None:
    return None if value is None else parse_time(field, value, high=86400.0)  # a ParamError answers itself


@operation(
    bp, "POST", "/api/faults", "Inject a fault into a service's container (undone after `duration`, if given)",
    body=models.FaultBody, ok=(201, models.Fault), errors=(404, 409, 422, 502, 503, 504),
    description="kill (SIGKILL), stop, start, restart, pause, unpause. Never the lab's apparatus (409).",
)  # fmt: skip
def inject(body: models.FaultBody):
    duration = _seconds("duration", body.duration)
    return faults().inject(body.service, body.action, duration).as_json(), 201


@operation(bp, "GET", "/api/faults", "Active and recent faults", ok=(200, models.Faults), errors=(503,))
def index():
    return faults().listing()


@operation(
    bp, "DELETE", "/api/faults/<fault_id>", "Undo an active fault now",
    path_params=FAULT_ID, ok=(200, models.Fault), errors=(404, 409, 502, 503, 504),
)  # fmt: skip
def undo(fault_id):
    return faults().undo(fault_id).as_json()


@operation(
    bp, "POST", "/api/partitions", "Cut every link between two groups of services (one way with oneway)",
    body=models.PartitionBody, ok=(201, models.Partition), errors=(404, 409, 422, 502, 503),
    description="A 100 % loss on each link from a to b (and b to a unless oneway), on top of their shaping; with "
    "`ports`, on those ports' packets only (409 `ports` where a link is shaped on other ports).",
)  # fmt: skip
def partition(body: models.PartitionBody):
    duration = _seconds("duration", body.duration)
    ports = parse_ports(body.ports, body.protocol)  # a ParamError answers itself
    return manager().partition(body.a, body.b, body.oneway, duration, ports).as_json(), 201


@operation(bp, "GET", "/api/partitions", "Partitions in force", ok=(200, models.Partitions), errors=(503,))
def partitions():
    return {"partitions": [p.as_json() for p in parts.shaping_view().partitions()]}


@operation(bp, "DELETE", "/api/partitions", "Heal every partition", ok=(204, None), errors=(502, 503))
def heal_all():
    manager().heal(None)
    return "", 204


@operation(
    bp, "DELETE", "/api/partitions/<partition_id>", "Heal one partition",
    path_params=PARTITION_ID, ok=(204, None), errors=(404, 502, 503),
)  # fmt: skip
def heal(partition_id):
    manager().heal(partition_id)
    return "", 204
