"""Every example a user can copy from README.md and docs/*.md (the commands of their ```sh blocks), and
how each is run by a test (#36.2: examples failed as written because nothing ran them).

An example is one command as a shell reads it: continuation lines joined, comment lines left out (the
prose around it), a trailing comment kept (bash ignores it). Each is classified by the first RULE
that matches it:

- `lab`: tests/integration/test_documented_examples.py runs it as written, with bash, from the
  checkout's root, against the lab `make up` started, block by block in the page's order;
- `elsewhere`: another test runs exactly this command (named, and checked to contain it);
- `started`: a full experiment (tens of minutes): started as written, then stopped (`laglab runs
  stop`), which proves the file and the command, not the experiment's outcome;
- `dry-run`: a make target that would take the lab away from the tests that share it (down, clean,
  test itself): `make -n` proves the target exists and what it runs, in the unit tests;
- `cluster`: needs a Kubernetes cluster or an image registry, which cannot run here: checked offline
  (tests/unit/test_documented_examples.py: kustomize renders the overlay, the Dockerfile exists, the
  laglab command parses); what only a cluster can check is said there.

A new example that no rule matches fails the unit test: it must be given a way to be run.

The `laglab ... --help` examples are examples too (`help_examples`, as `./laglab ...` from the checkout's
root): classified by the same rules, except that a scenario's --quick run already run as written (by a
page, or by an earlier --help) is `same` (minutes each; the rest run again, in their page's sequence),
and one naming a cluster profile's members (gr-node2) is `members`:
tests/integration/test_clusters.py runs those while the profiles are up."""

from __future__ import annotations

import re
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pages(root: Path = ROOT) -> tuple[str, ...]:
    return ("README.md", *sorted(f"docs/{p.name}" for p in (root / "docs").glob("*.md")))


@dataclass(frozen=True)
class Example:
    page: str
    line: int  # where the command starts, 1-based
    block: int  # the page's n-th sh block, from 0
    command: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.command}"


def examples(root: Path = ROOT) -> list[Example]:
    out = []
    for page in pages(root):
        lines = (root / page).read_text().splitlines()
        block, inside, language = -1, False, ""
        pending, start = "", 0
        for number, raw in enumerate(lines, start=1):
            if raw.startswith("```"):
                inside = not inside
                language = raw[3:].strip() if inside else ""
                block += 1 if inside else 0
                continue
            if not inside or language != "sh":
                continue
            text = raw.strip()
            if not pending and (not text or text.startswith("#")):
                continue
            if not pending:
                start = number
            if text.endswith("\\"):
                pending += text[:-1].rstrip() + " "
                continue
            out.append(Example(page, start, block, pending + text))
            pending = ""
    return out


@dataclass(frozen=True)
class Rule:
    kind: str  # lab | elsewhere | dry-run | cluster
    pattern: str  # re.search on the command
    why: str = ""
    pages: tuple[str, ...] = ()  # only on these pages (empty: any)

    def matches(self, example: Example) -> bool:
        return bool(re.search(self.pattern, example.command)) and (not self.pages or example.page in self.pages)


KUBERNETES = ("docs/kubernetes.md",)

RULES = (
    Rule("elsewhere", r"^make up\b", "the CI's own start: scripts/test runs make up before the lab's tests"),
    Rule("dry-run", r"^make (test|down|clean|clean-results)\b", "takes the lab (or its images) away from the tests"),
    Rule("elsewhere", r"replication-max-pressure\.yaml --quick", "test_scenarios.py runs it and judges its knee"),
    Rule("elsewhere", r"replication-latency-sweep\.yaml --quick", "test_scenarios.py runs it and judges its points"),
    Rule("cluster", r"REGISTRY/|kustomize edit|kubectl |make run SCENARIO",
         "needs a Kubernetes cluster or an image registry", pages=("README.md", *KUBERNETES)),
    Rule("cluster", r"^\./laglab ", "the lab on Kubernetes", pages=KUBERNETES),
    # A full experiment (tens of minutes): started as written, then stopped with `laglab runs stop`.
    Rule("started", r"^\./laglab run \S+\.yaml( --seed \d+)? +(#|$)", "a full run: started, then stopped"),
    Rule("lab", r"^(\./laglab|make (help|lag|consistency)|curl|docker compose exec|export LAB_API_TOKEN=\$\(sed)"),
)  # fmt: skip

# What `elsewhere` names: the file of the test that runs exactly the command.
ELSEWHERE = {
    r"^make up\b": "scripts/test",
    r"replication-max-pressure\.yaml --quick": "controller/tests/integration/test_scenarios.py",
    r"replication-latency-sweep\.yaml --quick": "controller/tests/integration/test_scenarios.py",
}


def rule(example: Example) -> Rule | None:
    return next((r for r in RULES if r.matches(example)), None)


def parse_cli(args: list[str]):
    """`laglab ARGS` parsed as click parses it, down to the command, without running it (files named as
    arguments must exist, from the current directory). Raises click's error when it does not parse;
    returns the command."""
    import warnings

    import click

    from laglab.cli import cli

    def unparsed(ctx):
        with warnings.catch_warnings():  # click 8.2+: a group's subcommand is still in protected_args
            warnings.simplefilter("ignore", DeprecationWarning)
            return [*ctx.protected_args, *ctx.args]

    ctx = cli.make_context("laglab", list(args))
    command, rest = cli, unparsed(ctx)
    while isinstance(command, click.Group) and rest:
        name, command, rest = command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)
        rest = unparsed(ctx) if isinstance(command, click.Group) else []
    if isinstance(command, click.Group) and not command.invoke_without_command:
        raise click.UsageError(f"{' '.join(args)}: names a group, not a command")
    return command


def help_examples() -> list[Example]:
    """Every `laglab ...` line of every --help (the examples a user copies), in the order `laglab --help`
    and its commands list them; page is the help's command line, line the example's rank on it."""
    import click
    from click.testing import CliRunner

    from laglab.cli import cli

    def walk(group: click.Group, prefix: tuple[str, ...] = ()):
        yield prefix
        for name, command in group.commands.items():
            yield from walk(command, (*prefix, name)) if isinstance(command, click.Group) else [(*prefix, name)]

    out = []
    for path in walk(cli):
        text = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200).output
        page, in_block = " ".join(("laglab", *path, "--help")), False
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("Example"):
                in_block = True
                line = line.split(":", 1)[1].strip()
            elif not line:
                in_block = False
            line = re.split(r"\s{2,}", line)[0]  # the words after an example, as in `preset`'s
            if in_block and re.search(r"(^|\()laglab ", line):  # `source <(laglab completion bash)` too
                command = "./" + line if line.startswith("laglab ") and "completion" not in line else line
                out.append(Example(page, len([e for e in out if e.page == page]) + 1, 0, command))
    return out


def same_command(command: str) -> str:
    """A command as bash runs it: its comment and spacing left out."""
    return shlex.join(shlex.split(command, comments=True))


MEMBERS = r"\b(gr|galera)-node\d"


def help_rules(helps: list[Example] | None = None) -> list[tuple[Example, Rule, str]]:
    """Each --help example with its rule, and for `same` the example (page:line) that runs it."""
    ran = {same_command(e.command): str(e) for e in examples() if rule(e) and rule(e).kind in ("lab", "started")}
    out = []
    for example in help_examples() if helps is None else helps:
        key = same_command(example.command)
        if key in ran and re.match(r"\./laglab run \S+ --quick", key):  # minutes each: once is enough
            out.append((example, Rule("same", "", "run as written by another example"), ran[key]))
        elif "laglab completion" in example.command:
            out.append((example, Rule("completion", "", "tests/unit/test_cli.py, in bash; zsh is not here"), ""))
        elif re.search(MEMBERS, example.command):
            out.append((example, Rule("members", MEMBERS, "tests/integration/test_clusters.py, profiles up"), ""))
        else:
            out.append((example, rule(example), ""))
            ran[key] = str(example)
    return out


def ctrl_c_in_a_terminal() -> None:
    """What a terminal's foreground job starts with: SIGINT and SIGQUIT at their defaults. A job started
    with `cmd &` by a non-interactive shell has them ignored (bash(1), SIGNALS), and Python keeps an
    ignored SIGINT: no Ctrl-C could reach it (#51, the documented-examples run)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
