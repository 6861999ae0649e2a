"""A point's result (summary.json) from its plan and what was measured, and the run's consistency
verdict from every replicator kind it used."""

from __future__ import annotations

import statistics

from laglab.scenarios.analysis import outcome
from laglab.scenarios.analysis.record import PointRecord
from laglab.scenarios.plan import PointPlan
from laglab.scenarios.run.measure import Window


def point_result(
    plan: PointPlan, verification: dict, window: Window, figures: dict, extra: dict, events=(),
    host: dict | None = None,
) -> PointRecord:  # fmt: skip
    """The point's record: what it asked (the plan's settings), what was measured, its assertions judged
    and its outcome decided."""
    links = figures.pop("links_mbit")
    timed = plan.load.tool == "mysqlslap"  # one row: its time and throughput over the whole run
    rows = window.load_rows if timed else [r for r in window.load_rows if r["epoch"] >= window.start]
    result = {
        "point": plan.number,
        "params": plan.params,
        **plan.settings,  # link, load, replicator
        "verification": verification,
        "measured_seconds": round(window.end - window.start, 1),
        "window_start_epoch": round(window.start, 3),
        **figures,
        "tps": round(statistics.fmean(r["tps"] for r in rows), 2) if rows else None,
        "load_seconds": rows[-1]["elapsed_s"] if rows and timed else None,
        "qps": round(statistics.fmean(r["qps"] for r in rows), 2) if rows else None,
        "link_mbit": links.get(plan.links[0]),
        "reverse_link_mbit": links.get(plan.links[1]),
        "binlog_mbit": None
        if window.bytes is None
        else round(window.bytes * 8 / 1e6 / max(1e-6, window.end - window.start), 4),
        **extra,
        "load_error": window.load_error,  # e.g. sysbench's FATAL line; the point then fails
        "load_restarts": window.load_restarts,
        **({"replay": window.replay} if window.replay is not None else {}),
        **timeline_figures(events, window.end),
        "host": host,  # the host's load in the measured window (hostload.py); saturated: CPU-bound figures
    }
    result["assertions"] = [{"assertion": str(a), "passed": a.holds(result.get(a.metric))} for a in plan.assertions]
    # The point's outcome, decided once (outcome.py); `passed` stays for readers of older summaries.
    decided = outcome.of_point(result)
    result["outcome"] = decided.as_json()
    result["passed"] = decided.held
    return PointRecord.model_validate(result)  # every figure as declared (analysis/record.py), or it fails here


def timeline_figures(events, end: float) -> dict:
    """The point's timeline events, and the longest catch-up after a disruption that ended within the
    window (None when the replica did not catch up after one of them before the window closed)."""
    if not events:
        return {}
    measured = [
        e for e in events
        if e.get("ends_disruption") and not e.get("at_end") and e.get("effect_epoch") and e["effect_epoch"] <= end
    ]  # fmt: skip
    catch_ups = [e.get("catch_up_seconds") for e in measured]
    return {
        "timeline": list(events),
        "catch_ups": len(measured),
        "max_catch_up_seconds": None if not catch_ups or None in catch_ups else max(catch_ups),
    }


def merge_consistency(reports: list[dict]) -> dict:
    """One verdict from the consistency checks of every kind a run used."""
    if len(reports) == 1:
        return reports[0]
    merged = {"identical": all(r["identical"] for r in reports), "differences": [], "gtid": None}
    for report in reports:
        merged["differences"] += report["differences"]
        merged["gtid"] = merged["gtid"] or report.get("gtid")
        if "clusters" in report:
            merged.setdefault("clusters", []).extend(report["clusters"])
    return merged
