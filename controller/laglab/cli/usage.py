"""Every command and option of `laglab` as a reference, generated from the commands themselves (the
click tree): docs/cli.md carries it between markers, `scripts/docs` writes it and a unit test fails
when the page is stale (#36.3: `--timeout`, `lag --interval`, `verify --count` ... were documented
nowhere)."""

from __future__ import annotations

from collections.abc import Iterator

import click


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command, the group first, in the order --help lists them."""
    yield path, group
    ctx = click.Context(group, info_name="laglab")
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def _usage(path: tuple[str, ...], command: click.Command) -> str:
    ctx = click.Context(command, info_name=" ".join(("laglab", *path)))
    return " ".join(command.collect_usage_pieces(ctx)).replace("[OPTIONS]", "").strip()


def _option(param: click.Option) -> tuple[str, str, str]:
    names = ", ".join(param.opts + param.secondary_opts)
    if not param.is_flag:
        names += f" {param.metavar or param.type.name.upper()}"
    unset = param.default is None or type(param.default).__name__ == "Sentinel"  # click 8.2's UNSET
    default = "" if param.is_flag or unset or param.required else f"`{param.default}`"
    if isinstance(param.type, click.Choice):
        names = ", ".join(param.opts) + " " + "\\|".join(param.type.choices)
    return f"`{names}`", default, " ".join((param.help or "").split()).replace("|", "\\|")


def markdown(cli: click.Group) -> str:
    """A section per command: its usage, its first line of help, a table of its options."""
    out = []
    for path, command in commands(cli):
        title = " ".join(("laglab", *path))
        usage = _usage(path, command) if path else "[OPTIONS] COMMAND"
        out.append(f"### `{title}{' ' + usage if usage else ''}`\n")
        summary = (command.help or "").split("\n\n")[0]
        out.append(" ".join(summary.split()) + "\n")
        options = [p for p in command.params if isinstance(p, click.Option) and p.name != "json_here" and not p.hidden]
        if options:
            out.append("| option | default | what |\n|---|---|---|")
            out += [f"| {names} | {default} | {what} |" for names, default, what in map(_option, options)]
            out.append("")
    return "\n".join(out).rstrip() + "\n"
