"""The top of report.md, for a ticket: the verdict in words, what the scenario reproduces, and the
settings that produced it (link, load, replicator, servers). Reads only the run's files.

The verdict is the run's outcome as the controller decided it (outcome.py: the scenario's assertions,
whether the points measured what was asked, whether anything was lost), then what the lag did and why,
in the bottleneck model's words. A run that did not finish has no verdict: it says why.
"""

from __future__ import annotations

import re

from laglab.load.replay import speed_words
from laglab.scenarios.analysis.outcome import run_outcome
from laglab.scenarios.report import words


def word(summary: dict) -> str:
    """PASS, FAIL, NOT VALID, NO CHECKS (exploratory) or the status of a run that did not finish: the
    run's outcome as the controller decided it (outcome.py), never decided again here."""
    return run_outcome(summary).verdict


def lines(summary: dict, scenario: dict | None, environment: dict) -> list[str]:
    decided = run_outcome(summary)
    out = [""]
    checks = [(p["point"], a) for p in summary.get("points", []) for a in p.get("assertions", [])]
    failed = [(n, a) for n, a in checks if not a["passed"]]
    others = [r for r in decided.reasons if not re.match(r"point \d+: `.*` did not hold$", r)]
    if decided.verdict == "NOT VALID":
        out.append(
            "**Verdict: NOT VALID.** What was measured is not what was asked, so the checks say nothing either "
            f"way: {'; '.join(decided.reasons[:5])}."
        )
    elif decided.verdict == "FAIL":
        said = []
        if failed:
            listed = "; ".join(f"point {n}: `{a['assertion']}`" for n, a in failed[:5])
            said.append(f"{len(failed)} of {len(checks)} checks failed ({listed})")
        said += others[:5]
        out.append(f"**Verdict: FAIL.** {'; '.join(said)}.")
    elif decided.verdict == "PASS":
        held = "The one check held" if decided.checks == 1 else f"All {decided.checks} checks held in every point"
        out.append(f"**Verdict: PASS.** {held}.")
    elif decided.verdict == "NO CHECKS":
        out.append(
            "**Verdict: no checks.** The scenario states no assertions (an exploratory run): what was measured follows."
        )
    else:
        out.append(f"**No verdict: the run {summary.get('status')}.** {summary.get('reason') or ''}".rstrip())
    if decided.verdict in ("PASS", "FAIL", "NOT VALID", "NO CHECKS"):
        consistency = summary.get("consistency")
        if consistency is not None:
            out.append(
                "Nothing was lost: source and target are identical."
                if consistency.get("identical")
                else f"**Data differs** between source and target: {'; '.join(consistency.get('differences') or [])[:300]}"
            )
    bounds = {b.get("point"): b for b in summary.get("bottlenecks") or []}
    for p in summary.get("points", []):
        lag = _lag_words(p)
        why = (bounds.get(p.get("point")) or {}).get("words")
        if lag or why:
            label = f"Point {p['point']}" + (f" ({words.params(p['params'])})" if p.get("params") else "")
            out.append(f"- {label}: {lag}" + (f" — {why}" if why else ""))
    if scenario:
        if scenario.get("description"):
            out += ["", f"**Reproduces:** {scenario['description']}"]
        if scenario.get("expected"):
            out += ["", f"**Expected:** {scenario['expected']}"]
        out += ["", "**Settings:** " + settings(scenario, environment)]
    return out


def _lag_words(p: dict) -> str:
    slope, top = p.get("lag_slope"), p.get("max_lag_seconds")
    if slope is None and top is None:
        return ""
    if slope is not None and slope > 0.01:
        trend = f"lag grew {slope:.3f} s per second"
    elif slope is not None and top is not None and top >= 5.0:  # a burst (a large transaction, a fault), no trend
        return f"lag peaked at {top:.2f} s, with no lasting growth"
    elif slope is not None:
        trend = "lag held steady"
    else:
        trend = "lag"
    return trend + (f", at most {top:.2f} s" if top is not None else "")


def settings(scenario: dict, environment: dict) -> str:
    """The scenario's link, load and replicator, and the servers, in a reader's words."""
    link, load = scenario.get("link") or {}, scenario.get("load") or {}
    parts = []
    shaped = [f"RTT {link['rtt']}" if link.get("rtt") and link["rtt"] not in ("0ms", "0s") else ""]
    shaped.append(f"rate {link['rate']}" if link.get("rate") else "")
    shaped.append(f"loss {link['loss']}" if link.get("loss") and link["loss"] not in ("0%", "0.0%") else "")
    shaped.append(f"jitter {link['jitter']}" if link.get("jitter") and link["jitter"] not in ("0ms", "0s") else "")
    between = " ↔ ".join(link.get("between") or [])
    parts.append(f"link {between}: {', '.join(s for s in shaped if s) or 'unshaped'}")
    if load.get("tool") == "sysbench":
        rate = f"{load['rate']} TPS" if load.get("rate") else "as fast as it goes"
        parts.append(
            f"load sysbench {load.get('script')} at {rate}, {load.get('threads')} threads, {load.get('duration')}"
        )
    elif load.get("tool") == "profile":
        speed = speed_words(float(load.get("speed") or 1))
        parts.append(f"load: the replay of the write profile {load.get('file')}{speed}, {load.get('duration')}")
    elif load.get("tool") == "mysqlslap":
        parts.append(f"load mysqlslap, {load.get('queries')} queries over {load.get('threads')} clients")
    else:
        parts.append("no load")
    kind = (scenario.get("replicator") or {}).get("kind", "native")
    parts.append(f"replication {kind}")
    versions = environment.get("server_versions") or {}
    if versions:
        parts.append("servers " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    pinned = {role: image for role, image in (scenario.get("servers") or {}).items() if image}
    if pinned:  # what the scenario is about (the run was refused unless the servers above are these)
        parts.append("asked for " + ", ".join(f"{role} {image}" for role, image in pinned.items()))
    return "; ".join(parts) + "."
