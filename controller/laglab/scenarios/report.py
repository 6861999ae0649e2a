"""Plots and report.md of a run, made from the run's files alone (summary.json, lag.csv, load.csv,
environment.json), so `make report RUN=results/<run>` rebuilds them anywhere.

    python -m laglab.scenarios.report results/<run>
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from . import bottleneck, report_captures, report_html, report_replay, report_search, verdict, words
from .outcome import point_outcome


def _csv(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines())) if path.exists() else []


def _num(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value else "0"
    return str(value)


def lag_plot(run: Path, summary: dict) -> str | None:
    rows = [r for r in _csv(run / "lag.csv") if _num(r.get("lag_seconds")) is not None]
    if not rows:
        return None
    t0 = float(rows[0]["epoch"])
    fig, ax = plt.subplots(figsize=(11, 4))
    by_point: dict[str, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    params = {str(p["point"]): p["params"] for p in summary.get("points", [])}
    for point, members in by_point.items():
        xs = [float(r["epoch"]) - t0 for r in members]
        ax.plot(xs, [float(r["lag_seconds"]) for r in members], lw=0.8, color="tab:blue")
        ax.axvline(xs[0], color="grey", ls="--", lw=0.7)
        label = words.params(params[point]) if params.get(point) else f"point {point}"
        ax.annotate(
            f" {label}", (xs[0], 1), xycoords=("data", "axes fraction"), rotation=90, va="top", fontsize=7, color="grey"
        )
    events = [e for p in summary.get("points", []) for e in p.get("timeline") or [] if e.get("effect_epoch")]
    for event in events:
        x = float(event["effect_epoch"]) - t0
        colour = "tab:green" if event.get("ends_disruption") else "tab:red"
        ax.axvline(x, color=colour, ls=":", lw=0.9)
        ax.annotate(f" {event['step']}", (x, 0.02), xycoords=("data", "axes fraction"), fontsize=7, color=colour)
    ax.set_xlabel(
        "seconds since the first point started (dashed: shaping changed"
        + ("; dotted: timeline step, red = disruption starts, green = ends" if events else "")
        + ")"
    )
    ax.set_ylabel("replication lag (s)")
    ax.set_title(f"{summary.get('scenario')}: lag over time")
    fig.tight_layout()
    fig.savefig(run / "lag.png", dpi=110)
    plt.close(fig)
    return "lag.png"


def x_axis_key(points: list[dict], sweep: list[str]) -> str | None:
    """The swept key the plot puts on x: one whose every value is a quantity (the last such, as a
    sweep lists its inner loop last); None when no key is numeric (then one point per category)."""
    numeric = [k for k in sweep if all(words.number(k, p["params"].get(k)) is not None for p in points)]
    return numeric[-1] if numeric else None


_LIMIT = re.compile(r"^\s*([a-z_]+)\s*(<=?)\s*([0-9.]+)\s*$")


def asked_limits(points: list[dict]) -> dict[str, float]:
    """The upper limits the scenario asserts on a metric (`max_lag_seconds < 300`), where every point
    asserts the same one: the plots draw them as reference lines."""
    found: dict[str, set[float]] = {}
    for point in points:
        for check in point.get("assertions") or []:
            if m := _LIMIT.match(check.get("assertion", "")):
                found.setdefault(m.group(1), set()).add(float(m.group(3)))
    return {metric: values.pop() for metric, values in found.items() if len(values) == 1}


def reference_line(ax, value: float, text: str, data_top: float) -> None:
    """A limit as a dashed line; one far above the data (more than three times its top) would flatten
    the curve, so it is named in the corner instead."""
    if data_top > 0 and value > 3 * data_top:
        ax.annotate(f"{text} (above)", (0.02, 0.97), xycoords="axes fraction", va="top", fontsize=7, color="grey")
        return
    ax.axhline(value, color="grey", ls="--", lw=1)
    ax.annotate(text, (0.02, value), xycoords=("axes fraction", "data"), va="bottom", fontsize=7, color="grey")


def sweep_plot(run: Path, summary: dict) -> str | None:
    fig = sweep_figure(summary)
    if fig is None:
        return None
    fig.savefig(run / "sweep.png", dpi=100)  # 1400 px wide
    plt.close(fig)
    return "sweep.png"


def sweep_figure(summary: dict):
    """Each metric against the numeric swept key (log x where its values span two decades or more),
    one line per combination of the other keys, in words; small multiples past six lines."""
    points = summary.get("points", [])
    sweep = list(summary.get("sweep") or {})
    if not points or not sweep:
        return None
    x_key = x_axis_key(points, sweep)
    others = [k for k in sweep if k != x_key]
    groups: dict[str, list[dict]] = {}
    for p in points:
        groups.setdefault(words.params(p["params"], others) if others else "all", []).append(p)
    metrics = [
        ("max_lag_seconds", "max lag (s)"),
        ("p95_lag_seconds", "p95 lag (s)"),
        ("tps", "TPS"),
        ("link_mbit", "link Mbit/s"),
    ]
    limits = asked_limits(points)
    asked_rates = sorted(
        {p["verification"]["rate_asked_mbit"] for p in points if (p.get("verification") or {}).get("rate_asked_mbit")}
    )
    # More than six lines do not read on one panel: a row of panels per group (small multiples).
    rows = [[name] for name in groups] if len(groups) > 6 else [list(groups)]
    fig, axes = plt.subplots(len(rows), len(metrics), figsize=(14, 3.2 * len(rows) + 1.2), squeeze=False)
    unit = ""
    for row_axes, names in zip(axes, rows, strict=True):
        for ax, (metric, label) in zip(row_axes, metrics, strict=True):
            for name in names:
                members = groups[name]
                ys = [m.get(metric) if m.get(metric) is not None else float("nan") for m in members]
                if x_key is not None:
                    xs = [words.number(x_key, m["params"][x_key]) for m in members]
                    unit = xs[0][1]
                    ax.plot([x for x, _ in xs], ys, marker="o", label=name)
                else:
                    ax.plot(range(len(members)), ys, marker="o", label=name)
            if x_key is not None:
                values = [words.number(x_key, p["params"][x_key])[0] for p in points]
                if min(values) > 0 and max(values) / min(values) >= 100:
                    ax.set_xscale("log")
                ax.set_xlabel(f"{words.axis(x_key)} ({unit})" if unit else words.axis(x_key))
            else:
                ax.set_xlabel("point")
            top = max((p.get(metric) or 0 for p in points), default=0)
            if metric == "link_mbit" and len(asked_rates) == 1:  # the asked link rate, as a limit
                reference_line(ax, asked_rates[0], f"link {asked_rates[0]:g} Mbit/s", top)
            if metric in limits:  # a limit the scenario asserts (a target lag)
                reference_line(ax, limits[metric], f"asserted < {limits[metric]:g}", top)
            published_markers(ax, summary, metric, x_key)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            if len(rows) > 1:
                ax.set_title(names[0], fontsize=8)
    if len(groups) > 1 and len(rows) == 1:
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=min(3, len(groups)), fontsize=8)
    fig.suptitle(f"{summary.get('scenario')}: per point")
    fig.tight_layout(rect=(0, 0.1 if len(groups) > 1 and len(rows) == 1 else 0, 1, 1))
    return fig


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


def cluster_plot(run: Path, summary: dict) -> str | None:
    fig = cluster_figure(summary)
    if fig is None:
        return None
    fig.savefig(run / "cluster.png", dpi=110)
    plt.close(fig)
    return "cluster.png"


def cluster_figure(summary: dict):
    """Seconds per run against the concurrency (log 2), a line per extra delay, a panel per cluster kind."""
    tables = cluster_tables(summary)
    if not tables:
        return None
    fig, axes = plt.subplots(1, len(tables), figsize=(5.5 * len(tables), 4), squeeze=False)
    for ax, (kind, table) in zip(axes[0], tables.items(), strict=True):
        colors = {}
        for delay, marker in zip(table["delays"], "osd^v<>", strict=False):
            ys = [table["seconds"].get((t, delay)) for t in table["threads"]]
            ys = [y if y is not None else float("nan") for y in ys]
            (line,) = ax.plot(table["threads"], ys, marker=marker, label=f"+{delay:g} ms on one node")
            colors[delay] = line.get_color()

        def color_of(rest: dict, colors=colors):  # the measured line of the same extra delay
            found = words.number("cluster.delay", rest.get("cluster.delay"))
            return colors.get(found[0]) if found else None

        published_markers(ax, summary, "load_seconds", "load.threads", {"replicator.kind": kind}, color_of)
        ax.set_xscale("log", base=2)
        ax.set_xticks(table["threads"], [str(t) for t in table["threads"]])
        ax.set_xlabel("mysqlslap concurrency")
        ax.set_ylabel("seconds for the run")
        ax.set_title(kind)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{summary.get('scenario')}: time per run vs concurrency, one node delayed")
    fig.tight_layout()
    return fig


def cluster_lines(summary: dict) -> list[str]:
    lines = []
    for kind, table in cluster_tables(summary).items():
        lines += [
            "",
            f"## {kind}: seconds per run (rows: concurrency; columns: extra delay on one node)",
            "",
            "| threads | " + " | ".join(f"+{d:g} ms" for d in table["delays"]) + " |",
            "|---" * (len(table["delays"]) + 1) + "|",
        ]
        for t in table["threads"]:
            cells = [_fmt(table["seconds"].get((t, d)), 2) for d in table["delays"]]
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return lines


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
            + f" | {({'at most': '≤ ', 'at least': '≥ '}).get(c.get('kind'), '')}{_fmt(c['published'], 3)}"
            + f" | {_fmt(c['measured'], 3) if c['measured'] is not None else 'not measured'}"
            + f" | {_fmt(c['ratio'], 2) if c['ratio'] is not None else '-'} | {verdict} |"
        )
    if shapes:
        lines += ["", "| shape | published | measured | measured ÷ published | |", "|---|---|---|---|---|"]
    for row in shapes:
        verdict = "" if row["within"] is None else ("within" if row["within"] else f"**outside ±{tolerance:g} %**")
        lines.append(
            f"| {row['name']} | {_fmt(row['published'], 3)} | "
            f"{_fmt(row['measured'], 3) if row['measured'] is not None else 'not measured'} | "
            f"{_fmt(row['ratio'], 2) if row['ratio'] is not None else '-'} | {verdict} |"
        )
    return lines


def published_markers(ax, summary: dict, metric: str, x_key: str | None, at: dict[str, str] | None = None,
                      color_of=None) -> None:  # fmt: skip
    """The published figures of `metric` by `x_key` as hollow markers on `ax`: those whose fixed keys
    match `at` (a cluster panel's kind), one series per remaining combination, in the colour of the
    measured line it compares with (`color_of(rest)`), black otherwise."""
    ref = summary.get("reference")
    if not ref or ref["metric"] != metric or x_key is None:
        return
    for figures in ref["figures"]:
        if figures["by"] != x_key or any(str(figures["at"].get(k)) != v for k, v in (at or {}).items()):
            continue
        pairs = [(words.number(x_key, float(k) if re.fullmatch(r"-?\d+(\.\d+)?", k) else k), y)
                 for k, y in figures["values"].items()]  # fmt: skip
        pairs = [(x[0], y) for x, y in pairs if x is not None]
        if not pairs:
            continue
        rest = {k: v for k, v in figures["at"].items() if k not in (at or {})}
        label = "published" + (f": {words.params(rest)}" if rest else "")
        color = (color_of(rest) if color_of else None) or "black"
        ax.plot([x for x, _ in pairs], [y for _, y in pairs], linestyle="none", marker="D", markersize=8,
                markerfacecolor="none", markeredgecolor=color, markeredgewidth=1.5, label=label)  # fmt: skip


SUSTAINED_SLOPE = 0.01  # s of lag per s: above it the replica falls behind for good


def sustained(summary: dict) -> list[dict]:
    """Per group of the other sweep keys: the highest load.rate whose point kept up (lag slope under
    SUSTAINED_SLOPE and at least 95 % of the asked TPS achieved)."""
    sweep = list(summary.get("sweep") or {})
    if "load.rate" not in sweep:
        return []
    groups: dict[str, list[dict]] = {}
    for p in summary.get("points", []):
        key = words.params(p["params"], [k for k in sweep if k != "load.rate"]) if len(sweep) > 1 else "all"
        groups.setdefault(key, []).append(p)
    out = []
    for key, members in groups.items():
        kept = [
            p for p in members
            if p.get("lag_slope") is not None and p["lag_slope"] < SUSTAINED_SLOPE
            and (p.get("tps") or 0) >= 0.95 * float(p["params"]["load.rate"])
        ]  # fmt: skip
        best = max(kept, key=lambda p: float(p["params"]["load.rate"]), default=None)
        out.append({"group": key, "point": best})
    return out


def host_lines(summary: dict) -> list[str]:
    """The host's load per point's window, and a warning for a saturated one (its figures are the CPU's)."""
    points = [p for p in summary.get("points", []) if p.get("host")]
    if not points:
        return []
    lines = ["", "## The host during each measured window", ""]
    saturated = [p for p in points if p["host"].get("saturated")]
    if saturated:
        worst = max(saturated, key=lambda p: p["host"]["saturated_share"])
        lines += [
            f"**Warning: the host was saturated** in point(s) {', '.join(str(p['point']) for p in saturated)}: more "
            f"tasks were runnable than it has cores ({worst['host']['cores']}) in up to "
            f"{worst['host']['saturated_share'] * 100:.0f} % of the window. Lag, TPS and times there are bound by "
            "the CPU, not by the network: rerun on a quieter host, or with less load, to measure the network.",
            "",
        ]
    lines += [
        "| # | host CPU % | load (1 min, max) | runnable mean / max (cores) | controller % of a core | shaping workers % | saturated |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in points:
        h = p["host"]
        lines.append(
            f"| {p['point']} | {h['cpu_pct']} | {h['load1_max']} | {h['runnable_mean']} / {h['runnable_max']} ({h['cores']}) | "
            f"{h['controller_cpu_pct']} | {h['workers_cpu_pct']} | {'**yes**' if h['saturated'] else 'no'} |"
        )
    return lines


def render(run: Path) -> Path:
    run = Path(run)
    summary = json.loads((run / "summary.json").read_text())
    environment = json.loads((run / "environment.json").read_text()) if (run / "environment.json").exists() else {}
    clustered = any(p.get("cluster") for p in summary.get("points", []))
    searched = bool(summary.get("knees"))
    makers = (cluster_plot,) if clustered else (report_search.plot, lag_plot) if searched else (sweep_plot, lag_plot)
    plots = [p for p in (make(run, summary) for make in makers) if p]
    plan = json.loads((run / "scenario.json").read_text()).get("plan") if (run / "scenario.json").exists() else None
    lines = [
        f"# {summary['scenario']}: {verdict.word(summary)}",
        *verdict.lines(summary, (plan or {}).get("scenario"), environment),
        "",
        f"Run `{summary['id']}`, {summary.get('started')} → {summary.get('finished') or '...'}"
        + (" (quick)" if summary.get("quick") else "")
        + (f", {summary['status']}" if summary.get("status") else "")
        + (f". Reason: {summary['reason']}" if summary.get("reason") else ""),
        "",
        "## Environment",
        "",
        "| | |",
        "|---|---|",
    ]
    for key in (
        "platform",
        "nodes",
        "server_versions",
        "shaping_backend",
        "netem_available",
        "kernel",
        "host_cores",
        "host_memory_gib",
        "heartbeat_interval_ms",
    ):
        if key in environment:
            found = environment[key]
            if isinstance(found, dict):  # server_versions: "mysql-source 9.7.4, mysql-target 9.7.4"
                found = ", ".join(f"{k} {v}" for k, v in found.items())
            elif isinstance(found, list):
                found = ", ".join(map(str, found))
            lines.append(f"| {key.replace('_', ' ')} | {found} |")
    meta = json.loads((run / "run.json").read_text()) if (run / "run.json").exists() else {}
    if meta.get("seed") is not None:  # the links' seed: the same seed loses the same packets again (#40)
        asked = " (drawn: the scenario said `random`)" if meta.get("seed_asked") == "random" else ""
        lines.append(
            f"| seed | {meta['seed']}{asked}" + (f"; {meta['seed_note']}" if meta.get("seed_note") else "") + " |"
        )
    between = (((plan or {}).get("scenario") or {}).get("link") or {}).get("between") or ["a", "b"]
    a_end, b_end = between[0], between[1]
    swept = list(summary.get("sweep") or {})
    if searched:  # the probes' own value is a column too
        swept.append(summary["knees"][0]["param"])
    lines += [
        "",
        "## Points",
        "",
        # One column per swept key, its values in words with units (`DTLE (...)`, `300 TPS`).
        "| # | "
        + (" | ".join(words.axis(k) for k in swept) or "parameters")
        + " | RTT asked / measured (ms) | rate asked / measured (Mbit/s) | verified | max lag (s) | p95 lag (s) | slope (s/s) | TPS | QPS | "
        + f"link Mbit/s ({a_end}→{b_end} / back) | binlog Mbit/s | assertions |",
        "|---" * (max(1, len(swept)) + 12) + "|",
    ]
    for p in summary.get("points", []):
        v = p.get("verification", {})
        rtt = f"{_fmt(v.get('rtt_asked_ms'), 1)} / {_fmt((v.get('rtt') or {}).get('median_ms'), 1)}"
        rate = f"{_fmt(v.get('rate_asked_mbit'))} / {_fmt(v.get('throughput_mbit'))}" if "rate_asked_mbit" in v else "-"
        if v.get("other_traffic_mbit"):
            rate += f" (+{_fmt(v['other_traffic_mbit'])} other)"
        checks = (
            "; ".join(f"{a['assertion']}: {'pass' if a['passed'] else 'FAIL'}" for a in p.get("assertions", [])) or "-"
        )
        decided = point_outcome(p)
        if decided.verdict == "NOT VALID":  # its checks say nothing either way (outcome.py)
            checks = f"**not valid**: {'; '.join(decided.reasons)}; {checks}"
        params = (
            " | ".join(words.value(k, p["params"][k]) if k in p["params"] else "-" for k in swept)
            if swept
            else words.params(p["params"])
        )
        lines.append(
            f"| {p['point']} | {params} | {rtt} | {rate} | {'yes' if v.get('ok') else 'NO'} | {_fmt(p.get('max_lag_seconds'))} | "
            f"{_fmt(p.get('p95_lag_seconds'))} | {_fmt(p.get('lag_slope'), 4)} | {_fmt(p.get('tps'), 1)} | {_fmt(p.get('qps'), 1)} | "
            f"{_fmt(p.get('link_mbit'))} / {_fmt(p.get('reverse_link_mbit'))} | {_fmt(p.get('binlog_mbit'))} | {checks} |"
        )
    lines += host_lines(summary)
    lines += timeline_lines(summary)
    lines += report_captures.lines(run)
    lines += report_replay.lines(summary)
    lines += replicator_lines(summary)
    lines += cluster_lines(summary)
    lines += reference_lines(summary)
    lines += report_search.lines(summary)
    lines += bottleneck.lines(summary, environment)
    best = sustained(summary)
    if best:
        lines += [
            "",
            f"## Highest sustained write rate (lag slope < {SUSTAINED_SLOPE} s/s, >= 95 % of the asked TPS)",
            "",
            "| set-up | TPS asked | TPS | QPS | binlog Mbit/s | link Mbit/s |",
            "|---|---|---|---|---|---|",
        ]
        for row in best:
            p = row["point"]
            if p is None:
                lines.append(f"| {row['group']} | none kept up | | | | |")
            else:
                lines.append(
                    f"| {row['group']} | {p['params']['load.rate']} | {_fmt(p.get('tps'), 1)} | {_fmt(p.get('qps'), 1)} | "
                    f"{_fmt(p.get('binlog_mbit'))} | {_fmt(p.get('link_mbit'))} |"
                )
    consistency = summary.get("consistency")
    lines += ["", "## Consistency", ""]
    if consistency is None:
        lines.append("Not checked (the run did not reach it).")
    elif consistency["identical"] and consistency.get("clusters"):
        lines.append("Identical: every lab table has the same checksum on all three nodes of each cluster.")
    elif consistency["identical"]:
        lines.append(
            "Identical: the target executed the source's GTID set and every lab table matches (count + checksum)."
        )
    else:
        lines += ["**Differences:**", ""] + [f"- {d}" for d in consistency["differences"]]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    lines += [
        "",
        "Files: `report.html` (this report as one page, plots inside: the file to attach to a ticket), "
        "`scenario.yaml` (resolved), `environment.json`, `summary.json`, `lag.csv`, `links.csv`, `load.csv`"
        + (", `events.csv`." if any(p.get("timeline") for p in summary.get("points", [])) else "."),
        "",
    ]
    out = run / "report.md"
    out.write_text("\n".join(lines))
    report_html.write(run, "\n".join(lines))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not Path(argv[1], "summary.json").exists():
        print("usage: python -m laglab.scenarios.report results/<run>   (a folder with summary.json)", file=sys.stderr)
        return 2
    print(render(Path(argv[1])))
    return 0


def replicator_lines(summary: dict) -> list[str]:
    """DTLE's / DM's own figures beside the heartbeat lag (never instead of it: dtle_delay_time and
    secondsBehindMaster are whole seconds, the heartbeat lag has the recorder's resolution), and the
    stretches where one of its agents did not answer."""
    points = [p for p in summary.get("points", []) if p.get("replicator_metrics")]
    if not points:
        return []
    lines = [
        "",
        "## The replicator's own figures",
        "",
        "| # | parameters | max lag, heartbeat (s) | max delay it reports (whole s) | its traffic forward / back (Mbit/s) |",
        "|---|---|---|---|---|",
    ]
    gap_lines = []
    uncounted = False
    for p in points:
        m = p["replicator_metrics"]
        params = words.params(p["params"])
        # A counter that read 0 while the other direction carried data was not counted, not silent: a real
        # DTLE 4.22 agent's dtle-dst kept dtle_network_out_bytes at 0 in every point (issue #42).
        back = m.get("back_mbit")
        if not back and m.get("forward_mbit"):
            back, uncounted = "not counted", True
        else:
            back = _fmt(back)
        lines.append(
            f"| {p['point']} | {params} | {_fmt(p.get('max_lag_seconds'))} | {_fmt(m.get('max_delay_seconds'), 0)} | "
            f"{_fmt(m.get('forward_mbit'))} / {back} |"
        )
        for gap in m.get("gaps") or []:
            seconds = gap["to"] - gap["from"]
            gap_lines.append(
                f"- point {p['point']}: {gap['agent']} did not answer for {seconds:.0f} s ({gap['samples']} samples): "
                f"{gap['reason']}; its figures have a gap there"
            )
    lines += ["", "Forward: what the source side sent towards the target side; back: its replies."]
    if uncounted:
        lines += [
            "",
            'Back "not counted": the replicator reported 0 bytes sent back while it sent data forward (DTLE 4.22\'s '
            "dtle-dst does not count its replies). The lab's own counters of that link are in links.csv "
            "(rows `link`, service = the target side).",
        ]
    if gap_lines:
        lines += ["", "Gaps in the replicator's figures:", "", *gap_lines]
    return lines


def timeline_lines(summary: dict) -> list[str]:
    """Every timeline step of every point: when it was asked, how long it took to take effect, and
    how long the replica took to catch up (lag < 1 s) after each disruption ended."""
    points = [p for p in summary.get("points", []) if p.get("timeline")]
    if not points:
        return []
    lines = [
        "",
        "## Timeline",
        "",
        "Offsets from the start of the point's measured window. Catch-up: from the end of a disruption "
        "(heal, undo, an instant fault) to the first lag sample under 1 s.",
        "",
        "| point | step | at (s) | what | took effect after (ms) | catch-up (s) |",
        "|---|---|---|---|---|---|",
    ]
    for p in points:
        start = min(float(e["asked_epoch"]) for e in p["timeline"])
        window_start = p.get("window_start_epoch", start)
        for e in p["timeline"]:
            if e.get("error"):
                effect, catch_up = f"**failed**: {e['error']}", "-"
            else:
                effect = _fmt(e.get("effect_ms"), 1)
                if not e.get("ends_disruption"):
                    catch_up = ""
                elif e.get("at_end"):
                    catch_up = "- (the window had ended)"
                elif e.get("catch_up_seconds") is None:
                    catch_up = "**not caught up** in the window"
                else:
                    catch_up = _fmt(e["catch_up_seconds"], 2)
            at = _fmt(float(e["asked_epoch"]) - window_start, 1)
            lines.append(f"| {p['point']} | {e['step']} | {at} | {e['text']} | {effect} | {catch_up} |")
        if p.get("catch_ups"):
            lines += ["", f"Point {p['point']}: longest catch-up {_fmt(p.get('max_catch_up_seconds'), 2)} s "
                      f"over {p['catch_ups']} disruption(s)."]  # fmt: skip
    return lines


# Last: `python -m laglab.scenarios.report` (make report) needs every function above defined first.
if __name__ == "__main__":
    sys.exit(main(sys.argv))
