"""laglab fault, laglab partition, laglab heal: POST/GET/DELETE /api/faults and /api/partitions."""

from __future__ import annotations

import click

from laglab.cli.base import TIME, Session, comma_list, pass_session, table
from laglab.faults import ACTIONS


def _fault_line(f: dict) -> str:
    if f.get("duration_seconds") is not None and f.get("undo"):
        lasting = f", undone by {f['undo']} after {f['duration_seconds']:g} s"
    elif f.get("undo") and f.get("active"):
        lasting = f", in force until: laglab fault undo {f['id']}"
    else:
        lasting = ""
    effect = f" (in effect after {f['effect_ms']:.0f} ms)" if f.get("effect_ms") is not None else ""
    return f"fault {f['id']}: {f['action']} {f['service']}{effect}{lasting}"


@click.group(invoke_without_command=True)
@click.pass_context
def fault(ctx: click.Context) -> None:
    """Faults on a service's container: kill, stop, pause, restart (undone after --for, if given),
    the list, and undo.

    \b
    Examples:
      laglab fault kill mysql-source
      laglab fault pause mysql-target --for 20s
      laglab fault list
      laglab fault undo f3
      laglab fault undo                   every fault in force
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(fault_list)


def _action_command(action: str) -> click.Command:
    spec = ACTIONS[action]
    undone = spec.undo is not None  # restart has nothing to undo: --for is refused by the API
    if spec.disrupts or not undone:  # from a running container: kill, stop, pause; restart
        example = f"Example:  laglab fault {action} mysql-target" + (" --for 20s" if undone else "")
    else:  # start, unpause: from the state the action it reverses leaves
        example = f"Examples:\n  laglab fault {spec.undo} mysql-target\n  laglab fault {action} mysql-target"
    help_text = f"{action.capitalize()} SERVICE's container (POST /api/faults).\n\n\b\n{example}"
    help_for = f"{ACTIONS[action].undo} again after this long, e.g. 20s (units: us, ms, s, m, h)." if undone else (
        "Not for restart: it has nothing to undo."
    )  # fmt: skip

    @click.command(name=action, help=help_text)
    @click.argument("service")
    @click.option("--for", "--duration", "duration", type=TIME, help=help_for.capitalize())
    @pass_session
    def command(session: Session, service: str, duration: str | None) -> None:
        body = {"service": service, "action": action, **({"duration": duration} if duration else {})}
        session.emit(session.call("POST", "/api/faults", body, timeout=120), lambda f: click.echo(_fault_line(f)))

    return command


for _action in sorted(ACTIONS):
    fault.add_command(_action_command(_action))


@fault.command(name="list")
@pass_session
def fault_list(session: Session) -> None:
    """Active and recent faults.

    \b
    Example:  laglab fault list
    """

    def human(body: dict) -> None:
        active = {f["id"] for f in body["active"]}  # `recent` holds them too: each fault is one row
        rows = [(f["id"], f["service"], f["action"], "active" if f["active"] else "over", f["asked"][11:19],
                 (f.get("undone") or "-")[11:19] or "-")
                for f in body["active"] + [f for f in body["recent"] if f["id"] not in active]]  # fmt: skip
        table(("id", "service", "action", "state", "asked", "undone"), rows)

    session.emit(session.call("GET", "/api/faults"), human)


@fault.command()
@click.argument("fault_id", metavar="[ID]", required=False)
@pass_session
def undo(session: Session, fault_id: str | None) -> None:
    """Undo a fault in force now, or every one (as heal does for partitions): a kill or stop is started
    again, a pause unpaused.

    \b
    Examples:
      laglab fault undo f3
      laglab fault undo
    """
    if fault_id is None:
        ids = [f["id"] for f in session.call("GET", "/api/faults")["active"]]
    else:
        ids = [f"f{fault_id}" if fault_id.isdigit() else fault_id]  # `fault list` shows f3; 3 means it too
    undone = [session.call("DELETE", f"/api/faults/{i}", timeout=120) for i in ids]
    session.emit(undone, lambda fs: [click.echo("undone: " + _fault_line(f)) for f in fs] or click.echo("no fault in force"))  # fmt: skip


class _GroupsAroundDashes(click.Command):
    """`A,B -- C --for 60s`: a `--` between the two groups is a separator, and options may follow it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            args = args[: args.index("--")] + args[args.index("--") + 1 :]
        return super().parse_args(ctx, args)


@click.command(cls=_GroupsAroundDashes)
@click.argument("group_a", metavar="A[,A...]")
@click.argument("group_b", metavar="B[,B...]")
@click.option("--oneway", is_flag=True, help="Only A -> B is cut; B still reaches A.")
@click.option(
    "--for",
    "--duration",
    "duration",
    type=TIME,
    help="Heal by itself after this long, e.g. 60s (units: us, ms, s, m, h).",
)
@click.option(
    "--ports", metavar="PORTS", help="Cut only the packets to or from these ports, e.g. 3306 or 4567-4568,4444."
)
@click.option("--protocol", type=click.Choice(["tcp", "udp"]), help="With --ports: only tcp or udp.")
@pass_session
def partition(
    session: Session, group_a: str, group_b: str, oneway: bool, duration: str | None, ports: str | None,
    protocol: str | None,
) -> None:  # fmt: skip
    """Cut every link between two groups of services (or only their packets on --ports).

    \b
    Examples:
      laglab partition mysql-source -- mysql-target --for 60s
      laglab partition gr-node1,gr-node2 gr-node3 --oneway
      laglab partition mysql-source -- mysql-target --ports 3306 --for 10s
    """
    body = {"a": comma_list(group_a), "b": comma_list(group_b), "oneway": oneway, **({"duration": duration} if duration else {})}  # fmt: skip
    if ports:
        body["ports"] = comma_list(ports)
    if protocol:
        body["protocol"] = protocol

    def human(p: dict) -> None:
        arrow = "->" if p["oneway"] else "<->"
        heals = f", heals in {p['expires_in']}" if p.get("expires_in") else ""
        only = f" on ports {p['ports']}" if p.get("ports") else ""
        click.echo(f"partition {p['id']}: {','.join(p['a'])} {arrow} {','.join(p['b'])} cut{only}{heals}")

    session.emit(session.call("POST", "/api/partitions", body), human)


@click.command()
@click.argument("partition_id", required=False)
@pass_session
def heal(session: Session, partition_id: str | None) -> None:
    """Heal every partition, or one.

    \b
    Examples:
      laglab heal
      laglab heal p2
    """
    if partition_id and partition_id.isdigit():  # `partition` prints p2; 2 means it too
        partition_id = f"p{partition_id}"
    session.call("DELETE", "/api/partitions" + (f"/{partition_id}" if partition_id else ""))
    what = f"partition {partition_id}" if partition_id else "every partition"
    session.emit({"healed": partition_id or "all"}, lambda _: click.echo(f"healed {what}"))
