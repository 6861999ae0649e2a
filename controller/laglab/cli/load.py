"""laglab load start|stop|status: the panel's load generator (POST/GET/DELETE /api/load)."""

from __future__ import annotations

import click

from .base import Session, pass_session


def _load_line(body: dict) -> str:
    if not body.get("running"):
        ended = f" (last: {body['error']})" if body.get("error") else ""
        return f"load: not running{ended}"
    profile = body.get("profile") or {}
    latest = body.get("latest") or {}
    now = f", now {latest.get('tps')} TPS, p95 {latest.get('latency_p95_ms')} ms" if latest else ""
    return (f"load: {profile.get('script')} at {profile.get('rate') or 'max'} TPS, {profile.get('threads')} threads, "
            f"{body.get('seconds')} s ({body.get('owner')}){now}")  # fmt: skip


@click.group()
def load() -> None:
    """The lab's load generator (sysbench in loadgen, at a fixed rate).

    \b
    Examples:
      laglab load start --rate 200 --threads 4 --seconds 300 --prepare
      laglab load status
      laglab load stop
    """


@load.command()
@click.option("--script", default="oltp_write_only", show_default=True, help="The sysbench script (oltp_write_only, oltp_read_write, oltp_insert, ...).")  # fmt: skip
@click.option("--rate", default=100, show_default=True, help="Transactions per second, in total; 0 = as fast as it goes.")  # fmt: skip
@click.option("--threads", default=4, show_default=True, help="sysbench's connections to the source.")
@click.option("--seconds", default=600, show_default=True, help="How long it runs, in seconds (then it stops by itself).")  # fmt: skip
@click.option("--tables", default=4, show_default=True, help="sysbench's tables (sbtest1..N in the lab database).")
@click.option("--rows", default=10000, show_default=True, help="Rows per table, when --prepare makes them.")
@click.option("--prepare", is_flag=True, help="Drop and make the tables first (sysbench cleanup + prepare).")
@pass_session
def start(session: Session, **body) -> None:
    """Start sysbench in loadgen.

    \b
    Example:  laglab load start --rate 200 --threads 8 --seconds 300 --prepare
    """
    session.emit(session.call("POST", "/api/load", body, timeout=600), lambda b: click.echo(_load_line(b)))


@load.command()
@pass_session
def stop(session: Session) -> None:
    """Stop the panel's load (sysbench gets SIGTERM).

    \b
    Example:  laglab load stop
    """
    session.emit(session.call("DELETE", "/api/load"), lambda b: click.echo("stopping " + _load_line(b)))


@load.command(name="status")
@pass_session
def load_status(session: Session) -> None:
    """Running or not, its profile and its latest per-second report.

    \b
    Example:  laglab load status --json
    """
    session.emit(session.call("GET", "/api/load"), lambda b: click.echo(_load_line(b)))
