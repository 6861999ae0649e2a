"""laglab capture: POST /api/captures, followed to its end (GET), Ctrl-C stops it early (DELETE)."""

from __future__ import annotations

import re
import time

import click

from laglab.cli.base import TIME, Session, human_bytes, pass_session, table

UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


class SizeType(click.ParamType):
    """A size as a person types it: '20MB', '512KiB', '1000000' (bytes)."""

    name = "SIZE"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]i?[bB]|[bB])?\s*", str(value))
        if not match:
            self.fail(f"{value!r} is not a size, like 20MB or 512KiB (units: B, kB, MB, GB, KiB, MiB, GiB)", param, ctx)
        return int(float(match.group(1)) * UNITS[(match.group(2) or "").lower()])


def capture_lines(c: dict) -> list[str]:
    where = c.get("results") or c["folder"]
    why = {"duration": "its duration ran out", "size": "a pcap reached --max-size", "asked": "stopped when asked",
           "error": "tcpdump failed"}.get(c.get("stopped_by") or "", "running")  # fmt: skip
    lines = [f"capture {c['id']}: {c['link'][0]} <-> {c['link'][1]}, {c['elapsed_seconds']:.1f} s ({why})"]
    if c.get("error"):
        lines.append(f"  error: {c['error']}")
    rows = [(f"{where}/{f['file']}", service, human_bytes(f["bytes"]), f["captured"], f["dropped_by_kernel"])
            for service, f in c["files"].items()]  # fmt: skip
    header = ("file", "as seen by", "size", "packets", "dropped")
    cells = [[str(h) for h in header]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.append(f"  shaping while it ran: {where}/shaping.csv")
    first = next(iter(c["files"].values()))["file"]
    lines.append(f"  read it:  tcpdump -r {where}/{first} -n -tt | head   (or open it in Wireshark)")
    return lines


@click.command()
@click.option("--link", nargs=2, required=True, metavar="A B", help="The two services whose link is captured.")
@click.option(
    "--for",
    "--duration",
    "duration",
    type=TIME,
    default="30s",
    show_default=True,
    help="How long (units: us, ms, s, m; at most 600s).",
)
@click.option(
    "--max-size",
    type=SizeType(),
    default="64MiB",
    show_default=True,
    help="Each side's pcap at most; it stops at this size.",
)
@click.option("--snaplen", type=click.IntRange(64, 65535), default=96, show_default=True,
              help="Bytes kept of each packet (the headers and ping's timestamp, not the rows).")  # fmt: skip
@pass_session
def capture(session: Session, link: tuple[str, str], duration: str, max_size: int, snaplen: int) -> None:
    """Capture what crosses a link: a pcap per side (tcpdump in each container's network namespace,
    only packets between the two), with the link's shaping as it changed beside them (shaping.csv),
    into results/captures/. Waits for the end; Ctrl-C stops it early and keeps what was captured.

    \b
    Examples:
      laglab capture --link mysql-source mysql-target --for 5s
      laglab capture --link loadgen mysql-target --for 3s --snaplen 128
      laglab captures
    """
    body = {"link": list(link), "for": duration, "max_bytes": max_size, "snaplen": snaplen}
    current = session.call("POST", "/api/captures", body, timeout=30)
    if not session.json_output:
        click.echo(f"capturing {link[0]} <-> {link[1]} for {duration} -> {current.get('results') or current['folder']}")
    last = -10.0
    try:
        while current["status"] == "running":
            time.sleep(1)
            current = session.call("GET", f"/api/captures/{current['id']}")
            if not session.json_output and current["elapsed_seconds"] - last >= 10 and current["status"] == "running":
                last = current["elapsed_seconds"]
                sizes = ", ".join(f"{s} {human_bytes(f['bytes'])}" for s, f in current["files"].items())
                click.echo(f"[{current['elapsed_seconds']:.0f} s of {current['seconds']:g} s] {sizes}")
    except KeyboardInterrupt:
        click.echo("\nstopping the capture; the files keep what was captured ...", err=True)
        current = session.call("DELETE", f"/api/captures/{current['id']}", timeout=30)
    session.emit(current, lambda c: [click.echo(line) for line in capture_lines(c)])


@click.command()
@pass_session
def captures(session: Session) -> None:
    """Running and recent captures (GET /api/captures).

    \b
    Example:  laglab captures
    """

    def human(body: dict) -> None:
        table(("id", "link", "status", "elapsed", "folder"),
              [(c["id"], "<->".join(c["link"]), c["status"], f"{c['elapsed_seconds']:.1f} s", c.get("results") or c["folder"])
               for c in body["captures"]])  # fmt: skip

    session.emit(session.call("GET", "/api/captures"), human)
