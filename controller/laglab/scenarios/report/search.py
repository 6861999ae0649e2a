"""A search's part of report.md and its plot (search.png): the knee with its bracket per sweep point,
every probe with its lag slope, interval and verdict. Made from summary.json alone, as the rest of
the report."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from laglab.scenarios.report import words

COLOURS = {"sustained": "tab:green", "not sustained": "tab:red", "undecided": "tab:orange"}


def _probes(summary: dict, knee: dict) -> list[dict]:
    numbers = set(knee.get("points") or [])
    return [p for p in summary.get("points", []) if p.get("point") in numbers and p.get("probe")]


def _value(knee: dict, raw) -> str:
    return "-" if raw is None else words.value(knee["param"], raw)


def answer(knee: dict) -> str:
    """The knee in a sentence: what held, what did not, in how many probes."""
    goal = f"{knee['goal']} {words.axis(knee['param'])}"
    if knee["knee"] is None:
        return f"**none**: even {_value(knee, (knee.get('bracket') or [None, None])[1])} did not hold ({knee['state']})"
    bad = (knee.get("bracket") or [None, None])[1]
    if bad is None:
        return f"the {goal} that holds: **{_value(knee, knee['knee'])}**, the end of the range searched (the whole range held)"
    width = abs(words.number(knee["param"], bad)[0] / words.number(knee["param"], knee["knee"])[0] - 1) * 100
    return (
        f"the {goal} that holds: **{_value(knee, knee['knee'])}**; {_value(knee, bad)} did not "
        f"(bracket {width:.0f} %, {knee['state']})"
    )


def lines(summary: dict) -> list[str]:
    knees = summary.get("knees") or []
    if not knees:
        return []
    search = summary.get("search") or {}
    out = [
        "",
        "## Search: the knee",
        "",
        f"Sought: the {knees[0]['goal']} {words.axis(knees[0]['param'])} with `{search.get('until')}` "
        f"(from {search.get('from')} to {search.get('to')}, resolution {search.get('resolution')}). A probe is "
        "*sustained* when the whole 95 % interval of its lag slope is under the limit, *not sustained* when "
        "the whole of it is over (or the source did not take the asked write rate), *undecided* otherwise: "
        "then it is measured again with a window twice as long, and undecided twice counts as not sustained.",
        "",
    ]
    for knee in knees:
        at = f"{words.params(knee['at'])}: " if knee["at"] else ""
        undecided = f", {knee['undecided']} undecided" if knee.get("undecided") else ""
        out.append(f"- {at}{answer(knee)}; {knee['probes']} probes{undecided}")
    out += [
        "",
        "| # | search | probe | window (s) | lag slope (s/s) | 95 % interval | verdict | TPS | binlog Mbit/s | link Mbit/s | why |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for knee in knees:
        for p in _probes(summary, knee):
            ci = p.get("lag_slope_ci") or {}
            interval = f"{ci['low']:.4f} .. {ci['high']:.4f}" if ci else "-"
            slope = f"{ci['slope']:.4f}" if ci else "-"  # the interval's own fit (per-second means)
            out.append(
                f"| {p['point']} | {knee['search']} | {_value(knee, p['probe']['value'])} | {p.get('measured_seconds', '-')} | "
                f"{slope} | {interval} | {p['probe']['verdict']} | {p.get('tps', '-')} | {p.get('binlog_mbit', '-')} | "
                f"{p.get('link_mbit', '-')} | {p['probe']['why']} |"
            )
    return out


def plot(run: Path, summary: dict) -> str | None:
    fig = figure(summary)
    if fig is None:
        return None
    fig.savefig(run / "search.png", dpi=100)
    plt.close(fig)
    return "search.png"


def figure(summary: dict):
    """Each probe's lag slope with its 95 % interval against the knob, coloured by verdict; the limit
    dashed, each knee dotted. One panel per search (sweep point)."""
    knees = summary.get("knees") or []
    if not knees:
        return None
    limit = None
    until = (summary.get("search") or {}).get("until", "")
    if "<" in until:
        limit = float(until.split("<")[1])
    fig, axes = plt.subplots(1, len(knees), figsize=(min(14, 5.5 * len(knees)), 4), squeeze=False)
    for ax, knee in zip(axes[0], knees, strict=True):
        probes = [p for p in _probes(summary, knee) if p.get("lag_slope_ci")]
        unit = ""
        for p in probes:
            x, unit = words.number(knee["param"], p["probe"]["value"])
            ci = p["lag_slope_ci"]
            colour = COLOURS.get(p["probe"]["verdict"], "black")
            ax.errorbar(
                [x], [ci["slope"]], yerr=[[ci["slope"] - ci["low"]], [ci["high"] - ci["slope"]]], fmt="o",
                color=colour, capsize=3, label=p["probe"]["verdict"],
            )  # fmt: skip
            ax.annotate(f" {p['point']}", (x, ci["slope"]), fontsize=7, color="grey")
        if limit is not None:
            ax.axhline(limit, color="grey", ls="--", lw=1)
            ax.annotate(f"limit {limit:g} s/s", (0.02, limit), xycoords=("axes fraction", "data"), va="bottom",
                        fontsize=7, color="grey")  # fmt: skip
        if knee["knee"] is not None:
            x = words.number(knee["param"], knee["knee"])[0]
            ax.axvline(x, color="tab:green", ls=":", lw=1.2)
            ax.annotate(f" knee {_value(knee, knee['knee'])}", (x, 0.95), xycoords=("data", "axes fraction"),
                        fontsize=8, color="tab:green", va="top")  # fmt: skip
        handles, labels = ax.get_legend_handles_labels()
        seen = dict(zip(labels, handles, strict=True))
        if seen:
            ax.legend(seen.values(), seen.keys(), fontsize=7, loc="upper left")
        ax.set_xlabel(f"{words.axis(knee['param'])} ({unit})" if unit else words.axis(knee["param"]))
        ax.set_ylabel("lag slope (s of lag per s)")
        ax.set_title(words.params(knee["at"]) if knee["at"] else "probes", fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{summary.get('scenario')}: search probes (numbers: points)")
    fig.tight_layout()
    return fig
