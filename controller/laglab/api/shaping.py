"""Shaping of a service or of one link: PUT/GET/DELETE /api/shaping[/<service>], POST /api/verify,
GET /api/containers, GET /api/links (byte counters)."""

from flask import Blueprint

from laglab.api import models, parts
from laglab.api.openapi import operation
from laglab.errors import ApiError
from laglab.platforms import PlatformError
from laglab.platforms.base import measurable
from laglab.shaping import verify
from laglab.shaping.params import SERVICE_PATTERN, parse_request, valid_service

bp = Blueprint("shaping", __name__)
SERVICE = {"service": {"type": "string", "pattern": SERVICE_PATTERN}}


def manager():
    return parts.shaping()


def service_name(name: str) -> str:
    if not valid_service(name):
        raise ApiError(400, f"service: {name[:64]!r} is not a service name")
    return name


@operation(
    bp, "PUT", "/api/shaping/<service>", "Apply (replace in place) a service's or one link's shaping",
    path_params=SERVICE, query=models.ReadbackQuery, body=models.ShapingBody, ok=(200, models.ServiceShaping),
    errors=(404, 409, 422, 502, 503),
    description="Answered once the change is in effect. The answer carries the desired shaping; the kernel's "
    "read-back only with ?readback=1 (GET /api/shaping/<service> always reads it).",
)  # fmt: skip
def put(service, query: models.ReadbackQuery, body: models.ShapingBody):
    service_name(service)
    parsed = parse_request(body.model_dump(by_alias=True, exclude_unset=True))  # a ParamError answers itself
    return manager().put(service, parsed, readback=query.readback)


@operation(
    bp, "GET", "/api/shaping/<service>", "One service's shaping, desired and read back",
    path_params=SERVICE, ok=(200, models.ServiceShaping), errors=(404, 503),
)  # fmt: skip
def get(service):
    lab = parts.platform().list()
    if service_name(service) not in lab:
        raise ApiError(404, f"service: no service {service!r} in this lab")
    return parts.shaping_view().service(service, lab)


@operation(
    bp, "DELETE", "/api/shaping/<service>", "Remove a service's shaping (or only the link to ?peer=)",
    path_params=SERVICE, query=models.PeerQuery, ok=(204, None), errors=(404, 409, 502, 503),
)  # fmt: skip
def delete(service, query: models.PeerQuery):
    manager().delete(service_name(service), query.peer)
    return "", 204


@operation(
    bp, "GET", "/api/shaping", "Shaping of every service: desired and as read back from the kernel",
    ok=(200, models.AllShaping), errors=(503,),
)  # fmt: skip
def list_all():
    view = parts.shaping_view()
    return {"backend": view.backend, "shaping": view.every(parts.platform().list())}


@operation(bp, "DELETE", "/api/shaping", "Clear all shaping", ok=(204, None), errors=(502, 503))
def clear():
    manager().clear()
    return "", 204


@operation(
    bp, "GET", "/api/containers", "The lab's services: container, PID, IP, shaping",
    ok=(200, models.Containers), errors=(503,),
)  # fmt: skip
def containers():
    lab = parts.platform().list()
    shaped = {d["service"]: d["desired"] for d in parts.shaping_view().every(lab)}
    return {"containers": [{**c.as_json(), "shaping": shaped.get(s, [])} for s, c in sorted(lab.items())]}


@operation(
    bp, "GET", "/api/links", "Latest byte and packet counters per container and per link (also in links.csv)",
    ok=(200, models.Links), errors=(503,),
)  # fmt: skip
def links():
    lab = parts.lab()
    return {"csv": f"results/{lab.run.path.name}/links.csv", "latest": lab.counters.latest}


@operation(
    bp, "POST", "/api/verify",
    "Measure a link from inside the lab: RTT (ping -U) and throughput (iperf3, both directions)",
    body=models.VerifyBody, ok=(200, models.Verified), errors=(404, 409, 422, 502, 503),
)  # fmt: skip
def verify_link(body: models.VerifyBody):
    with parts.exclusive("verify"):
        return _verify(body)


def _verify(body: models.VerifyBody) -> dict:
    platform, executor, view = parts.platform(), parts.executor(), parts.shaping_view()
    lab = platform.list()
    ends = {}
    for field, name in (("from", body.from_), ("to", body.to)):
        if name not in lab or not lab[name].running or not lab[name].ip:
            raise ApiError(404, f"{field}: no running service {name!r} in this lab")
        if not measurable(lab[name]):
            raise ApiError(
                409, f"{field}: {name} is the lab's apparatus (the controller or a set-up job); not measured"
            )
        ends[field] = lab[name]
    if ends["from"].service == ends["to"].service:
        raise ApiError(422, "to: must differ from 'from'")
    src, dst = ends["from"], ends["to"]
    entered = src.entered and dst.entered
    requested = view.requested(src, dst, lab)
    measured = {"rtt": verify.rtt_between(platform, executor, src, dst.ip, body.count)}
    if body.throughput and not entered:  # Kubernetes: iperf3 in the pods' tools containers, through exec
        try:
            for key, reverse in (("forward_mbit", False), ("reverse_mbit", True)):
                measured[key] = verify.throughput_in_pods(platform, src, dst, body.seconds, reverse, body.streams)
        except PlatformError as error:  # the tools container or iperf3's server: the cluster's answer
            raise ApiError(502, str(error)) from None
        measured["forward_other_mbit"] = None  # not counted in a pod (no iptables without NET_ADMIN)
    elif body.throughput:
        side: dict = {}
        for key, reverse in (("forward_mbit", False), ("reverse_mbit", True)):
            measured[key] = verify.measure_throughput(
                executor, src.pid, dst.pid, dst.ip, body.seconds, reverse, body.streams, side=side
            )
        # What else `from` sent to `to` meanwhile: it shares a shaped rate with iperf3.
        measured["forward_other_mbit"] = side.get("other_mbit")
    return {
        "from": src.service,
        "to": dst.service,
        "backend": view.backend,
        "requested": requested,
        "measured": measured,
    }
