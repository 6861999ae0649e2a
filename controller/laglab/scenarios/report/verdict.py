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
    """PASS and FAIL in the scenario's words (REPRODUCED, NOT REPRODUCED in a ticket's), NOT VALID, NO
    CHECKS (exploratory) or the status of a run that did not finish: the run's outcome as the controller
    decided it (outcome.py), never decided again here."""
    return run_outcome(summary).words


def lines(summary: dict, scenario: dict | None, environment: dict, plot: str | None = None) -> list[str]:
    """The first screen: the verdict and why, the lag over time, what would keep up, the caveats, the
    first plot, and what the scenario reproduces with its settings in words."""
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
        out.append(f"**Verdict: {decided.words}.** {'; '.join(said)}.")
    elif decided.verdict == "PASS":
        held = "The one check held" if decided.checks == 1 else f"All {decided.checks} checks held in every point"
        out.append(f"**Verdict: {decided.words}.** {held}.")
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
    onset = (scenario or {}).get("onset")
    for p in summary.get("points", []):
        lag = _lag_words(p, onset)
        why = (bounds.get(p.get("point")) or {}).get("words")
        if lag or why:
            label = f"Point {p['point']}" + (f" ({words.params(p['params'])})" if p.get("params") else "")
            out.append(f"- {label}: {lag}" + (f" — {why}" if why else ""))
    keep_up = remedies(summary.get("bottlenecks") or [])
    if keep_up:
        out += ["", "**What would keep up:** " + "; ".join(keep_up) + "."]
    told = caveats(summary, scenario or {}, environment)
    if told:
        out += ["", "**Caveats:** " + " ".join(told)]
    if plot:
        out += ["", f"![{plot}]({plot})"]
    if scenario:
        if scenario.get("description"):
            out += ["", f"**Reproduces:** {scenario['description']}"]
        if scenario.get("expected"):
            out += ["", f"**Expected:** {scenario['expected']}"]
        out += ["", "**Settings:** " + settings(scenario, environment)]
    return out


def remedies(bounds: list[dict]) -> list[str]:
    """What would let replication keep up, from each point's bottleneck model (analysis/bottleneck.py):
    the link it needs where the link binds, bigger TCP buffers where they do, and how much room is left
    where it keeps up; nothing is claimed where the model has no figures or the network is not the bound."""
    out = []
    for b in bounds:
        predicted, label = b.get("predicted") or {}, f"point {b.get('point')}"
        demand, capacity = predicted.get("demand_mbit"), predicted.get("capacity_mbit")
        if b.get("bound") == "link" and demand and capacity and demand > capacity:
            out.append(f"{label}: a link with at least {demand * 1.1:.3g} Mbit/s of goodput (the binlog needs "
                       f"{demand:.3g} Mbit/s on the wire; this link measured {capacity:.3g}), or fewer bytes: "
                       "compression (`replicator: {compression: zstd}`)")  # fmt: skip
        elif b.get("bound") == "tcp buffers":
            out.append(f"{label}: bigger TCP buffers (`tcp_buffers:`): one stream's window bounds it, not the link")
        elif b.get("bound") == "load" and demand is not None and capacity:
            out.append(f"{label}: it keeps up here: the binlog needs {demand:.3g} Mbit/s on the wire of this link's "
                       f"{capacity:.3g} ({demand / capacity * 100:.0f} %); about {capacity / demand:.2g}x these writes "
                       "would fill it")  # fmt: skip
    return out


def caveats(summary: dict, scenario: dict, environment: dict) -> list[str]:
    """What the reader must know before acting on the verdict: a quick run, an onset the run did not
    reach, servers other than the ticket's, a load that is not the customer's."""
    out = []
    load = scenario.get("load") or {}
    ran = _seconds(load.get("duration"))
    onset = _seconds(scenario.get("onset"))
    if summary.get("quick"):
        out.append(f"A quick run ({words.value('load.duration', load.get('duration'))} of load per point): it shows "
                   "whether the symptom starts at once, not what builds up over a longer run.")  # fmt: skip
    if onset is not None and ran is not None and ran < onset:
        out.append(f"The ticket's symptom starts after {words.value('onset', scenario.get('onset'))}; this run's load "
                   f"stopped after {words.value('load.duration', load.get('duration'))}, so it cannot show it: run it "
                   "without --quick.")  # fmt: skip
    stood_in: dict[tuple, list[str]] = {}  # the same server for both roles is said once
    for other in environment.get("servers_instead") or []:
        key = (other["ran"], other.get("image") or "?", bool(other.get("stand_in")), other["asked"])
        stood_in.setdefault(key, []).append(other["service"])
    for (ran, image, stand_in, asked), services in stood_in.items():
        what = "Debian's stand-in " if stand_in else ""
        out.append(f"Not the ticket's server: {' and '.join(services)} ran {ran} ({what}{image}) in place of {asked} "
                   "(--on-lab-servers; docs/profiles.md says how to run the official image where it can be pulled).")  # fmt: skip
    if load.get("tool") == "sysbench":
        out.append("The load is sysbench at a steady rate, not the customer's own: `laglab profile` of their binlog "
                   "replays its shape (`scenario new --profile`).")  # fmt: skip
    return out


def _seconds(raw) -> float | None:
    if isinstance(raw, int | float):
        return float(raw)
    return words.seconds(raw) if isinstance(raw, str) else None


def _lag_words(p: dict, onset=None) -> str:
    """What the lag did, with a time scale a ticket can use: behind per minute, and at its onset. It grew
    when its slope's interval lies above zero (the fit says so, not a fixed threshold), or without an
    interval when the slope is over 0.01 s/s."""
    slope, top = p.get("lag_slope"), p.get("max_lag_seconds")
    if slope is None and top is None:
        return ""
    interval = p.get("lag_slope_ci") or {}
    grew = slope is not None and (interval.get("low", 0.0) > 0.0 if interval else slope > 0.01)
    if grew:
        trend = f"lag grew {slope:.3f} s per second (about {slope * 60:.3g} s behind per minute"
        at = _seconds(onset)
        trend += f", {slope * at:.3g} s after {words.value('onset', onset)})" if at else ")"
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
    shaped = [
        f"RTT {words.value('link.rtt', link['rtt'])}" if link.get("rtt") and link["rtt"] not in ("0ms", "0s") else ""
    ]
    shaped.append(f"rate {words.value('link.rate', link['rate'])}" if link.get("rate") else "")
    shaped.append(f"loss {link['loss']}" if link.get("loss") and link["loss"] not in ("0%", "0.0%") else "")
    shaped.append(
        f"jitter {words.value('link.jitter', link['jitter'])}"
        if link.get("jitter") and link["jitter"] not in ("0ms", "0s")
        else ""
    )
    between = " ↔ ".join(link.get("between") or [])
    parts.append(f"link {between}: {', '.join(s for s in shaped if s) or 'unshaped'}")
    if load.get("tool") == "sysbench":
        rate = f"{load['rate']} TPS" if load.get("rate") else "as fast as it goes"
        parts.append(
            f"load sysbench {load.get('script')} at {rate}, {load.get('threads')} threads, "
            f"{words.value('load.duration', load.get('duration'))}"
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
