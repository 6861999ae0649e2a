"""The run's plots (lag.png, sweep.png, clusters.png), drawn from its files alone, with the published
figures marked where a scenario holds its measurements against them."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from laglab.scenarios.report import words
from laglab.scenarios.report.table import cluster_tables, num, read_csv


def lag_plot(run: Path, summary: dict) -> str | None:
    rows = [r for r in read_csv(run / "lag.csv") if num(r.get("lag_seconds")) is not None]
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
