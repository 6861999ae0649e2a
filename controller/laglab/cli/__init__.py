"""`laglab`: the lab from a terminal, a thin layer over the controller's REST API (laglab.cli.client).

Every command is one or a few API calls; nothing here touches Docker, the kernel or a server itself.
Human output by default (aligned tables, units); `--json` prints the API's answers for scripts.

Exit codes (the same for every command):
  0  done
  1  a check did not hold (consistency: not identical; run: an assertion failed, NOT REPRODUCED, or it failed)
  2  usage: a bad option or argument (click), or an invalid scenario file
  3  the lab refused: the API answered with an error (its message is printed)
  4  the controller cannot be reached
  5  a run is not valid (a point measured something other than what was asked)

One module per group of commands: lab.py (status, lag, consistency, reset), shaping.py (shape, clear, show,
preset, matrix, verify), faults.py (fault, partition, heal), capture.py (capture, captures), load.py,
runs.py (run, runs, report).
"""

from __future__ import annotations

import sys

import click

from laglab.cli.base import EXIT_CODES, Session, main_options
from laglab.cli.capture import capture, captures
from laglab.cli.faults import fault, heal, partition
from laglab.cli.lab import consistency, dashboard, lag, reset, status
from laglab.cli.load import load
from laglab.cli.profile import profile_command
from laglab.cli.runs import report, run, runs
from laglab.cli.scenario import scenario
from laglab.cli.shaping import clear, matrix, preset, shape, show, verify

__all__ = ["EXIT_CODES", "cli", "main"]

EPILOG = (
    "Exit codes: 0 done, 1 a check failed, 2 usage, 3 the lab refused (the API's message is printed), "
    "4 the controller cannot be reached, 5 a run is not valid."
)


# `laglab --help` by what a command is about, each with its whole first line (click cut them at 45
# characters and listed 22 commands alphabetically). A new command goes in one section (a unit test).
SECTIONS = (
    ("The lab", ("status", "dashboard", "lag", "consistency", "reset")),
    ("The network", ("shape", "clear", "show", "preset", "matrix", "verify", "capture", "captures")),
    ("Faults", ("fault", "partition", "heal")),
    ("Experiments", ("run", "runs", "report", "scenario", "load", "profile")),
    ("This command", ("completion",)),
)


class Sections(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for _title, names in SECTIONS for name in names if name in self.commands]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, names in SECTIONS:
            rows = [(n, self.commands[n].get_short_help_str(limit=1000)) for n in names if n in self.commands]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@click.group(
    cls=Sections,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog=EPILOG,
)
@main_options
@click.version_option(package_name="laglab-controller", prog_name="laglab", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, json_output: bool, url: str | None, token: str | None, timeout: float) -> None:
    """laglab: shape the lab's network, watch replication lag, run scenarios.

    \b
    Examples:
      laglab status
      laglab shape --link mysql-source mysql-target --rtt 180ms --rate 2mbit
      laglab lag --follow
      laglab run scenarios/customer-example-rtt180-2mbit.yaml --quick
    """
    ctx.obj = Session(json_output=json_output, url=url, token=token, timeout=timeout)


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script.

    \b
    Example (bash):  source <(laglab completion bash)
    Example (zsh):   laglab completion zsh > "${fpath[1]}/_laglab"
    """
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)(cli, {}, "laglab", "_LAGLAB_COMPLETE")
    click.echo(completer.source())


for command in (
    status,
    dashboard,
    lag,
    consistency,
    shape,
    clear,
    show,
    preset,
    matrix,
    verify,
    fault,
    partition,
    heal,
    reset,
    capture,
    captures,
):
    cli.add_command(command)
for command in (load, run, runs, report, scenario, profile_command):
    cli.add_command(command)


def main() -> None:
    """The command, its errors in one line each (docs/cli.md): a usage error names the command's --help
    instead of click's three lines of usage."""
    try:
        code = cli.main(prog_name="laglab", standalone_mode=False)
    except click.UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else "laglab"
        click.echo(f"laglab: error: {error.format_message()} (see {where} --help)", err=True)
        sys.exit(EXIT_CODES["usage"])
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.Abort:
        click.echo("laglab: interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
