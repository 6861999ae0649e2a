"""laglab load start|stop|status: the panel's load generator (POST/GET/DELETE /api/load)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from laglab import limits
from laglab.cli.base import TIME, Failure, Session, pass_session
from laglab.load.replay import speed_words
from laglab.shaping.params import parse_time


def _load_line(body: dict) -> str:
    if not body.get("running"):
        ended = f" (last: {body['error']})" if body.get("error") else ""
        return f"load: not running{ended}"
    profile = body.get("profile") or {}
    latest = body.get("latest") or {}
    now = f", now {latest.get('tps')} TPS, p95 {latest.get('latency_p95_ms')} ms" if latest else ""
    replay = profile.get("replay")
    if replay:
        speed = speed_words(float(replay.get("speed") or 1))
        return (f"load: the replay of {replay.get('profile')}{speed}, {profile.get('threads')} threads, "
                f"{body.get('seconds')} s ({body.get('owner')}){now}")  # fmt: skip
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
@click.option("--tps", "rate", default=100, show_default=True, help="Transactions per second, in total; 0 = as fast as it goes.")  # fmt: skip
@click.option("--rate", "older_rate", type=int, hidden=True, help="Older name of --tps.")
@click.option("--threads", default=4, show_default=True, help="sysbench's connections to the source.")
@click.option("--for", "--duration", "duration", type=TIME, default="10m", show_default=True, help="How long it runs (then it stops by itself), e.g. 20s, 10m.")  # fmt: skip
@click.option("--seconds", type=int, hidden=True, help="Older form of --for, in seconds.")
@click.option("--tables", default=4, show_default=True, help="sysbench's tables (sbtest1..N in the lab database).")
@click.option("--rows", default=10000, show_default=True, help="Rows per table, when --prepare makes them.")
@click.option("--prepare", is_flag=True, help="Drop and make the tables first (sysbench cleanup + prepare).")
@click.option("--profile", "profile_file", type=click.Path(dir_okay=False, path_type=Path), help="Replay this write profile (`laglab profile BINLOG` writes it) instead of a sysbench script: its rates, transaction sizes and parallelism.")  # fmt: skip
@click.option("--speed", default=1.0, show_default=True, help="With --profile: the replay's clock (2 = twice as fast).")  # fmt: skip
@pass_session
def start(session: Session, profile_file: Path | None, speed: float, duration: str, seconds: int | None,
          older_rate: int | None, **body) -> None:  # fmt: skip
    """Start sysbench in loadgen: a script at a fixed rate, or the replay of a write profile.

    \b
    Example:  laglab load start --profile scenarios/profiles/nightly-batch.json --speed 2 --for 20s
    """
    body["seconds"] = seconds if seconds is not None else max(1, round(parse_time("for", duration, high=86400.0)))
    if older_rate is not None:
        body["rate"] = older_rate
    if profile_file is not None:
        body = {"seconds": body["seconds"], "speed": speed, "profile_name": profile_file.name[:200],
                "profile": read_profile(profile_file)}  # fmt: skip
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


def read_profile(path: Path) -> dict:
    """The profile's JSON, checked to be one before it is sent (the controller checks its figures)."""
    try:
        text = path.read_text()
    except OSError as error:
        raise Failure(f"--profile: {path}: {error.strerror or error}", "usage") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise Failure(f"--profile: {path} is not JSON ({error}); `laglab profile BINLOG` writes one", "usage") from None
    if not isinstance(data, dict) or "per_second" not in data:
        raise Failure(f"--profile: {path} is not a write profile (`laglab profile BINLOG` writes one)", "usage")
    if len(text) > limits.BODY_BYTES - 4096:
        raise Failure(
            f"--profile: {path} is {len(text)} bytes, more than one request may carry ({limits.BODY_BYTES}); profile a "
            "shorter stretch of the binlog, or run it as a scenario (load: {tool: profile, file: ...})", "usage",
        )  # fmt: skip
    return data
