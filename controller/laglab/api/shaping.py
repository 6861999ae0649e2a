"""Shaping of a service or of one link: PUT/GET/DELETE /api/shaping[/<service>], POST /api/verify,
GET /api/containers, GET /api/links (byte counters)."""

from flask import Blueprint, current_app, request

from ..errors import ApiError, bad_request
from ..shaping import verify
from ..shaping.manager import ShapingError
from ..shaping.params import ParamError, format_rate, parse_request, valid_service
from ..shaping.plan import build

bp = Blueprint("shaping", __name__)


def manager():
    lab = current_app.extensions["laglab"]
    if lab.shaping is None:
        raise ApiError(503, "shaping is not available in this controller")
    return lab.shaping


def service_name(name: str) -> str:
    if not valid_service(name):
        raise bad_request("service", f"{name[:64]!r} is not a service name")
    return name


def call(fn, *args):
    try:
        return fn(*args)
    except ShapingError as error:
        raise ApiError(error.status, error.message) from None


@bp.put("/api/shaping/<service>")
def put(service):
    body = request.get_json(silent=True)
    if body is None:
        raise bad_request("body", "expected a JSON object (Content-Type: application/json)")
    try:
        parsed = parse_request(body)
    except ParamError as error:
        raise bad_request(error.field, error.message) from None
    return call(manager().put, service_name(service), parsed)


@bp.get("/api/shaping/<service>")
def get(service):
    m = manager()
    lab = m.containers.list()
    if service_name(service) not in lab:
        raise ApiError(404, f"service: no service {service!r} in this lab")
    return m.describe(service, lab)


@bp.delete("/api/shaping/<service>")
def delete(service):
    peer = request.args.get("peer")
    if peer is not None and not valid_service(peer):
        raise bad_request("peer", f"{peer[:64]!r} is not a service name")
    call(manager().delete, service_name(service), peer)
    return "", 204


@bp.get("/api/shaping")
def list_all():
    m = manager()
    return {"backend": m.backend.name, "shaping": m.all()}


@bp.delete("/api/shaping")
def clear():
    call(manager().clear)
    return "", 204


@bp.get("/api/containers")
def containers():
    m = manager()
    lab = m.containers.list()
    shaped = {d["service"]: d["desired"] for d in m.all()}
    return {"containers": [{**c.as_json(), "shaping": shaped.get(s, [])} for s, c in sorted(lab.items())]}


@bp.get("/api/links")
def links():
    counters = current_app.extensions["laglab"].counters
    if counters is None:
        raise ApiError(503, "link counters are not running")
    return {"csv": f"results/{current_app.extensions['laglab'].run.path.name}/links.csv", "latest": counters.latest}


@bp.post("/api/verify")
def verify_link():
    m = manager()
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise bad_request("body", 'expected a JSON object like {"from": "mysql-source", "to": "mysql-target"}')
    lab = m.containers.list()
    ends = {}
    for field in ("from", "to"):
        name = body.get(field)
        if not isinstance(name, str) or not valid_service(name):
            raise bad_request(field, f"{name!r} is not a service name")
        if name not in lab or not lab[name].running or not lab[name].ip:
            raise ApiError(404, f"{field}: no running service {name!r} in this lab")
        ends[field] = lab[name]
    if ends["from"].service == ends["to"].service:
        raise bad_request("to", "must differ from 'from'")
    count = int(_body_number(body, "count", 20, 20, 1000))
    seconds = int(_body_number(body, "seconds", 3, 1, 60))
    streams = int(_body_number(body, "streams", 1, 1, 16))
    throughput = body.get("throughput", True)
    if not isinstance(throughput, bool):
        raise bad_request("throughput", f"{throughput!r} is not true or false")
    src, dst = ends["from"], ends["to"]
    with m.lock:
        plans = build(list(m.entries.values()), m.shapeable(lab))
    there = plans.get(dst.service)
    back = plans.get(src.service)
    hold_there = there.hold.get(src.ip) if there else None
    hold_back = back.hold.get(dst.ip) if back else None
    requested = {
        "rtt_ms": round(1000 * sum(h.delay for h in (hold_there, hold_back) if h), 3),
        "rate_forward": _rate(back, dst.ip),
        "rate_reverse": _rate(there, src.ip),
    }
    measured = {"rtt": verify.measure_rtt(m.executor, src.pid, dst.ip, count)}
    if throughput:
        for key, reverse in (("forward_mbit", False), ("reverse_mbit", True)):
            measured[key] = verify.measure_throughput(m.executor, src.pid, dst.pid, dst.ip, seconds, reverse, streams)
    return {
        "from": src.service,
        "to": dst.service,
        "backend": m.backend.name,
        "requested": requested,
        "measured": measured,
    }


def _rate(plan, dest_ip):
    if plan is None:
        return None
    rate = plan.rates.get(dest_ip, plan.rates.get(None))
    return format_rate(rate) if rate else None


def _body_number(body: dict, field: str, default: float, low: float, high: float) -> float:
    value = body.get(field, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_request(field, f"{value!r} is out of range {low:g}..{high:g}")
    return value
