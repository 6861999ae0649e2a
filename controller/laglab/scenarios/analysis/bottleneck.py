"""What should bound each point, predicted from first principles and held against what was measured
(report.md's "What bounds each point"; summary.json's `bottlenecks`). Where the two disagree by more
than the scenario's tolerance the point says so: that is where the interesting bug is (an applier,
not the network).

The models, each from the point's own figures and the run's environment:
- asynchronous replication: the binlog's rate (times the wire's bytes per binlog byte) against the
  link's measured goodput gives the lag slope, 1 - goodput / demand when the demand is higher, else 0;
- semi-sync: a commit waits at least one round trip, so TPS <= threads / RTT;
- a synchronous cluster: a single client's time is queries x RTT, falling with clients (/ threads)
  until something else (CPU, flow control) binds;
- a client across the link: the link cap over the bytes each transaction moves, and the round trips
  each transaction makes (threads / (statements x RTT));
- and at distance, for every TCP stream: streams x the hosts' send buffer / RTT (tcp_wmem's max);
- a replayed profile's largest transaction: its bytes on the wire over the link's capacity, plus the
  one-way delay, is the least lag it leaves, whatever the mean rate.

Pure: figures in, explanations out.
"""

from __future__ import annotations

from dataclasses import dataclass

TCP_WMEM_MAX_DEFAULT = 4 * 1024 * 1024  # a Linux network namespace's net.ipv4.tcp_wmem max
SATURATED = 0.85  # a link carrying this share of its goodput is full
# The measurement error of demand over capacity: the wire factor varies by 1-2 % between the points of
# one set-up here, iperf3's goodput by less. Near the knee, where 1 - capacity / demand is small, it
# moves the predicted slope by capacity / demand x this.
DEMAND_ERROR = 0.02


@dataclass(frozen=True)
class Tolerance:
    pct: float = 25.0  # relative, for rates and times
    slope: float = 0.01  # absolute, s of lag per s: a relative one means nothing near a zero slope


def _rtt_seconds(point: dict) -> float | None:
    v = point.get("verification") or {}
    ms = (v.get("rtt") or {}).get("median_ms") or v.get("rtt_asked_ms")
    if not ms and point.get("cluster"):
        ms = point["cluster"].get("delay_ms")
    return ms / 1000 if ms else None


def tcp_bound_mbit(streams: int, rtt: float | None, wmem: int) -> float | None:
    """The bandwidth-delay bound: each stream keeps at most its send buffer in flight per round trip."""
    if not rtt or rtt <= 0:
        return None
    return round(streams * wmem * 8 / rtt / 1e6, 3)


def _within(measured: float, predicted: float, pct: float) -> bool:
    return abs(measured - predicted) <= pct / 100 * max(abs(predicted), 1e-9)


def _mbit(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} Mbit/s"


def _setup_key(point: dict) -> str:
    """Points of one replicator set-up (the wire factor is measured across them)."""
    return repr(sorted((point.get("replicator") or {}).items()))


def capacity(p: dict, wmem: int) -> tuple[float, str] | None:
    """The replication link's capacity: its measured goodput, or one TCP stream's bound at this RTT
    (replication is one connection), whichever is lower; None when neither is known."""
    goodput = (p.get("verification") or {}).get("throughput_mbit")
    tcp = tcp_bound_mbit(1, _rtt_seconds(p), wmem)
    found = [(c, name) for c, name in ((goodput, "the link's measured goodput"),
                                       (tcp, f"one TCP stream's bound ({wmem / 2**20:g} MiB send buffer / RTT)")) if c]  # fmt: skip
    return min(found) if found else None


def wire_factors(points: list[dict], wmem: int) -> dict[str, float]:
    """Bytes on the wire per binlog byte, per replicator set-up, from its points whose link was not
    full (compression makes it under 1; protocol and packet headers over 1)."""
    found: dict[str, list[float]] = {}
    for p in points:
        link, binlog, cap = p.get("link_mbit"), p.get("binlog_mbit"), capacity(p, wmem)
        if not link or not binlog or binlog < 0.05:
            continue
        if cap and link >= SATURATED * cap[0]:
            continue
        found.setdefault(_setup_key(p), []).append(link / binlog)
    return {key: round(sum(v) / len(v), 3) for key, v in found.items()}


def explain(summary: dict, environment: dict | None = None, tolerance: Tolerance | None = None) -> list[dict]:
    """One explanation per point of the run, in its order (the tolerance: the scenario's, kept in
    summary.json, unless given)."""
    environment = environment or {}
    if tolerance is None:
        tolerance = Tolerance(**(summary.get("bottleneck_tolerance") or {}))
    wmem_lab = int((environment.get("tcp_buffers") or {}).get("wmem_max") or TCP_WMEM_MAX_DEFAULT)
    between = summary.get("link_between") or ["mysql-source", "mysql-target"]
    points = summary.get("points") or []
    factors = wire_factors(points, wmem_lab)
    out = []
    for p in points:
        # The point's own, where it recorded them (a scenario's tcp_buffers): the sender's send buffer.
        sender = (p.get("tcp_buffers") or {}).get(between[0]) or {}
        wmem = int(sender["wmem"].split()[2]) if sender.get("wmem") else wmem_lab
        if p.get("cluster"):
            found = synchronous_cluster(p, tolerance)
        elif "loadgen" in between:
            found = client_across(p, wmem, tolerance)
        else:
            found = asynchronous(p, wmem, factors.get(_setup_key(p)), tolerance)
            if (p.get("replicator") or {}).get("semi_sync"):
                found = semi_sync(p, found, tolerance)
            found = largest_transaction(p, found, wmem, factors.get(_setup_key(p)), tolerance)
        out.append({"point": p.get("point"), **found})
    return out


def asynchronous(p: dict, wmem: int, factor: float | None, tolerance: Tolerance) -> dict:
    tcp = tcp_bound_mbit(1, _rtt_seconds(p), wmem)
    binlog, slope = p.get("binlog_mbit"), p.get("lag_slope")
    measured = {"lag_slope": slope, "link_mbit": p.get("link_mbit"), "binlog_mbit": binlog}
    cap = capacity(p, wmem)
    if binlog is None or slope is None or cap is None:
        return {"model": "asynchronous replication", "bound": None, "predicted": {}, "measured": measured,
                "agrees": None, "words": "not predicted: no binlog rate, lag slope or link capacity measured"}  # fmt: skip
    capacity_mbit, what = cap
    wire = factor if factor is not None else 1.0
    demand = binlog * wire
    predicted = max(0.0, 1 - capacity_mbit / demand) if demand > 0 else 0.0
    interval = p.get("lag_slope_ci") or {}
    # Where the demand is within its measurement error of the capacity, that error moves the prediction.
    near = demand * (1 + DEMAND_ERROR) >= capacity_mbit
    propagated = capacity_mbit / demand * DEMAND_ERROR if near else 0.0
    allowed = max(tolerance.slope, tolerance.pct / 100 * predicted, propagated)
    close = abs(slope - predicted) <= allowed or (
        bool(interval) and interval["low"] - tolerance.slope <= predicted <= interval["high"] + tolerance.slope
    )
    carried = p.get("link_mbit") or 0.0
    full = carried >= SATURATED * capacity_mbit
    bound = "link" if demand >= SATURATED * capacity_mbit or (full and slope > predicted) else "load"
    if "TCP" in what and bound == "link":
        bound = "tcp buffers"
    on_wire = (f", {_mbit(demand)} on the wire (x {wire:g}, measured at the lighter points)" if factor is not None
               else " (on the wire about as much: not measured here)")  # fmt: skip
    need = (f"the writes make {_mbit(binlog)} of binlog{on_wire}, {demand / capacity_mbit * 100:.0f} % of "
            f"{what}, {_mbit(capacity_mbit)}")  # fmt: skip
    figures = f"lag slope predicted {predicted:.3f}, measured {slope:.3f} s/s"
    if close:
        agrees = True
        if bound == "load":
            state = "the link has room"
        elif predicted == 0:
            state = f"the link is nearly full ({demand / capacity_mbit * 100:.0f} % of it), lag flat"
        else:
            state = "the link binds"
        words = f"{state}: {need}; {figures}"
    elif slope > predicted and full:
        # The link is full: it binds, as predicted, only harder; the stream got less of it than iperf3 did.
        agrees = True
        words = (f"the link binds (it carried {_mbit(carried)}, full): {need}; {figures}: steeper than the goodput "
                 "alone explains, the replication stream got less of the link than iperf3 did")  # fmt: skip
    elif slope > predicted:
        agrees = False
        words = (
            f"**not the network**: the link carried {_mbit(carried)} of its {_mbit(capacity_mbit)} while lag grew "
            f"{slope:.3f} s/s (predicted {predicted:.3f} from {need}): the applier or the replicator bounds this point"
        )
    elif factor is not None and factor < 0.95:
        agrees = False
        words = (
            f"lag grew slower than the link allows at the wire factor of this set-up's lighter points ({figures}; "
            f"{need}): compression packs more at this rate than there"
        )
    else:
        agrees = False
        words = (
            f"lag grew slower than the link allows ({figures}; {need}): fewer bytes crossed than the binlog "
            "counts, or the window caught the start of a backlog"
        )
    return {"model": "asynchronous replication", "bound": bound,
            "predicted": {"lag_slope": round(predicted, 4), "demand_mbit": round(demand, 4), "capacity_mbit": capacity_mbit,
                          "wire_factor": factor, "tcp_bound_mbit": tcp},
            "measured": measured, "agrees": agrees, "words": words}  # fmt: skip


def largest_transaction(p: dict, found: dict, wmem: int, factor: float | None, tolerance: Tolerance) -> dict:
    """A replayed profile's largest transaction: the replica applies nothing written after it until all
    of it has crossed, so the lag reaches at least its bytes (on the wire) over the link's capacity, plus
    the one-way delay, however low the mean rate. Where that is a second or more, it is the bound."""
    replay = p.get("replay") or {}
    largest = (replay.get("replay") or {}).get("transaction_bytes_max") or (
        (replay.get("profile") or {}).get("figures") or {}
    ).get("transaction_bytes_max")
    cap, rtt, lag = capacity(p, wmem), _rtt_seconds(p) or 0.0, p.get("max_lag_seconds")
    if not largest or cap is None or lag is None or found.get("bound") not in ("load", None):
        return found
    wire = factor if factor is not None else 1.0
    crossing = largest * wire * 8 / (cap[0] * 1e6)
    predicted = crossing + rtt / 2
    if predicted < 1.0:
        return found
    agrees = _within(lag, predicted, tolerance.pct)
    state = "the largest transaction binds, not the mean rate" if agrees else "**not the largest transaction alone**"
    words = (
        f"{state}: {largest / 1e6:.3g} MB x {wire:g} on the wire need {crossing:.1f} s of {cap[1]}, "
        f"{_mbit(cap[0])}, before anything written after it applies; max lag predicted {predicted:.1f} s, measured "
        f"{lag:.1f} s (the mean rate, {_mbit((p.get('binlog_mbit') or 0) * wire)}, leaves the link room)"
    )
    return {"model": "asynchronous replication, largest transaction", "bound": "largest transaction",
            "predicted": {**found.get("predicted", {}), "max_lag_seconds": round(predicted, 2)},
            "measured": {**found.get("measured", {}), "max_lag_seconds": lag}, "agrees": agrees, "words": words}  # fmt: skip


def semi_sync(p: dict, found: dict, tolerance: Tolerance) -> dict:
    """Semi-sync adds the commit's wait: at least one round trip, so TPS <= threads / RTT."""
    rtt = _rtt_seconds(p)
    threads = (p.get("load") or {}).get("threads") or 1
    tps = p.get("tps")
    if not rtt or tps is None:
        return found
    bound_tps = threads / rtt
    asked = (p.get("load") or {}).get("rate_tps") or 0
    over = tps > bound_tps * (1 + tolerance.pct / 100)
    if over:
        words = (f"**faster than semi-sync allows**: {tps:g} TPS over {threads} threads / {rtt * 1000:.0f} ms = "
                 f"{bound_tps:.0f} TPS: commits did not wait for the replica (semi-sync timed out to asynchronous?)")  # fmt: skip
    elif asked and asked < 0.9 * bound_tps:
        words = f"the asked rate ({asked} TPS) is under the round-trip bound ({threads} threads / RTT = {bound_tps:.0f} TPS)"
    elif tps >= (1 - tolerance.pct / 100) * bound_tps:
        words = (
            f"the round trip binds: {tps:g} TPS against {threads} threads / {rtt * 1000:.0f} ms = {bound_tps:.0f} TPS"
        )
    else:
        words = (f"under the round-trip bound ({tps:g} of {bound_tps:.0f} TPS): the source or the CPU binds, not the "
                 "commit's round trip")  # fmt: skip
    return {**found, "model": "semi-sync replication", "bound": "round trip" if not over else found["bound"],
            "predicted": {**found["predicted"], "max_tps": round(bound_tps, 1)},
            "measured": {**found["measured"], "tps": tps},
            "agrees": (found["agrees"] is not False) and not over,
            "words": f"{words}; {found['words']}"}  # fmt: skip


def synchronous_cluster(p: dict, tolerance: Tolerance) -> dict:
    """Every commit waits for the delayed node's round trip: queries x RTT / clients."""
    rtt = _rtt_seconds(p)
    load = p.get("load") or {}
    threads, queries, seconds = load.get("threads") or 1, load.get("queries"), p.get("load_seconds")
    if not rtt or not queries or seconds is None:
        return {"model": "synchronous cluster", "bound": None, "predicted": {}, "measured": {"load_seconds": seconds},
                "agrees": None, "words": "not predicted: no round trip or no timed load"}  # fmt: skip
    predicted = queries * rtt / threads
    agrees = _within(seconds, predicted, tolerance.pct)
    ratio = seconds / predicted
    if agrees:
        words = (f"the round trip binds: {queries} commits x {rtt * 1000:.0f} ms / {threads} clients = {predicted:.2f} s, "
                 f"measured {seconds:.2f} s")  # fmt: skip
        bound = "round trip"
    elif ratio > 1:
        words = (f"**not the round trip**: {seconds:.2f} s measured, {ratio:.1f} x the {predicted:.2f} s that "
                 f"{queries} commits x {rtt * 1000:.0f} ms / {threads} clients take: CPU or the cluster's flow control "
                 "binds at this concurrency")  # fmt: skip
        bound = "cpu or flow control"
    else:
        words = (f"faster than one round trip per commit ({seconds:.2f} s against {predicted:.2f} s): commits were "
                 "grouped, or the delayed node was not in each commit's path")  # fmt: skip
        bound = "round trip (shared)"
    return {"model": "synchronous cluster", "bound": bound, "predicted": {"load_seconds": round(predicted, 3)},
            "measured": {"load_seconds": seconds}, "agrees": agrees, "words": words}  # fmt: skip


def client_across(p: dict, wmem: int, tolerance: Tolerance) -> dict:
    """A client benchmark over the link: the link cap over bytes per transaction, the TCP bound of the
    clients' connections, and the round trips each transaction makes."""
    rtt = _rtt_seconds(p)
    load = p.get("load") or {}
    threads, tps, qps = load.get("threads") or 1, p.get("tps"), p.get("qps")
    v = p.get("verification") or {}
    carried = max(p.get("link_mbit") or 0, p.get("reverse_link_mbit") or 0)
    cap = v.get("throughput_mbit") or v.get("rate_asked_mbit")
    tcp = tcp_bound_mbit(threads, rtt, wmem)
    measured = {"tps": tps, "link_mbit": carried}
    if not tps:
        return {"model": "client across the link", "bound": None, "predicted": {}, "measured": measured,
                "agrees": None, "words": "not predicted: no transactions measured"}  # fmt: skip
    per_txn_mbit = carried / tps
    bounds = {}
    if cap:
        bounds["link"] = cap / per_txn_mbit if per_txn_mbit else None
    if tcp:
        bounds["tcp buffers"] = tcp / per_txn_mbit if per_txn_mbit else None
    if rtt and qps:
        bounds["round trips"] = threads / (qps / tps * rtt)
    bounds = {k: round(v, 1) for k, v in bounds.items() if v}
    if not bounds:
        return {"model": "client across the link", "bound": None, "predicted": {}, "measured": measured,
                "agrees": None, "words": "not predicted: no link cap, round trip or bytes measured"}  # fmt: skip
    bound, predicted = min(bounds.items(), key=lambda kv: kv[1])
    agrees = tps <= predicted * (1 + tolerance.pct / 100) and tps >= predicted * (1 - tolerance.pct / 100)
    detail = ", ".join(f"{k} {v:g} TPS" for k, v in bounds.items())
    if agrees:
        words = f"the {bound} bind{'s' if not bound.endswith('s') else ''}: {tps:g} TPS measured, bounds {detail}"
    elif tps > predicted:
        words = f"faster than the tightest bound ({bound}, {predicted:g} TPS; {tps:g} measured): a bound is overstated"
    else:
        words = (f"**under every network bound** ({detail}; {tps:g} TPS measured, {carried:.3g} Mbit/s carried): the "
                 "server's or the client's CPU binds, not the network")  # fmt: skip
    return {"model": "client across the link", "bound": bound if agrees else "cpu" if tps < predicted else bound,
            "predicted": {"max_tps": predicted, "bounds_tps": bounds, "tcp_bound_mbit": tcp},
            "measured": measured, "agrees": agrees, "words": words}  # fmt: skip


# What each `bound` means, for the legend under report.md's table (#36.5: "bound: load" unexplained).
BOUNDS = {
    "link": "the writes need more than the link carries (its measured goodput): lag grows with the binlog the link cannot send",
    "tcp buffers": "one TCP stream's send buffer per round trip carries less than the link's rate: the buffers bind, not the rate",
    "largest transaction": "a transaction must cross the link whole before what follows it applies: its size over the link's rate sets the lag, whatever the mean rate",
    "load": "the link has room: the load's own rate sets the pace and the network does not bind (lag stays flat)",
    "round trip": "each commit waits a round trip (semi-sync's ack, a cluster's certification): threads / RTT caps the rate",
    "round trip (shared)": "faster than a round trip per commit: commits were grouped, or the delayed node was off their path",
    "cpu or flow control": "slower than the round trips explain: the CPU or the cluster's flow control binds",
    "cpu": "the client or the server's CPU binds before the link",
}


def lines(summary: dict, environment: dict | None = None) -> list[str]:
    """report.md's section: per point, the model, what binds, predicted against measured."""
    found = summary.get("bottlenecks") or explain(summary, environment)
    if not found:
        return []
    tolerance = Tolerance(**(summary.get("bottleneck_tolerance") or {}))
    disagree = [f["point"] for f in found if f["agrees"] is False]
    out = [
        "",
        "## What bounds each point",
        "",
        f"Predicted from the point's own figures (the models: `laglab/scenarios/analysis/bottleneck.py`) and held against "
        f"the measurement, with a tolerance of {tolerance.pct:g} % (lag slopes: {tolerance.slope:g} s/s).",
        "",
    ]
    if disagree:
        out += [
            f"**Prediction and measurement disagree in point(s) {', '.join(map(str, disagree))}**: the model does not "
            "explain them; each row says how (lag that grows while the link has room is an applier, not the network).",
            "",
        ]
    out += ["| # | model | bound | agrees | explanation |", "|---|---|---|---|---|"]
    for f in found:
        agrees = {True: "yes", False: "**no**", None: "-"}[f["agrees"]]
        out.append(f"| {f['point']} | {f['model']} | {f['bound'] or '-'} | {agrees} | {f['words']} |")
    seen = [b for b in BOUNDS if any(f["bound"] == b for f in found)]
    if seen:
        out += ["", "Bounds: " + "; ".join(f"**{b}**: {BOUNDS[b]}" for b in seen) + "."]
    return out
