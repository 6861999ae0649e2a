"""Plots and report.md of a run, made from the run's files alone (summary.json, lag.csv, load.csv,
environment.json), so `make report RUN=results/<run>` rebuilds them anywhere.

    python -m laglab.scenarios.report.markdown results/<run>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from laglab.scenarios.analysis import bottleneck
from laglab.scenarios.analysis.outcome import point_outcome
from laglab.scenarios.analysis.record import read_summary
from laglab.scenarios.report import captures as report_captures
from laglab.scenarios.report import html as report_html
from laglab.scenarios.report import plots, published, verdict, words
from laglab.scenarios.report import replay as report_replay
from laglab.scenarios.report import search as report_search
from laglab.scenarios.report.table import cluster_tables, fmt


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
            cells = [fmt(table["seconds"].get((t, d)), 2) for d in table["delays"]]
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return lines


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
    summary = read_summary(run)  # validated against the run's record (analysis/record.py)
    environment = json.loads((run / "environment.json").read_text()) if (run / "environment.json").exists() else {}
    clustered = any(p.get("cluster") for p in summary.get("points", []))
    searched = bool(summary.get("knees"))
    makers = (
        (plots.cluster_plot,)
        if clustered
        else (report_search.plot, plots.lag_plot)
        if searched
        else (plots.sweep_plot, plots.lag_plot)
    )
    drawn = [p for p in (make(run, summary) for make in makers) if p]
    plan = json.loads((run / "scenario.json").read_text()).get("plan") if (run / "scenario.json").exists() else None
    lines = [
        f"# {summary['scenario']}: {verdict.word(summary)}",
        *verdict.lines(summary, (plan or {}).get("scenario"), environment, drawn[-1] if drawn else None),
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
        rtt = f"{fmt(v.get('rtt_asked_ms'), 1)} / {fmt((v.get('rtt') or {}).get('median_ms'), 1)}"
        rate = f"{fmt(v.get('rate_asked_mbit'))} / {fmt(v.get('throughput_mbit'))}" if "rate_asked_mbit" in v else "-"
        if v.get("other_traffic_mbit"):
            rate += f" (+{fmt(v['other_traffic_mbit'])} other)"
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
            f"| {p['point']} | {params} | {rtt} | {rate} | {'yes' if v.get('ok') else 'NO'} | {fmt(p.get('max_lag_seconds'))} | "
            f"{fmt(p.get('p95_lag_seconds'))} | {fmt(p.get('lag_slope'), 4)} | {fmt(p.get('tps'), 1)} | {fmt(p.get('qps'), 1)} | "
            f"{fmt(p.get('link_mbit'))} / {fmt(p.get('reverse_link_mbit'))} | {fmt(p.get('binlog_mbit'))} | {checks} |"
        )
    lines += host_lines(summary)
    lines += timeline_lines(summary)
    lines += report_captures.lines(run)
    lines += report_replay.lines(summary)
    lines += replicator_lines(summary)
    lines += cluster_lines(summary)
    lines += published.reference_lines(summary)
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
                    f"| {row['group']} | {p['params']['load.rate']} | {fmt(p.get('tps'), 1)} | {fmt(p.get('qps'), 1)} | "
                    f"{fmt(p.get('binlog_mbit'))} | {fmt(p.get('link_mbit'))} |"
                )
    consistency = summary.get("consistency")
    lines += ["", "## Consistency", ""]
    if consistency is None:
        # #55: a hand-back that failed inside the final check read "the run did not reach it"
        ended = summary.get("status") or "?"
        lines.append(f"Not checked: the run {ended} before or during the check"
                     + (f" ({summary['reason']})." if summary.get("reason") else "."))  # fmt: skip
    elif consistency["identical"] and consistency.get("clusters"):
        lines.append("Identical: every lab table has the same checksum on all three nodes of each cluster.")
    elif consistency["identical"]:
        lines.append(
            "Identical: the target executed the source's GTID set and every lab table matches (count + checksum)."
        )
    else:
        lines += ["**Differences:**", ""] + [f"- {d}" for d in consistency["differences"]]
    if drawn[:-1]:  # the last (the lag over time) is on the first screen
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in drawn[:-1]]
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
        print(
            "usage: python -m laglab.scenarios.report.markdown results/<run>   (a folder with summary.json)",
            file=sys.stderr,
        )
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
            back = fmt(back)
        lines.append(
            f"| {p['point']} | {params} | {fmt(p.get('max_lag_seconds'))} | {fmt(m.get('max_delay_seconds'), 0)} | "
            f"{fmt(m.get('forward_mbit'))} / {back} |"
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
                effect = fmt(e.get("effect_ms"), 1)
                if not e.get("ends_disruption"):
                    catch_up = ""
                elif e.get("at_end"):
                    catch_up = "- (the window had ended)"
                elif e.get("catch_up_seconds") is None:
                    catch_up = "**not caught up** in the window"
                else:
                    catch_up = fmt(e["catch_up_seconds"], 2)
            at = fmt(float(e["asked_epoch"]) - window_start, 1)
            lines.append(f"| {p['point']} | {e['step']} | {at} | {e['text']} | {effect} | {catch_up} |")
        if p.get("catch_ups"):
            lines += ["", f"Point {p['point']}: longest catch-up {fmt(p.get('max_catch_up_seconds'), 2)} s "
                      f"over {p['catch_ups']} disruption(s)."]  # fmt: skip
    return lines


# Last: `python -m laglab.scenarios.report.markdown` (make report) needs every function above defined first.
if __name__ == "__main__":
    sys.exit(main(sys.argv))
