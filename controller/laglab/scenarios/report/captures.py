"""The report's Captures section: each `capture:` step's pcaps (one per side of the link), their
packet counts, why each capture ended and what the link held while it ran (its shaping.csv)."""

from __future__ import annotations

import csv
import json
from pathlib import Path


def lines(run: Path) -> list[str]:
    found = sorted(Path(run).glob("captures/*/capture.json"))
    if not found:
        return []
    out = [
        "",
        "## Captures",
        "",
        "A pcap per side of the link, as that side's eth0 saw it (only packets between the two); "
        "`shaping.csv` beside them says what the link held at the start and at each change, by epoch and by "
        "seconds since the capture's start (Wireshark's *Time since beginning of capture*). "
        "Read one with `tcpdump -r FILE -n -tt`.",
        "",
        "| capture | link | lasted (s) | ended by | pcap (packets, dropped) | shaping while it ran |",
        "|---|---|---|---|---|---|",
    ]
    for meta_file in found:
        meta = json.loads(meta_file.read_text())
        where = meta_file.parent.relative_to(run).as_posix()
        pcaps = "; ".join(
            f"[{f['file']}]({where}/{f['file']}) ({f.get('captured') if f.get('captured') is not None else '?'}, "
            f"{f.get('dropped_by_kernel') if f.get('dropped_by_kernel') is not None else '?'})"
            for f in meta.get("files", {}).values()
        )
        ended = meta.get("stopped_by") or "?"
        if meta.get("error"):
            ended += f": {meta['error'][:200]}"
        out.append(
            f"| {meta_file.parent.name} | {' <-> '.join(meta.get('link', []))} | {meta.get('elapsed_seconds', 0):.1f} | "
            f"{ended} | {pcaps} | {shaping_words(meta_file.parent / 'shaping.csv')} |"
        )
    return out


def shaping_words(path: Path, most: int = 6) -> str:
    """'+0.0 s a->b delay 90ms; ...' from a capture's shaping.csv (the first `most` rows)."""
    if not path.exists():
        return "-"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    text = "; ".join(f"+{float(r['since_start_s']):.1f} s {r['direction']} {r['shaping']}" for r in rows[:most])
    return text + (f"; … ({len(rows) - most} more in shaping.csv)" if len(rows) > most else "")
