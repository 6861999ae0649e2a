"""The shipped network presets (presets.yaml): region round-trip times and access-link profiles, each
table with its source and date. `link(name)` gives what a preset means for one link."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

FILE = Path(__file__).with_name("presets.yaml")
REGION_SEPARATOR = "/"


@functools.cache
def tables() -> dict:
    return yaml.safe_load(FILE.read_text())


def region_rtt_ms(a: str, b: str) -> float:
    """Round trip between two regions of the table, ms (either order)."""
    rtt = tables()["regions"]["rtt_ms"]
    if a == b:
        raise KeyError(f"{a}: a region and itself")
    for x, y in ((a, b), (b, a)):
        if y in rtt.get(x, {}):
            return float(rtt[x][y])
    known = sorted(set(rtt) | {r for row in rtt.values() for r in row})
    raise KeyError(f"no round trip between {a!r} and {b!r} in the table (regions: {', '.join(known)})")


def profiles() -> dict[str, dict]:
    """Every link preset by name: access profiles, and every region pair as 'a/b'."""
    out = {}
    for table in ("access", "satellite"):
        for name, values in tables()[table]["profiles"].items():
            out[name] = {**values, "table": table}
    rtt = tables()["regions"]["rtt_ms"]
    for a, row in rtt.items():
        for b, ms in row.items():
            out[f"{a}{REGION_SEPARATOR}{b}"] = {"rtt": f"{ms:g}ms", "table": "regions"}
    return out


def link(name: str) -> dict:
    """A preset as a link's settings: rtt, and `rate` (first -> second service, 'up') and
    `rate_reverse` (second -> first, 'down') where the preset has rates."""
    if REGION_SEPARATOR in name:
        a, b = name.split(REGION_SEPARATOR, 1)
        return {"rtt": f"{region_rtt_ms(a, b):g}ms"}
    found = profiles().get(name)
    if found is None:
        access = [n for n, p in profiles().items() if p["table"] != "regions"]
        raise KeyError(
            f"no preset {name!r} (access links: {', '.join(access)}; or a region pair like us-east-1/eu-west-1)"
        )
    out = {"rtt": found["rtt"]}
    if "up" in found:
        out["rate"] = found["up"]
    if "down" in found:
        out["rate_reverse"] = found["down"]
    return out


def sources() -> list[dict]:
    return [{"table": t, "source": " ".join(v["source"].split()), "date": v["date"]} for t, v in tables().items()]
