"""A run's CSV files read back, and a figure written into a report's table cell."""

from __future__ import annotations

import csv
from pathlib import Path


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines())) if path.exists() else []


def num(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value else "0"
    return str(value)


def cluster_tables(summary: dict) -> dict[str, dict]:
    """Per cluster type: {"threads": [...], "delays": [...], "seconds": {(threads, delay_ms): s}}."""
    out: dict[str, dict] = {}
    for p in summary.get("points", []):
        c = p.get("cluster")
        if not c:
            continue
        table = out.setdefault(c["kind"], {"threads": [], "delays": [], "seconds": {}})
        threads, delay = p["load"]["threads"], c["delay_ms"]
        if threads not in table["threads"]:
            table["threads"].append(threads)
        if delay not in table["delays"]:
            table["delays"].append(delay)
        table["seconds"][(threads, delay)] = p.get("load_seconds")
    for table in out.values():
        table["threads"].sort()
        table["delays"].sort()
    return out
