"""The parts of docs/ generated from the code: each page holds them between two markers,
`<!-- generated: NAME (scripts/docs writes it) -->` and `<!-- end of NAME -->`. `scripts/docs` writes
them; tests/unit/test_generated_docs.py fails when a page differs from what the code says."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path


def _cli_reference() -> str:
    from laglab.cli import cli
    from laglab.cli.usage import markdown

    return markdown(cli)


def _scenario_keys() -> str:
    from laglab.scenarios.schema.keys import markdown

    return markdown()


def _knobs() -> str:
    from laglab.shaping.impairment import KNOBS

    units = {"time": "time: `us`, `ms`, `s`, `m`, `h`", "percent": "percent: `0.5%`",
             "rate": "rate: `kbit`, `Mbit/s` (`mbit`, `Mbps`: megabits), `MB/s` (megabytes); `mbps` refused",
             "count": "whole packets", "gemodel": "`{p, r, 1-h, 1-k}` in percent"}  # fmt: skip
    lines = ["| knob | value | what | e.g. |", "|---|---|---|---|"]
    for k in KNOBS:
        value = units.get(k.kind) or "one of " + ", ".join(f"`{c}`" for c in k.choices)
        lines.append(f"| `{k.name}` | {value} | {k.help} | {f'`{k.example}`' if k.example else ''} |")
    return "\n".join(lines) + "\n"


def _point_record() -> str:
    from laglab.scenarios.analysis.record import PointRecord

    lines = ["| field | what (unit) | always |", "|---|---|---|"]
    for name, info in PointRecord.model_fields.items():
        lines.append(f"| `{name}` | {info.description or ''} | {'yes' if info.is_required() else ''} |")
    return "\n".join(lines) + "\n"


# page (from the repository's root) -> name of the part -> what writes it
PARTS: dict[str, dict[str, Callable[[], str]]] = {
    "docs/cli.md": {"every command and option": _cli_reference},
    "docs/scenarios.md": {"scenario keys": _scenario_keys},
    "docs/shaping.md": {"shaping knobs": _knobs},
    "results/README.md": {"a point's record": _point_record},
}


def _pattern(name: str) -> re.Pattern:
    return re.compile(
        rf"(<!-- generated: {re.escape(name)} \(scripts/docs writes it\) -->\n)(.*?)(<!-- end of {re.escape(name)} -->)",
        re.S,
    )


def rendered(page: str, text: str) -> str:
    """The page's text with each generated part as the code writes it now; KeyError when a marker is missing."""
    for name, make in PARTS[page].items():
        pattern = _pattern(name)
        if not pattern.search(text):
            raise KeyError(f"{page}: no markers for '{name}'")
        body = make()
        text = pattern.sub(lambda m, body=body: m.group(1) + "\n" + body + "\n" + m.group(3), text)
    return text


def write(root: Path) -> list[str]:
    """Writes every page whose generated parts are stale; returns the pages written."""
    written = []
    for page in PARTS:
        path = root / page
        text = path.read_text()
        new = rendered(page, text)
        if new != text:
            path.write_text(new)
            written.append(page)
    return written
