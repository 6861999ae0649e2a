"""The report's Replayed profiles section: for each point whose load replayed a write profile, the
profile's own figures (what `laglab profile` read from the customer's binlog) beside the replay's, read
by the server's mysqlbinlog from the binlog the replay wrote (replay.replayed), so a reader sees how
close the lab came to the customer's shape before reading its lag."""

from __future__ import annotations

ROWS = (
    ("transactions", "transactions", "{:.0f}"),
    ("span_seconds", "over (s)", "{:g}"),
    ("bytes_per_second", "binlog bytes/s", "{:,.0f}"),
    ("transaction_bytes_p50", "transaction p50 (bytes)", "{:,.0f}"),
    ("transaction_bytes_p99", "transaction p99 (bytes)", "{:,.0f}"),
    ("transaction_bytes_max", "largest transaction (bytes)", "{:,.0f}"),
    ("large", "transactions of 1 MiB or more", "{:.0f}"),
    ("large_period_seconds", "their period (s)", "{:g}"),
)


def _cell(value, form: str) -> str:
    return "-" if value is None else form.format(value)


def lines(summary: dict) -> list[str]:
    points = [p for p in summary.get("points", []) if p.get("replay")]
    if not points:
        return []
    out = [
        "",
        "## Replayed write profiles",
        "",
        "Each replay's figures are read back from the binlog it wrote (the server's own mysqlbinlog, the lab's "
        "heartbeat left out), beside the profile's. A replay shorter than its profile holds fewer transactions and "
        "bursts; a longer one repeats the profile.",
    ]
    for p in points:
        replay = p["replay"]
        profile, measured = replay.get("profile") or {}, replay.get("replay") or {}
        figures = profile.get("figures") or {}
        out += [
            "",
            f"Point {p['point']}: {profile.get('profile')}, speed {profile.get('speed', 1):g}, "
            f"{profile.get('threads')} connections (the parallelism the profile recorded)",
            "",
            "| figure | profile | replay |",
            "|---|---|---|",
        ]
        if measured.get("error"):
            out.append(f"| (replay) | | not read: {measured['error']} |")
        for key, label, form in ROWS:
            out.append(f"| {label} | {_cell(figures.get(key), form)} | {_cell(measured.get(key), form)} |")
    return out
