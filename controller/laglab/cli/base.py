"""What every command shares: the API session, the exit codes, one-line errors, aligned tables."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from laglab import config
from laglab.cli.client import Client, Response


class TimeType(click.ParamType):
    """A time as a person types it: the unit is required ('20s', '125ms', '500us'); a bare number is a
    usage error naming the units (tc would read it as microseconds). Passed on as typed."""

    name = "TIME"

    def convert(self, value, param, ctx):
        from laglab.shaping.params import ParamError, parse_time

        try:
            parse_time("time", value, high=86400.0)
        except ParamError as error:
            self.fail(error.message.split(": ", 1)[-1], param, ctx)
        return value


TIME = TimeType()

# 5: a run whose points did not measure what was asked (the link not as asked, the load or a timeline step
# failed): its checks say nothing either way, which is not "the check did not hold" (1).
EXIT_CODES = {"ok": 0, "check failed": 1, "usage": 2, "refused": 3, "unreachable": 4, "not valid": 5}


class Failure(click.ClickException):
    """One line on stderr, `laglab: error: ...`, and the exit code of its kind."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.exit_code = EXIT_CODES[kind]

    def show(self, file=None) -> None:
        click.echo(f"laglab: error: {self.format_message()}", err=True)


def refused(message: str) -> Failure:
    return Failure(message, "refused")


def check_failed(message: str) -> Failure:
    return Failure(message, "check failed")


@dataclass
class Session:
    """The controller's address and token (from .env, like make up; --url and --token override them)
    and how to print."""

    json_output: bool = False
    url: str | None = None
    token: str | None = None
    timeout: float = 60.0
    _client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            try:
                client = Client.from_env(timeout=self.timeout)
            except config.ConfigError as error:
                raise Failure(f"the lab's configuration: {error}", "usage") from error
            if self.url:
                client.base = self.url.rstrip("/")
            if self.token is not None:
                client.token = self.token
            self._client = client
        return self._client

    def request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Response:
        try:
            return self.client.request(method, path, json_body=body, timeout=timeout)
        except (OSError, ValueError) as error:
            raise Failure(f"the controller at {self.client.base} cannot be reached: {error}", "unreachable") from error

    def call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        """The answer's JSON; an error answer is a Failure carrying the API's message (exit 3)."""
        answer = self.request(method, path, body, timeout)
        if not answer.ok:
            raise refused(f"{method} {path.split('?')[0]}: {answer.error} ({answer.status_code})")
        try:
            return answer.json()
        except ValueError as error:
            raise refused(f"{method} {path}: not JSON: {answer.text[:200]}") from error

    def emit(self, data: Any, human: Callable[[Any], None]) -> None:
        """--json: the API's answer as it came; otherwise the human rendering of it."""
        if self.json_output:
            click.echo(json.dumps(data, indent=2, sort_keys=True))
        else:
            human(data)


def main_options(function):
    """The options every command shares, on the group: --json, --url, --token, --timeout."""
    options = [
        click.option("--json", "json_output", is_flag=True, help="Print the API's answers as JSON (for scripts)."),
        click.option(
            "--url",
            envvar="LAGLAB_URL",
            metavar="URL",
            help="The controller (default: from .env, http://CONTROLLER_BIND:CONTROLLER_PORT; env LAGLAB_URL).",
        ),
        click.option("--token", metavar="TOKEN", help="Bearer token (default: LAB_API_TOKEN, from .env)."),
        click.option(
            "--api-timeout",
            "--timeout",
            "timeout",
            default=60.0,
            show_default=True,
            metavar="SECONDS",
            help="How long one API call may take (not a run's or a wait's length: those are --for).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def pass_session(function):
    """Passes the Session, and gives the command its own --json: `laglab show mysql-source --json` as
    well as `laglab --json show mysql-source` (kubectl takes -o json anywhere; ours was refused after the
    command with 'No such option')."""

    @click.option("--json", "json_here", is_flag=True, help="Print the API's answers as JSON (for scripts).")
    @click.pass_context
    @functools.wraps(function)
    def wrapper(ctx, *args, json_here: bool = False, **kwargs):
        session = ctx.find_object(Session)
        if json_here:
            session.json_output = True
        return ctx.invoke(function, session, *args, **kwargs)

    return wrapper


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> None:
    """Columns aligned on the widest cell; None prints as '-'."""
    cells = [[str(h) for h in header]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        click.echo(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def seconds(value: float | None, digits: int = 3) -> str:
    """A duration in the unit a reader wants: '120 ms', '4.2 s', '-'."""
    if value is None:
        return "-"
    if abs(value) < 1:
        return f"{value * 1000:.{max(digits - 2, 0)}f} ms"
    return f"{value:.{max(digits - 2, 1)}f} s"


def human_bytes(n: float | None) -> str:
    """A size in the unit a reader wants: '24 B', '3.8 KiB', '4.1 MiB', '-'."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def comma_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
