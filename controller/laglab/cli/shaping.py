"""laglab shape, clear, show, preset, matrix, verify: the shaping API (PUT/GET/DELETE /api/shaping,
/api/presets, /api/matrix, POST /api/verify) with tc's units."""

from __future__ import annotations

from pathlib import Path

import click
import yaml

from laglab.cli.base import TIME, Failure, Session, pass_session, table
from laglab.scenarios.report import words
from laglab.scenarios.schema import yaml_text
from laglab.shaping.impairment import KNOBS
from laglab.shaping.params import ParamError, format_time, parse_time

# The API's knobs that take a value as written (tc's units), in the order a reader names them.
FIELDS = tuple(k.name for k in KNOBS if k.kind != "gemodel")


def impairment_words(desired: dict) -> str:
    """One desired shaping in words: `delay 90 ms, rate 2 Mbit/s to mysql-target (egress), 40s left`."""
    parts = [f"{key} {words.value(key, desired[key])}" for key in FIELDS if desired.get(key) not in (None, "")]
    if desired.get("gemodel"):
        parts.append("gemodel " + ",".join(f"{k}={v}" for k, v in desired["gemodel"].items()))
    where = f" to {desired['peer']}" if desired.get("peer") else " (all peers)"
    where += f" on ports {desired['ports']}" if desired.get("ports") else ""
    text = ", ".join(parts) or "nothing"
    left = f", {desired['expires_in']} left" if desired.get("expires_in") else ""
    return f"{text}{where} ({desired.get('direction', 'egress')}){left}"


def _gemodel(value: str | None) -> dict | None:
    """--gemodel P[,R[,1-H[,1-K]]] as netem writes it (percentages)."""
    if value is None:
        return None
    names = ("p", "r", "1-h", "1-k")
    parts = [p.strip() for p in value.split(",")]
    if not 1 <= len(parts) <= 4:
        raise click.BadParameter("P[,R[,1-H[,1-K]]], e.g. 1%,20%", param_hint="--gemodel")
    return dict(zip(names, parts, strict=False))


def _first_up(text: str) -> str:
    """The first letter up, the rest as written (str.capitalize lowered `Mbit/s` to `mbit/s`)."""
    return text[:1].upper() + text[1:]


def _option(knob) -> dict:
    """A knob (laglab.shaping.impairment.KNOBS) as click's option: its type or metavar, its help."""
    example = f", e.g. {knob.example}" if knob.example else ""
    kinds = {
        "time": {"type": TIME, "help": f"{_first_up(knob.help)}{example} (units: us, ms, s, m, h)."},
        "percent": {"metavar": "PERCENT", "help": f"{_first_up(knob.help)}{example}."},
        "rate": {"metavar": "RATE", "help": f"{_first_up(knob.help)}{example}."},
        "choice": {"type": click.Choice(knob.choices), "help": f"{_first_up(knob.help)}."},
        "count": {"type": int, "metavar": "N", "help": f"{_first_up(knob.help)}."},
        "gemodel": {"metavar": "P[,R[,1-H[,1-K]]]", "help": f"{_first_up(knob.help)}."},
    }
    return kinds[knob.kind]


def impairment_options(function):
    """The API's shaping fields as options, with tc's units."""
    options = [click.option(f"--{k.name}", **_option(k)) for k in KNOBS]
    options += [
        click.option(
            "--for",
            "--duration",
            "duration",
            type=TIME,
            help="Revert by itself after this long, e.g. 60s (units: us, ms, s, m, h).",
        ),
        click.option(
            "--ports",
            metavar="PORTS",
            help="Only the packets to or from these ports, e.g. 3306 or 4567-4568,4444 (default: all).",
        ),
        click.option("--protocol", type=click.Choice(["tcp", "udp"]), help="With --ports: only tcp or udp."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _body(values: dict, **extra) -> dict:
    body = {key: values[key] for key in FIELDS if values.get(key) is not None}
    if (gemodel := _gemodel(values.get("gemodel"))) is not None:
        body["gemodel"] = gemodel
    if values.get("duration"):
        body["duration"] = values["duration"]
    if values.get("ports"):
        body["ports"] = [part.strip() for part in values["ports"].split(",")]
    if values.get("protocol"):
        body["protocol"] = values["protocol"]
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def _half(rtt: str, field: str) -> str:
    try:
        return format_time(parse_time(field, rtt) / 2)
    except ParamError as error:
        raise click.BadParameter(str(error), param_hint=f"--{field}") from error


def _put_all(session: Session, puts: list[tuple[str, dict]]) -> list[dict]:
    answers = [session.call("PUT", f"/api/shaping/{service}", body) for service, body in puts]
    session.emit(answers, lambda a: [click.echo(f"{x['service']}: " + "; ".join(impairment_words(d) for d in x["desired"])) for x in a])  # fmt: skip
    return answers


@click.command()
@click.argument("service", required=False)
@click.option("--peer", metavar="SERVICE", help="Only the link to this service (default: all its traffic).")
@click.option("--direction", type=click.Choice(["egress", "ingress", "both"]), help="What it sends (default), receives, or both.")  # fmt: skip
@click.option("--link", nargs=2, metavar="A B", help="Both directions of the link A-B (instead of SERVICE).")
@click.option(
    "--rtt",
    type=TIME,
    help="With --link: the round trip; half of it (and of --jitter) each way (units: us, ms, s, m, h).",
)
@impairment_options
@pass_session
def shape(session: Session, service, peer, direction, link, rtt, **values) -> None:
    """Shape a service's traffic, or one link: the change is in force when this returns.

    Values take tc's units; a rate also as people write it (2Mbit/s, 2Mbps: megabits). A service's
    shaping replaces what it had (for that peer). With --link A B
    both directions are set: half of --rtt and of --jitter each way; --loss, --rate and the rest on
    each direction.

    \b
    Examples:
      laglab shape mysql-source --peer mysql-target --delay 100ms --jitter 5ms --loss 1%
      laglab shape mysql-target --rate 2Mbit/s --for 10m
      laglab shape --link mysql-source mysql-target --rtt 180ms --rate 2mbit
      laglab shape --link mysql-source mysql-target --rtt 200ms --ports 3306   # the binlog stream only
    """
    if link:
        if service or peer:
            raise click.UsageError("give either SERVICE [--peer] or --link A B, not both")
        a, b = link
        if rtt is not None:
            if values.get("delay"):
                raise click.UsageError("--rtt and --delay: give one (--rtt halves itself each way)")
            values["delay"] = _half(rtt, "rtt")
            if values.get("jitter"):
                values["jitter"] = _half(values["jitter"], "jitter")
        _put_all(
            session, [(a, _body(values, peer=b, direction=direction)), (b, _body(values, peer=a, direction=direction))]
        )
        return
    if rtt is not None:
        raise click.UsageError("--rtt goes with --link A B (a service alone has --delay)")
    if not service:
        raise click.UsageError("name a SERVICE (or --link A B)")
    _put_all(session, [(service, _body(values, peer=peer, direction=direction))])


@click.command()
@click.argument("service", required=False)
@click.option("--peer", metavar="SERVICE", help="Only the link to this service.")
@click.option("--link", nargs=2, metavar="A B", help="Both directions of the link A-B (what shape --link set).")
@pass_session
def clear(session: Session, service: str | None, peer: str | None, link) -> None:
    """Remove shaping: every service's, one service's, or one link's.

    \b
    Examples:
      laglab clear
      laglab clear mysql-source --peer mysql-target
      laglab clear --link mysql-source mysql-target
    """
    if link:
        if service or peer:
            raise click.UsageError("--link A B goes alone (not with SERVICE or --peer)")
        a, b = link
        for one, other in ((a, b), (b, a)):
            session.call("DELETE", f"/api/shaping/{one}?peer={other}")
        session.emit({"cleared": "link", "link": [a, b]}, lambda _: click.echo(f"cleared the link {a} - {b} (both directions)"))  # fmt: skip
        return
    if service is None:
        if peer:
            raise click.UsageError("--peer needs a SERVICE")
        session.call("DELETE", "/api/shaping")
        message = "cleared all shaping"
    else:
        session.call("DELETE", f"/api/shaping/{service}" + (f"?peer={peer}" if peer else ""))
        message = f"cleared {service}'s shaping" + (f" to {peer}" if peer else "")
    session.emit({"cleared": service or "all", "peer": peer}, lambda _: click.echo(message))


@click.command()
@click.argument("service", required=False)
@pass_session
def show(session: Session, service: str | None) -> None:
    """Shaping in force: what was asked (desired) and what the kernel holds (qdiscs, the userspace
    backend's rules), per service.

    \b
    Examples:
      laglab show
      laglab show mysql-source --json
    """
    body = session.call("GET", "/api/shaping" + (f"/{service}" if service else ""))
    entries = [body] if service else body["shaping"]

    def human(_) -> None:
        rows = []
        for entry in entries:
            kernel = entry.get("kernel") or {}
            held = []
            for ns, k in sorted(kernel.items()):
                qdiscs = ",".join(q["kind"] for q in k.get("qdiscs", []) if q.get("kind") not in ("noqueue", None))
                worker = (k.get("worker") or {}).get("rules") or {}
                held.append(f"{ns}: " + (qdiscs or "-") + (f", {len(worker)} held peer(s)" if worker else ""))
            for d in entry["desired"] or [{}]:
                rows.append((entry["service"], impairment_words(d) if d else "-", "; ".join(held) or "-"))
        table(("service", "desired", "kernel"), rows)
        click.echo(f"backend: {entries[0]['backend'] if entries else body.get('backend')}")

    session.emit(body, human)


@click.command()
@click.argument("name", required=False)
@click.option("--link", nargs=2, metavar="A B", help="Apply it to the link A-B (A's side is 'up').")
@pass_session
def preset(session: Session, name: str | None, link) -> None:
    """A named link (access networks, regions' round trips): list them (no lab needed: the shipped
    table, controller/laglab/shaping/presets.yaml), or apply one to a link.

    \b
    Examples:
      laglab preset                                  the list, with sources
      laglab preset dsl --link loadgen mysql-source
      laglab preset us-east-1/eu-west-1 --link mysql-source mysql-target
    """
    from laglab.shaping import presets as shipped

    presets = shipped.profiles()
    if name is None:

        def human(p: dict) -> None:
            table(("preset", "rtt", "up", "down", "table"), [(k, v.get("rtt"), v.get("up"), v.get("down"), v.get("table")) for k, v in sorted(p.items())])  # fmt: skip
            click.echo("sources:")
            for source in shipped.sources():
                click.echo(f"  {source['table']} ({source['date']}): {source['source']}")

        session.emit(presets, human)
        return
    if name not in presets:
        raise Failure(f"preset: no preset {name!r} (laglab preset lists them)", "usage")
    if not link:
        raise click.UsageError("--link A B: where to apply it")
    chosen, (a, b) = presets[name], link
    half = _half(chosen["rtt"], "rtt") if chosen.get("rtt") else None
    _put_all(session, [
        (a, {k: v for k, v in {"delay": half, "rate": chosen.get("up"), "peer": b}.items() if v}),
        (b, {k: v for k, v in {"delay": half, "rate": chosen.get("down"), "peer": a}.items() if v}),
    ])  # fmt: skip


@click.command()
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--clear", "clear_it", is_flag=True, help="Remove the matrix's shaping.")
@pass_session
def matrix(session: Session, file: Path | None, clear_it: bool) -> None:
    """A delay matrix between groups of services (YAML or JSON, the body of PUT /api/matrix); without
    FILE, the matrix in force.

    \b
    Examples:
      laglab matrix scenarios/matrices/two-regions.yaml
      laglab matrix
      laglab matrix --clear
    """
    if clear_it:
        session.call("DELETE", "/api/matrix")
        session.emit({"cleared": True}, lambda _: click.echo("cleared the matrix"))
        return
    if file is None:
        session.emit(session.call("GET", "/api/matrix"), lambda m: click.echo(yaml.safe_dump(m, sort_keys=False)))
        return
    try:
        body = yaml_text.parse(file.read_text())  # measured before it is built, as a scenario is
    except yaml_text.YamlRefused as error:
        raise Failure(f"{file}: {error}", "usage") from error
    session.emit(session.call("PUT", "/api/matrix", body), lambda m: click.echo(yaml.safe_dump(m, sort_keys=False)))


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--count", default=20, show_default=True, help="Pings (20..1000).")
@click.option("--for", "--duration", "duration", type=TIME, default="3s", show_default=True, help="iperf3's time per direction.")  # fmt: skip
@click.option("--seconds", type=int, hidden=True, help="Older form of --for, in seconds.")
@click.option("--streams", default=1, show_default=True, help="iperf3 parallel streams.")
@click.option("--rtt-only", is_flag=True, help="No throughput measurement.")
@pass_session
def verify(session: Session, a: str, b: str, count: int, duration: str, seconds: int | None, streams: int, rtt_only: bool) -> None:  # fmt: skip
    """Measure the link A -> B from inside the lab (ping -U, iperf3 both ways) beside what was asked.

    \b
    Example:  laglab verify mysql-source mysql-target
    """
    if seconds is None:
        seconds = max(1, round(parse_time("for", duration, high=60.0)))
    body = {"from": a, "to": b, "count": count, "seconds": seconds, "streams": streams, "throughput": not rtt_only}
    answer = session.call("POST", "/api/verify", body, timeout=2 * seconds + count + 120)

    def human(v: dict) -> None:
        asked, got = v["requested"], v["measured"]
        rtt = got.get("rtt") or {}
        measured = f"{rtt['median_ms']} ms median, p99 {rtt['p99_ms']} ms ({rtt['samples']} of {count} pings)" if rtt.get("samples") else "no reply"  # fmt: skip
        rows = [("RTT", f"{asked.get('rtt_ms', 0):g} ms", measured)]
        for key, label, side in (("forward_mbit", f"{a} -> {b}", "rate_forward"), ("reverse_mbit", f"{b} -> {a}", "rate_reverse")):  # fmt: skip
            if key in got:
                rows.append((label, asked.get(side) or "unshaped", f"{got[key]} Mbit/s"))
        table(("", "asked", "measured"), rows)
        click.echo(f"backend: {v['backend']}")

    session.emit(answer, human)
