"""Published figures beside the measured ones (a scenario's `reference:`): each cell with its ratio
and whether it agrees within the tolerance, the shapes that carry over between machines, and
report.md's lines for them."""

from __future__ import annotations

from laglab.scenarios.report import words
from laglab.scenarios.report.table import fmt

METRIC_WORDS = {
    "load_seconds": "seconds for the run", "tps": "TPS", "qps": "QPS", "max_lag_seconds": "max lag (s)",
    "p95_lag_seconds": "p95 lag (s)", "lag_slope": "lag slope (s/s)", "link_mbit": "link Mbit/s",
    "max_catch_up_seconds": "catch-up (s)", "binlog_mbit": "binlog Mbit/s",
}  # fmt: skip


def param_value(params: dict, dotted: str):
    """A point's value of `dotted`: swept itself, or inside a section swept whole (`replicator.kind` of a
    swept `replicator`); None when it has none."""
    if dotted in params:
        return params[dotted]
    for key, value in params.items():
        if dotted.startswith(f"{key}.") and isinstance(value, dict):
            return value.get(dotted[len(key) + 1 :])
    return None


def measured_points(summary: dict) -> list[dict]:
    """The points published figures are held against: every point, or in a search each knee's own (the
    last sustained probe at the knee's value): a search's published figure is its knee."""
    knees = summary.get("knees")
    if not knees:
        return summary.get("points", [])
    out = []
    for knee in knees:
        probes = [p for p in summary.get("points", []) if p.get("point") in set(knee.get("points") or [])]
        held = [p for p in probes if p["probe"]["value"] == knee["knee"] and p["probe"]["verdict"] == "sustained"]
        if held:
            out.append(held[-1])
    return out


def agrees(kind: str, ratio: float, tolerance_pct: float) -> bool:
    """measured / published against the tolerance: a figure within it either side; a published bound
    (`at most`, `at least`) on its side, the tolerance beyond it."""
    slack = tolerance_pct / 100
    if kind == "at most":
        return ratio <= 1 + slack
    if kind == "at least":
        return ratio >= 1 - slack
    return abs(ratio - 1) <= slack


def reference_cells(summary: dict) -> list[dict]:
    """Each published cell with the point that measured it (None when the run had no such point: a
    quick run), the ratio measured / published, and whether it is within the file's tolerance."""
    ref = summary.get("reference")
    if not ref:
        return []
    out = []
    for figures in ref["figures"]:
        for key, published in figures["values"].items():
            cell = {**{k: str(v) for k, v in figures["at"].items()}, figures["by"]: key}
            point = next(
                (
                    p
                    for p in measured_points(summary)
                    if all(str(param_value(p["params"], k)) == v for k, v in cell.items())
                ),
                None,
            )
            measured = point.get(ref["metric"]) if point else None
            ratio = measured / published if measured is not None and published else None
            kind = figures.get("kind", "figure")
            within = None if ratio is None or ref.get("not_comparable") else agrees(kind, ratio, ref["tolerance_pct"])
            out.append({"cell": cell, "published": published, "measured": measured, "ratio": ratio, "within": within,
                        "kind": kind})  # fmt: skip
    return out


def shape_rows(summary: dict) -> list[dict]:
    """Each published shape (a ratio of two cells, or where a series saturates) measured on the run."""
    ref = summary.get("reference") or {}
    metric, points = ref.get("metric"), measured_points(summary)

    def matching(cell: dict) -> list[dict]:
        return [p for p in points if all(str(param_value(p["params"], k)) == str(v) for k, v in cell.items())]

    out = []
    for shape in ref.get("shapes") or []:
        measured = None
        if shape.get("ratio"):
            of, to = (matching(shape["ratio"][side]) for side in ("of", "to"))
            a, b = (group[0].get(metric) if group else None for group in (of, to))
            measured = a / b if a is not None and b else None
        else:
            sat = shape["saturation"]
            series = [(words.number(sat["by"], param_value(p["params"], sat["by"])), p.get(metric))
                      for p in matching(sat["at"])]  # fmt: skip
            series = sorted((x[0], y) for x, y in series if x is not None and y is not None)
            if len(series) >= 2:
                top = max(y for _, y in series)
                measured = next(x for x, y in series if y >= (1 - sat["within_pct"] / 100) * top)
        ratio = measured / shape["published"] if measured is not None else None
        within = None if ratio is None or ref.get("not_comparable") else abs(ratio - 1) * 100 <= ref["tolerance_pct"]
        out.append({"name": shape["name"], "published": shape["published"], "measured": measured, "ratio": ratio,
                    "within": within})  # fmt: skip
    return out


def reference_lines(summary: dict) -> list[str]:
    ref = summary.get("reference")
    cells, shapes = reference_cells(summary), shape_rows(summary)
    if not cells and not shapes:
        return []
    src, tolerance = ref["source"], ref["tolerance_pct"]
    keys = list(cells[0]["cell"]) if cells else []
    measured = [c for c in cells if c["ratio"] is not None]
    within = sum(1 for c in measured if c["within"])
    lines = [
        "",
        "## Published figures beside the measured ones",
        "",
        f"[{src['title']}]({src['url']}) ({src['author']}, {src['date']}). Their set-up: {src['setup']}."
        + (" Measured: at each search's knee (its last sustained probe)." if summary.get("knees") else ""),
        "",
        (
            f"Not comparable: {'; '.join(ref['not_comparable'])}. The published figures are shown beside this "
            "run's, not judged."
            if ref.get("not_comparable")
            else f"{METRIC_WORDS.get(ref['metric'], ref['metric'])}: {within} of {len(measured)} measured cells within "
            f"±{tolerance:g} % of the published figure"
            + (
                f"; {sum(1 for r in shapes if r['within'])} of {sum(1 for r in shapes if r['ratio'] is not None)} "
                "measured shapes within it"
                if shapes
                else ""
            )
            + (
                f"; {len(cells) - len(measured)} published cells had no point in this run"
                if len(measured) < len(cells)
                else ""
            )
            + "."
        ),
        "",
    ]
    if cells:
        lines += [
            "| " + " | ".join(words.axis(k) for k in keys) + " | published | measured | measured ÷ published | |",
            "|---" * (len(keys) + 4) + "|",
        ]
    for c in cells:
        verdict = "" if c["within"] is None else ("within" if c["within"] else f"**outside ±{tolerance:g} %**")
        lines.append(
            "| "
            + " | ".join(words.value(k, c["cell"][k]) for k in keys)
            + f" | {({'at most': '≤ ', 'at least': '≥ '}).get(c.get('kind'), '')}{fmt(c['published'], 3)}"
            + f" | {fmt(c['measured'], 3) if c['measured'] is not None else 'not measured'}"
            + f" | {fmt(c['ratio'], 2) if c['ratio'] is not None else '-'} | {verdict} |"
        )
    if shapes:
        lines += ["", "| shape | published | measured | measured ÷ published | |", "|---|---|---|---|---|"]
    for row in shapes:
        verdict = "" if row["within"] is None else ("within" if row["within"] else f"**outside ±{tolerance:g} %**")
        lines.append(
            f"| {row['name']} | {fmt(row['published'], 3)} | "
            f"{fmt(row['measured'], 3) if row['measured'] is not None else 'not measured'} | "
            f"{fmt(row['ratio'], 2) if row['ratio'] is not None else '-'} | {verdict} |"
        )
    return lines
