"""Runs a scenario plan in the controller, point after point, into one results folder.

Per point: clear shaping, wait until the replica has caught up, apply the link's shaping at both
ends (half the RTT each), verify it from inside the lab (kept with the point; a miss beyond the
tolerance marks the point), start the load, skip the warm-up, measure, summarise. After the last
point the consistency check runs. Cleanup (shaping cleared, load stopped, replicator options
restored) always runs; the run ends `completed`, `failed` (with the reason) or `interrupted`.
"""

from __future__ import annotations

import logging
import os
import platform
import statistics
import threading
import time
import traceback

import yaml

from .. import clusters, consistency, replication
from ..db import Endpoint, connect, executed_gtids, server_dialect, wait_executed
from ..load import Profile
from ..replicators import drivers
from ..results import Run, iso
from ..shaping import verify
from ..shaping.params import format_time, parse_request
from . import report
from .recording import PointRecording
from .spec import DRIVEN_KINDS, Plan, Point, describe_point

log = logging.getLogger("laglab.runs")
LOAD_COLUMNS = ["point", "time", "epoch", "elapsed_s", "threads", "tps", "qps", "latency_p95_ms", "errors_per_s"]
LAG_COLUMNS = [
    "point",
    "time",
    "epoch",
    "status",
    "lag_seconds",
    "heartbeat_age_seconds",
    "seconds_behind_source",
    "applier_lag_seconds",
]
LINK_COLUMNS = ["point", "time", "epoch", "kind", "service", "peer", "rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]


class Interrupted(Exception):
    pass


class ScenarioRun:
    """One run of a plan. `start()` runs it in a thread; `cancel()` interrupts it between steps."""

    def __init__(self, lab, plan: Plan, results_root, text: str):
        self.lab, self.plan = lab, plan
        self.run = Run(results_root, plan.scenario.name, {"scenario": plan.scenario.name, "quick": plan.quick})
        self.id = self.run.path.name
        self.text = text
        self.status = "pending"
        self.reason: str | None = None
        self.point_index: int | None = None
        self.step = "queued"
        self.started = time.time()
        self.finished: float | None = None
        self.summary: list[dict] = []
        self._cancel = threading.Event()
        self._cancel_reason = "cancelled by request"
        self._thread: threading.Thread | None = None
        self._load_series = self.run.series("load.csv", LOAD_COLUMNS)
        self._lag_series = self.run.series("lag.csv", LAG_COLUMNS)
        self._link_series = self.run.series("links.csv", LINK_COLUMNS)
        self.load = lab.load  # the lab's one load generator (the dashboard's load panel uses it too)
        self._recording: PointRecording | None = None
        self.driver = None  # DTLE or DM, started per point (laglab.replicators.drivers)
        self._semi_sync_before: bool | None = None

    # --- status ---
    def as_json(self) -> dict:
        elapsed = (self.finished or time.time()) - self.started
        eta = max(0.0, self.plan.eta_seconds() - elapsed) if self.status == "running" else 0.0
        return {
            "id": self.id,
            "scenario": self.plan.scenario.name,
            "status": self.status,
            "reason": self.reason,
            "points": len(self.plan.points),
            "point": None if self.point_index is None else self.point_index + 1,
            "point_params": None if self.point_index is None else self.plan.points[self.point_index].params,
            "step": self.step,
            "elapsed_seconds": round(elapsed, 1),
            "eta_seconds": round(eta, 1),
            "results": f"results/{self.id}",
            "summary": self.summary,
        }

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"run-{self.id}", daemon=True)
        self._thread.start()

    def cancel(self, reason: str = "cancelled by request") -> None:
        self._cancel_reason = reason
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> None:
        if self._thread:
            self._thread.join(timeout)

    def _check(self, step: str) -> None:
        if self._cancel.is_set():
            raise Interrupted(self._cancel_reason)
        self.step = step

    def _sleep(self, seconds: float) -> None:
        if self._cancel.wait(seconds):
            raise Interrupted(self._cancel_reason)

    # --- the run ---
    def _main(self) -> None:
        self.status = "running"
        self.run.write_json("scenario.json", {"plan": self.plan.model_dump(mode="json")})
        (self.run.path / "scenario.yaml").write_text(self._resolved_yaml())
        consistency_report = None
        feeds = self._feeds()
        for feed, fn in feeds:
            feed.subscribe(fn)
        try:
            self.run.write_json("environment.json", self._environment())
            self._check("preparing data")
            if self.plan.scenario.cluster is None:
                self._prepare_data(self.plan.points[0])
            for point in self.plan.points:
                self.point_index = point.index
                if self.lab.events is not None:
                    self.lab.events.add(
                        "run",
                        f"{self.plan.scenario.name} point {point.index + 1}/{len(self.plan.points)}: {describe_point(point)}",
                    )
                run_point = self._run_cluster_point if point.scenario.cluster else self._run_point
                self.summary.append(run_point(point))
                self.run.write_json("summary.json", self._summary_doc(consistency_report))
            self._check("consistency check")
            if self.plan.scenario.cluster is not None:
                consistency_report = self._cluster_consistency()
            elif self.driver is not None and self.driver.kind == "dm":
                consistency_report = self._dm_consistency()
            else:
                if self.driver is not None:  # DTLE: once caught up, native replication resumes from there
                    self.lab.shaping.clear()  # a delayed link would hold the catch-up for as long as it lasts
                    self._wait_driver(120)
                    self.driver.stop()
                consistency_report = consistency.check(self.lab.source, self.lab.target, timeout=120)
            self.status = "completed"
        except Interrupted as error:
            self.status, self.reason = "interrupted", str(error)
        except Exception as error:
            self.status, self.reason = "failed", f"{type(error).__name__}: {error}"
            log.error("run %s failed: %s", self.id, traceback.format_exc())
        finally:
            self.step = "cleanup"
            for feed, fn in feeds:
                feed.unsubscribe(fn)
            self._cleanup()
            self.finished = time.time()
            self.run.write_json("summary.json", self._summary_doc(consistency_report))
            for series in (self._load_series, self._lag_series, self._link_series):
                series.close()
            try:
                report.render(self.run.path)
            except Exception as error:  # a report problem must not hide the run's own status
                log.error("report for %s failed: %s", self.id, error)
            self.step = "done"

    def _feeds(self) -> list:
        """The recorders this run streams from, each with the subscriber that hands a sample to the
        point being recorded (samples between points are in the lab's live files only)."""
        feeds = [(self.lab.recorder.feed, lambda sample: self._recording and self._recording.on_lag(sample))]
        if self.lab.counters is not None:
            feeds.append((self.lab.counters.feed, lambda rows: self._recording and self._recording.on_links(rows)))
        return feeds

    def _resolved_yaml(self) -> str:
        doc = {
            **self.plan.scenario.model_dump(mode="json"),
            "sweep": self.plan.sweep,
            "quick_applied": self.plan.quick,
            "points": [p.params for p in self.plan.points],
        }
        return (
            "# resolved copy of the scenario that ran (defaults filled in, quick overrides applied)\n"
            + yaml.safe_dump(doc, sort_keys=False)
        )

    def _summary_doc(self, consistency_report) -> dict:
        return {
            "id": self.id,
            "scenario": self.plan.scenario.name,
            "status": self.status,
            "reason": self.reason,
            "started": iso(self.started),
            "finished": iso(self.finished) if self.finished else None,
            "quick": self.plan.quick,
            "sweep": self.plan.sweep,
            "link_between": list(self.plan.scenario.link.between),
            "points": self.summary,
            "consistency": None
            if consistency_report is None
            else {
                k: consistency_report[k]
                for k in ("identical", "differences", "gtid", "clusters")
                if k in consistency_report
            },
        }

    def _environment(self) -> dict:
        lab = self.lab
        versions = {}
        for endpoint in (lab.source, lab.target):
            conn = connect(endpoint, timeout=5)
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT VERSION() AS v")
                    versions[endpoint.name] = cur.fetchone()["v"]
            finally:
                conn.close()
        images = {}
        for service, c in lab.shaping.containers.list().items():
            try:
                images[service] = lab.shaping.containers.client.containers.get(c.id).attrs["Config"]["Image"]
            except Exception:
                images[service] = None
        return {
            "server_versions": versions,
            "images": images,
            "kernel": platform.release(),
            "shaping_backend": lab.shaping.backend.name,
            "netem_available": lab.netem_available,
            "host_cores": os.cpu_count(),
            "host_memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "heartbeat_interval_ms": round(lab.recorder.interval * 1000) if lab.recorder else None,
        }

    # --- load (sysbench in the loadgen container) ---
    @staticmethod
    def _profile(point: Point) -> Profile:
        s = point.scenario
        return Profile(
            s.load.script, s.data.tables, s.data.rows, s.load.threads, s.load.rate, s.load.target, s.load.protocol
        )

    def _prepare_data(self, point: Point) -> None:
        """sysbench prepare once per data set: kept when every table already holds the asked rows."""
        s = point.scenario
        conn = connect(self.lab.source, timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT TABLE_NAME AS t, TABLE_ROWS AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME LIKE 'sbtest%%'",
                    (str(self.lab.settings.LAB_DATABASE),),
                )
                present = {row["t"] for row in cur.fetchall()}
                ready = present == {f"sbtest{i}" for i in range(1, s.data.tables + 1)}
                if ready:
                    for i in range(1, s.data.tables + 1):
                        ready = (
                            ready
                            and consistency.row_count(conn, f"{self.lab.settings.LAB_DATABASE}.sbtest{i}")
                            == s.data.rows
                        )
        finally:
            conn.close()
        if ready:
            return
        self.load.prepare(self._profile(point))
        self._wait_caught_up(600)

    def _wait_caught_up(self, timeout: float) -> None:
        src, dst = connect(self.lab.source, timeout=5), connect(self.lab.target, timeout=5, read_timeout=timeout + 30)
        try:
            dialect = server_dialect(src)
            gtids = executed_gtids(src, dialect)
            if not wait_executed(dst, dialect, gtids, timeout):
                raise RuntimeError(f"the replica did not catch up within {timeout:g}s")
        finally:
            src.close()
            dst.close()

    # --- replicator options ---
    def _replicator_options(self, point: Point | None) -> None:
        """Apply a point's native replication options (None: back to the lab's defaults)."""
        r = point.scenario.replicator if point else None
        self._semi_sync(r.semi_sync if r else None)
        src, dst = connect(self.lab.source, timeout=5), connect(self.lab.target, timeout=5)
        try:
            dialect = server_dialect(dst)
            wanted = (
                (r.compression, r.zstd_level, r.ssl, r.binlog_transaction_compression)
                if r
                else ("uncompressed", 3, False, False)
            )
            if dialect.is_mariadb:
                if wanted != ("uncompressed", 3, False, False):
                    raise RuntimeError("replicator options are MySQL's; the MariaDB flavour runs with defaults only")
                return
            with src.cursor() as cur:
                cur.execute("SET GLOBAL binlog_transaction_compression = %s", ("ON" if wanted[3] else "OFF",))
            with dst.cursor() as cur:
                cur.execute(dialect.stop_replica)
                cur.execute(dialect.network_options(wanted[0], wanted[1], wanted[2]))
                cur.execute(dialect.start_replica)
        finally:
            src.close()
            dst.close()

    def _semi_sync(self, wanted: bool | None) -> None:
        """Semi-sync as the point asks; None: back to what the lab had before the run."""
        timeout = int(self.lab.settings.SEMI_SYNC_TIMEOUT_MS)
        if self._semi_sync_before is None:
            if not wanted:
                return  # never touched
            conn = connect(self.lab.source, timeout=5)
            try:
                self._semi_sync_before = replication.semi_sync_state(conn, server_dialect(conn))["enabled"]
            finally:
                conn.close()
        target = self._semi_sync_before if wanted is None else wanted
        replication.set_semi_sync(self.lab.source, self.lab.target, target, timeout)

    def _driver_for(self, kind: str):
        if self.driver is None or self.driver.kind != kind:
            if self.driver is not None:
                self.driver.stop()
            self.driver = drivers.for_kind(kind, self.lab)
        return self.driver

    def _wait_driver(self, timeout: float) -> None:
        self.driver.wait_caught_up(timeout, sleep=self._sleep)

    # --- one point ---
    def _run_point(self, point: Point) -> dict:
        s = point.scenario
        a, b = s.link.between
        shaping = self.lab.shaping
        self._check("clearing shaping")
        shaping.clear()
        if s.replicator.kind in DRIVEN_KINDS:
            self._check(f"starting {s.replicator.kind}")
            self._driver_for(s.replicator.kind).start(s.replicator, s.link.rtt)
            self._check("waiting for the replica to catch up")
            self._wait_driver(300)
        else:
            self._replicator_options(point)
            self._check("waiting for the replica to catch up")
            self._wait_caught_up(300)
        body = s.link.shaping_body()
        if body:
            self._check("applying shaping")
            shaping.put(a, parse_request({**body, "peer": b}))
            shaping.put(b, parse_request({**body, "peer": a}))
        self._check("verifying shaping")
        verification = self._verify(point)
        self._check("load (warm-up)")
        seconds = int(s.warmup) + s.load.seconds
        load_rows: list[dict] = []
        load_thread = threading.Thread(target=self._load, args=(point, seconds, load_rows), daemon=True)
        load_start = time.time()
        self._recording = PointRecording(
            point.index + 1,
            load_start,
            self._lag_series,
            self._link_series,
            links=(s.link.between, s.link.between[::-1]),
            feeds=("lag", "links") if self.lab.counters is not None else ("lag",),
        )
        load_thread.start()
        self._sleep(s.warmup)
        window_start = time.time()
        self._recording.measure_from(window_start)
        binlog_at_window = self._binlog_bytes()
        self._check("load (measuring)")
        replicator_samples: list[tuple[float, dict]] = []
        while load_thread.is_alive():
            if self.driver is not None and self.driver.running:
                replicator_samples.append((time.time(), self.driver.sample()))
            self._sleep(0.5 if self.driver is None else 1.0)
        window_end = time.time()
        binlog_after = self._binlog_bytes()
        self._recording.close(window_end)
        result = self._summarise(
            point, verification, load_rows, load_start, window_start, window_end, binlog_after - binlog_at_window
        )
        if s.replicator.kind in DRIVEN_KINDS:
            result["replicator_metrics"] = replicator_summary(replicator_samples)
        return result

    def _verify(self, point: Point) -> dict:
        s = point.scenario
        a, b = s.link.between
        return self._verify_pair(a, b, s.link.rtt * 1000, s.verify, s.link.rate_bits)

    def _verify_pair(self, a_name: str, b_name: str, asked_ms: float, tolerances, rate_bits: float | None) -> dict:
        """RTT (and throughput when a rate is set) from a to b, measured from inside the lab."""
        lab = self.lab.shaping.containers.list()
        missing = [name for name in (a_name, b_name) if name not in lab or not lab[name].running]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not running (is its profile up? make up PROFILE=...)")
        a, b = lab[a_name], lab[b_name]
        executor = self.lab.shaping.executor
        rtt = verify.measure_rtt(executor, a.pid, b.ip, 20)
        tolerance = max(tolerances.rtt_tolerance_ms, asked_ms * tolerances.rtt_tolerance_pct / 100)
        result = {
            "rtt_asked_ms": asked_ms,
            "rtt": rtt,
            "rtt_ok": rtt.get("median_ms") is not None and abs(rtt["median_ms"] - asked_ms) <= tolerance,
        }
        if rate_bits:
            mbit = rate_bits / 1e6
            got = verify.measure_throughput(executor, a.pid, b.pid, b.ip, tolerances.throughput_seconds, reverse=False)
            result.update({"rate_asked_mbit": mbit, "throughput_mbit": got})
            result["rate_ok"] = got is not None and abs(got - mbit) <= mbit * tolerances.rate_tolerance_pct / 100
        result["ok"] = result["rtt_ok"] and result.get("rate_ok", True)
        return result

    def _load(self, point: Point, seconds: int, rows: list[dict]) -> None:
        if point.scenario.load.tool == "none":
            time.sleep(seconds)
            return
        if point.scenario.load.tool == "mysqlslap":
            self._mysqlslap(point, rows)
            return

        def keep(row: dict) -> None:
            row = {"point": point.index + 1, **row}
            rows.append(row)
            self._load_series.append(row)

        self.load.start(self._profile(point), seconds, on_row=keep, owner=self.id)
        self.load.wait()

    def _mysqlslap(self, point: Point, rows: list[dict], target: str | None = None) -> None:
        """mysqlslap runs its queries once; the point's load row is its throughput, `seconds` its time."""
        load = point.scenario.load
        self.load.error = None
        result = self.load.mysqlslap(target or load.target, load.threads, load.queries, load.query, load.setup)
        if "error" in result:
            self.load.error = result["error"]
            return
        now = time.time()
        row = {"point": point.index + 1, "time": iso(now), "epoch": round(now, 3), "elapsed_s": result["seconds"],
               "threads": load.threads, "tps": result["qps"], "qps": result["qps"]}  # fmt: skip
        rows.append(row)
        self._load_series.append(row)

    def _binlog_bytes(self) -> int:
        conn = connect(self.lab.source, timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                return sum(int(row["File_size"]) for row in cur.fetchall())
        finally:
            conn.close()

    def _summarise(self, point, verification, load_rows, load_start, start, end, binlog_bytes) -> dict:
        s = point.scenario
        figures = self._recording.figures()
        self._recording = None
        links = figures.pop("links_mbit")
        link_mbit, reverse_mbit = links.get(tuple(s.link.between)), links.get(tuple(s.link.between[::-1]))
        window = load_rows if s.load.tool == "mysqlslap" else [r for r in load_rows if r["epoch"] >= start]
        result = {
            "point": point.index + 1,
            "params": point.params,
            "link": s.link.model_dump(include={"rtt", "rate", "jitter", "loss"}),
            "load": {
                "script": s.load.script,
                "threads": s.load.threads,
                "rate_tps": s.load.rate,
                "seconds": s.load.seconds,
            },
            "replicator": s.replicator.model_dump(),
            "verification": verification,
            "measured_seconds": round(end - start, 1),
            **figures,
            "tps": round(statistics.fmean(r["tps"] for r in window), 2) if window else None,
            "load_seconds": window[-1]["elapsed_s"] if window and s.load.tool == "mysqlslap" else None,
            "qps": round(statistics.fmean(r["qps"] for r in window), 2) if window else None,
            "link_mbit": link_mbit,
            "reverse_link_mbit": reverse_mbit,
            "binlog_mbit": round(binlog_bytes * 8 / 1e6 / max(1e-6, end - start), 4),
        }
        result["load_error"] = self.load.error  # e.g. sysbench's FATAL line; the point then fails
        result["assertions"] = [{"assertion": str(a), "passed": a.holds(result.get(a.metric))} for a in s.assertions]
        result["passed"] = all(x["passed"] for x in result["assertions"]) and verification["ok"] and not self.load.error
        return result

    # --- three-node clusters (group-replication, galera profiles) ---
    def _cluster_nodes(self, point: Point) -> tuple[clusters.Kind, list]:
        kind = clusters.kind_of(point.scenario.replicator.kind)
        return kind, clusters.endpoints(kind, self.lab.settings)

    def _run_cluster_point(self, point: Point) -> dict:
        """mysqlslap on the write node while the delayed node's every packet out waits `cluster.delay`."""
        s = point.scenario
        kind, nodes = self._cluster_nodes(point)
        writer, delayed = nodes[s.cluster.write_node - 1], nodes[s.cluster.delayed_node - 1]
        shaping = self.lab.shaping
        self._check("clearing shaping")
        shaping.clear()
        self._check(f"waiting for {kind.name} to have all three members")
        try:
            clusters.wait_formed(kind, nodes, 180)
        except clusters.ClusterError as error:
            raise RuntimeError(f"{error}; start it with: make up PROFILE={kind.name}") from None
        if kind.name == "group-replication" and clusters.primary(kind, nodes) != writer:
            raise RuntimeError(f"{writer.name} is not the group's primary: cluster.write_node must name the primary")
        if s.cluster.delay:
            self._check("applying shaping")
            shaping.put(delayed.name, parse_request({"delay": format_time(s.cluster.delay)}))
        self._check("verifying shaping")
        # Only the delayed node's sending side waits: the writer's RTT to it is the delay itself.
        verification = self._verify_pair(writer.name, delayed.name, s.cluster.delay * 1000, s.verify, None)
        self._check("load (mysqlslap)")
        rows: list[dict] = []
        started = time.time()
        if s.load.tool == "mysqlslap":
            self._mysqlslap(point, rows, target=writer.name)
        else:
            self.load.error = None
            self._sleep(s.load.seconds)
        ended = time.time()
        result = {
            "point": point.index + 1,
            "params": point.params,
            "cluster": {
                "kind": kind.name,
                "write_node": writer.name,
                "delayed_node": delayed.name,
                "delay_ms": s.cluster.delay * 1000,
            },
            "load": {"tool": s.load.tool, "threads": s.load.threads, "queries": s.load.queries},
            "replicator": s.replicator.model_dump(),
            "verification": verification,
            "measured_seconds": round(ended - started, 1),
            "load_seconds": rows[-1]["elapsed_s"] if rows else None,
            "qps": rows[-1]["qps"] if rows else None,
            "tps": rows[-1]["tps"] if rows else None,
            "load_error": self.load.error,
        }
        result["assertions"] = [{"assertion": str(a), "passed": a.holds(result.get(a.metric))} for a in s.assertions]
        result["passed"] = all(x["passed"] for x in result["assertions"]) and verification["ok"] and not self.load.error
        return result

    def _dm_consistency(self) -> dict:
        """DM -> TiDB: row counts of every lab table on both sides (TiDB has no CHECKSUM TABLE)."""
        tidb = Endpoint("tidb", 4000, "root", "", "tidb")
        self.lab.shaping.clear()
        self._wait_driver(120)
        src, dst = connect(self.lab.source, timeout=5), connect(tidb, timeout=5, read_timeout=120)
        differences = []
        try:
            for table in sorted(
                t for t in consistency.lab_tables(src) if t.startswith(f"{self.lab.settings.LAB_DATABASE}.")
            ):
                counts = [consistency.row_count(conn, table) for conn in (src, dst)]
                if counts[0] != counts[1]:
                    differences.append(f"{table}: {counts[0]} rows on mysql-source, {counts[1]} on tidb")
        finally:
            src.close()
            dst.close()
        return {"identical": not differences, "differences": differences, "gtid": None}

    def _cluster_consistency(self) -> dict:
        """After the last point: every cluster used holds the same rows on all three nodes."""
        differences, checked = [], []
        for name in dict.fromkeys(p.scenario.replicator.kind for p in self.plan.points):
            kind = clusters.kind_of(name)
            report = clusters.compare_tables(
                clusters.endpoints(kind, self.lab.settings), str(self.lab.settings.LAB_DATABASE), timeout=120
            )
            checked.append({"cluster": name, **report})
            differences += [f"{name}: {d}" for d in report["differences"]]
        return {"identical": not differences, "differences": differences, "gtid": None, "clusters": checked}

    def _cleanup(self) -> None:
        steps = [self._stop_load, self.lab.shaping.clear]
        if self.driver is not None:
            steps.append(self.driver.stop)
        if self.plan.scenario.cluster is None:
            steps.append(lambda: self._replicator_options(None))
        for step in steps:
            try:
                step()
            except Exception as error:
                log.error("cleanup step failed: %s", error)
                self.reason = self.reason or f"cleanup: {error}"

    def _stop_load(self) -> None:
        if self.load.running and self.load.owner == self.id:
            self.load.stop(wait=15)


def replicator_summary(samples: list[tuple[float, dict]]) -> dict:
    """The replicator's own figures over a point: its largest reported delay, its traffic in Mbit/s."""
    delays = [v["delay_seconds"] for _, v in samples if v.get("delay_seconds") is not None]
    out = {"samples": len(samples), "max_delay_seconds": max(delays) if delays else None}
    for key in ("network_in_bytes", "network_out_bytes"):
        points = [(t, v[key]) for t, v in samples if v.get(key) is not None]
        out[key.replace("_bytes", "_mbit")] = (
            round((points[-1][1] - points[0][1]) * 8 / 1e6 / (points[-1][0] - points[0][0]), 4)
            if len(points) >= 2 and points[-1][0] > points[0][0]
            else None
        )
    return out
