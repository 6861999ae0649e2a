"""laglab status, laglab dashboard, laglab lag, laglab consistency."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

import click

from laglab.cli.base import Session, check_failed, pass_session, refused, seconds, table
from laglab.cli.shaping import impairment_words

LAG_HEADER = ("time (UTC)", "replica", "lag", "± bound", "applier", "transit", "IO/SQL", "status")


@click.command()
@pass_session
def status(session: Session) -> None:
    """The lab at a glance: services, shaping backend, recorder and lag, shaping in force, faults,
    partitions, load and runs.

    \b
    Example:  laglab status
    """
    health = session.call("GET", "/api/health")
    data = {
        "health": health,
        "containers": session.call("GET", "/api/containers")["containers"],
        "faults": session.call("GET", "/api/faults"),
        "partitions": session.call("GET", "/api/partitions")["partitions"],
        "load": session.call("GET", "/api/load"),
        "runs": session.call("GET", "/api/runs")["runs"],
    }
    session.emit(data, _print_status)


@click.command()
@click.option("--open", "open_browser", is_flag=True, help="Also open it in this machine's web browser.")
@pass_session
def dashboard(session: Session, open_browser: bool) -> None:
    """Print the dashboard's link, with the API's token in it (the page keeps it, then drops it from the
    address bar; the token is LAB_API_TOKEN in .env). Checked against the controller first.

    \b
    Example:  laglab dashboard
    """
    health = session.call("GET", "/api/health")
    if not health.get("authenticated"):
        raise check_failed(f"the controller at {session.client.base} does not take this token (--token or .env)")
    link = f"{session.client.base}/#token={session.client.token}"
    session.emit({"url": link}, lambda data: click.echo(data["url"]))
    if open_browser:
        import webbrowser

        webbrowser.open(link)


def _print_status(data: dict) -> None:
    health = data["health"]
    shaping = health.get("shaping") or {}
    recorder = health.get("recorder") or {}
    latest = recorder.get("latest") or {}
    click.echo(f"controller  ok, recording into results/{health.get('run')}")
    platform = health.get("platform") or {}
    if platform:
        where = "namespace" if platform.get("name") == "kubernetes" else "compose project"
        click.echo(f"platform    {platform.get('name')} ({where} {platform.get('project')})")
    if shaping.get("netem_available") is None:  # Kubernetes: the controller probes no kernel
        click.echo(f"shaping     backend {shaping.get('backend', '-')}")
    else:
        netem = "netem available" if shaping.get("netem_available") else "no sch_netem in this kernel"
        click.echo(f"shaping     backend {shaping.get('backend', '-')} ({netem})")
    if latest:
        click.echo(
            f"lag         {seconds(latest.get('lag_seconds'))} on {latest.get('replica')} ({latest.get('status')}), "
            f"heartbeat every {recorder.get('interval_ms')} ms"
        )
    servers = recorder.get("servers") or {}
    if servers:
        click.echo("servers     " + ", ".join(f"{name} {version}" for name, version in servers.items()))
    for problem in health.get("problems") or []:
        click.echo(f"PROBLEM     {problem['message']} - repair: {problem['repair']}")
    restart = health.get("restart") or {}
    for part in ("faults", "shaping", "set_aside"):
        for text in restart.get(part) or []:
            click.echo(f"at start    {text}")
    if restart.get("run"):
        click.echo(f"at start    {restart['run']}")
    click.echo("\nservices")
    rows = []
    for c in data["containers"]:
        shaped = "; ".join(impairment_words(d) for d in c["shaping"]) or ("-" if c["shapeable"] else "(never shaped)")
        rows.append((c["service"], "running" if c["running"] else "stopped", c["ip"], shaped))
    table(("service", "state", "ip", "shaping in force"), rows, indent="  ")
    faults = data["faults"]["active"]
    if faults:
        click.echo("\nactive faults")
        table(
            ("id", "service", "action", "lasts"),
            [
                (
                    f["id"],
                    f["service"],
                    f["action"],
                    f"{f['duration_seconds']:g} s" if f.get("duration_seconds") else "undone by hand",
                )
                for f in faults
            ],
            "  ",
        )
    if data["partitions"]:
        click.echo("\npartitions")
        table(
            ("id", "a", "b", "one way", "heals in"),
            [
                (p["id"], ",".join(p["a"]), ",".join(p["b"]), "yes" if p.get("oneway") else "no", p.get("expires_in"))
                for p in data["partitions"]
            ],
            "  ",
        )
    load = data["load"]
    if load.get("running"):
        profile = load.get("profile") or {}
        click.echo(
            f"\nload        {profile.get('script')} at {profile.get('rate')} TPS, {profile.get('threads')} threads ({load.get('owner')})"
        )
    active = [r for r in data["runs"] if r["step"] != "done"]
    for r in active:
        click.echo(
            f"\nrun         {r['id']}: point {r['point'] or '-'}/{r['points']}, {r['step']}, ETA {int(r['eta_seconds'])} s"
        )


def _lag_row(sample: dict) -> tuple:
    return (
        sample["time"][11:23],
        sample.get("replica"),
        seconds(sample.get("lag_seconds")),
        seconds(sample.get("lag_error_seconds")),
        seconds(sample.get("applier_lag_seconds")),
        seconds(sample.get("transit_seconds")),
        f"{sample.get('io_running') or '-'}/{sample.get('sql_running') or '-'}",
        sample["status"] + (f" ({sample['reason']})" if sample.get("reason") else ""),
    )


@click.command()
@click.option("--follow", "-f", is_flag=True, help="A line per interval until Ctrl-C (like pt-heartbeat --monitor).")
@click.option("--replica", metavar="SERVICE", help="One replica (a cluster member, say); default: the target.")
@click.option("--interval", default=1.0, show_default=True, metavar="SECONDS", help="With --follow.")
@pass_session
def lag(session: Session, follow: bool, replica: str | None, interval: float) -> None:
    """Replication lag now: the latest sample of the controller's recorder, with its error bound and the
    replica's own applier and transit figures. Exit 1 while replication does not flow (a gap sample).

    \b
    Examples:
      laglab lag
      laglab lag --follow --replica gr-node2
    """
    query = {"seconds": 0, **({"replica": replica} if replica else {})}
    path = f"/api/lag?{urlencode(query)}"
    if not follow:
        body = session.call("GET", path)
        if body["latest"] is None:
            raise check_failed("no lag sample yet (the recorder starts with the lab)")
        latest = body["latest"]
        session.emit(latest, lambda s: table(LAG_HEADER, [_lag_row(s)]))
        if latest["status"] != "ok":
            raise check_failed(f"replication is not flowing: {latest.get('reason') or latest['status']}")
        return
    last = None
    # Ctrl-C ends it with exit 0 in every state: printing the header, a request in flight, asleep.
    try:
        if not session.json_output:
            click.echo(_line(LAG_HEADER))
        while True:
            sample = session.call("GET", path)["latest"]
            if sample is not None and sample["epoch"] != last:
                last = sample["epoch"]
                click.echo(json.dumps(sample, sort_keys=True) if session.json_output else _line(_lag_row(sample)))
            time.sleep(interval)
    except KeyboardInterrupt:
        pass


def _line(cells) -> str:
    """A --follow line: fixed columns, so that the header stays above its values."""
    widths = (12, 14, 10, 10, 10, 10, 8)
    return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)) + "  " + str(cells[-1])


@click.command()
@click.option(
    "--timeout", "wait", default=30.0, show_default=True, metavar="SECONDS", help="For the target to catch up."
)
@pass_session
def consistency(session: Session, wait: float) -> None:
    """Wait for the target to execute the source's GTID set, then compare every lab table (checksums).
    Exit 1 when they differ.

    \b
    Example:  laglab consistency
    """
    body = session.call("GET", f"/api/consistency?timeout={wait:g}", timeout=wait + 60)

    def human(b: dict) -> None:
        table(
            ("table", "source rows", "target rows", "identical"),
            [
                (
                    t["table"],
                    (t["source"] or {}).get("rows"),
                    (t["target"] or {}).get("rows"),
                    "yes" if t["identical"] else "NO",
                )
                for t in b["tables"]
            ],
        )
        for difference in b["differences"]:
            click.echo(f"difference: {difference}")
        click.echo("identical" if b["identical"] else "NOT identical")

    session.emit(body, human)
    if not body["identical"]:
        raise check_failed("the target differs from the source: " + "; ".join(body["differences"][:3]))


@click.command()
@pass_session
def reset(session: Session) -> None:
    """The lab as `make up` leaves it, one line per step: the panel's load stopped, every fault undone,
    partitions healed, the delay matrix and all shaping cleared (toxiproxy's `/reset`, pumba's end). A
    scenario run in progress is left to its own cleanup: `laglab runs stop` ends it.

    \b
    Example:  laglab reset
    """
    said: list[str] = []
    running = [r["id"] for r in session.call("GET", "/api/runs")["runs"] if r.get("step") != "done"]
    load = session.call("GET", "/api/load")
    if load.get("running") and load.get("owner") == "panel":
        session.call("DELETE", "/api/load")
        said.append("load: stopped")
    elif load.get("running"):
        said.append(f"load: left to run {load.get('owner')} (it stops with the run)")
    else:
        said.append("load: none running")
    faults = session.call("GET", "/api/faults")["active"]
    for found in faults:
        session.call("DELETE", f"/api/faults/{found['id']}", timeout=120)
    said.append(f"faults: {len(faults)} undone" if faults else "faults: none in force")
    for path, what in (("/api/partitions", "partitions: healed"), ("/api/matrix", "delay matrix: cleared"),
                       ("/api/shaping", "shaping: cleared")):  # fmt: skip
        answer = session.request("DELETE", path, timeout=120)
        if not answer.ok:
            raise refused(f"DELETE {path}: {answer.error} ({answer.status_code})")
        said.append(what)
    if running:
        said.append(f"run {', '.join(running)}: still in progress (laglab runs stop ends it and cleans up)")
    session.emit({"reset": said}, lambda data: [click.echo(line) for line in data["reset"]])
