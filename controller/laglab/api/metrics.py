"""GET /metrics: the lab's state in Prometheus text format, read at scrape time (a custom collector
over the recorder, the shaping manager, the counters, the load and the runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:  # every part of the lab, read at scrape time: typed, so the import graph shows it
    from laglab.lab import Lab

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class LabCollector(Collector):
    def __init__(self, lab: Lab, runs: dict):
        self.lab, self.runs = lab, runs

    def collect(self):
        lab = self.lab
        lag = GaugeMetricFamily(
            "laglab_replication_lag_seconds", "Replication lag from the heartbeat (see README)", labels=["replica"]
        )
        behind = GaugeMetricFamily(
            "laglab_seconds_behind_source", "Seconds_Behind_Source of the replica", labels=["replica"]
        )
        latest = lab.recorder.samples[-1] if lab.recorder.samples else None
        if latest is not None and latest.lag_seconds is not None:
            lag.add_metric([lab.target.name], latest.lag_seconds)
        if latest is not None and latest.seconds_behind_source is not None:
            behind.add_metric([lab.target.name], latest.seconds_behind_source)
        further = lab.recorder.latest()
        further.pop(lab.target.name, None)
        for name, sample in further.items():  # further replicas (mysql-target-1, ... on Kubernetes)
            if sample["lag_seconds"] is not None:
                lag.add_metric([name], sample["lag_seconds"])
            if sample["seconds_behind_source"] is not None:
                behind.add_metric([name], sample["seconds_behind_source"])
        queue = GaugeMetricFamily(
            "laglab_cluster_queue_transactions",
            "A cluster member's replication queue (GR: certifier, applier; Galera: applier = wsrep_local_recv_queue)",
            labels=["replica", "queue"],
        )
        flow = GaugeMetricFamily(
            "laglab_cluster_flow_control",
            "GR: flow control throttles the member now (0/1); Galera: wsrep_flow_control_paused",
            labels=["replica"],
        )
        for recorder in lab.clusters.recorders.values():
            for node, sample in recorder.latest().items():
                if sample["lag_seconds"] is not None:
                    lag.add_metric([node], sample["lag_seconds"])
                for name in ("certifier", "applier"):
                    if sample[f"{name}_queue"] is not None:
                        queue.add_metric([node, name], sample[f"{name}_queue"])
                if sample["flow_control"] is not None:
                    flow.add_metric([node], sample["flow_control"])
        yield lag
        yield behind
        yield queue
        yield flow
        split = GaugeMetricFamily(
            "laglab_replication_lag_split_seconds",
            "The newest applied transaction's lag by part: transit, queue, apply (MySQL performance_schema)",
            labels=["replica", "part"],
        )
        if latest is not None and latest.transit_seconds is not None:
            for part in ("transit", "queue", "apply"):
                split.add_metric([lab.target.name, part], getattr(latest, f"{part}_seconds"))
        yield split

        delay = GaugeMetricFamily(
            "laglab_shaping_delay_seconds",
            "Delay asked on a service's egress (peer '' = all)",
            labels=["service", "peer"],
        )
        rate = GaugeMetricFamily("laglab_shaping_rate_bits_per_second", "Rate limit asked", labels=["service", "peer"])
        loss = GaugeMetricFamily("laglab_shaping_loss_ratio", "Loss asked, 0..1", labels=["service", "peer"])
        for e in lab.shaping_view.entries():
            labels = [e.service, e.peer or ""]
            delay.add_metric(labels, e.shaping.delay)
            loss.add_metric(labels, e.shaping.loss)
            if e.shaping.rate:
                rate.add_metric(labels, e.shaping.rate)
        yield delay
        yield rate
        yield loss

        link = CounterMetricFamily(
            "laglab_link_bytes",
            "Bytes a service sent to a peer (link) or its eth0 moved (peer '')",
            labels=["service", "peer", "direction"],
        )
        for row in lab.counters.latest:
            if row["kind"] == "link":
                link.add_metric([row["service"], row["peer"], "tx"], row["tx_bytes"])
            else:
                link.add_metric([row["service"], "", "tx"], row["tx_bytes"])
                link.add_metric([row["service"], "", "rx"], row["rx_bytes"])
        yield link

        faults = GaugeMetricFamily(
            "laglab_faults_active", "Faults in force (undone when their duration is over)", labels=["service", "action"]
        )
        for fault in lab.faults.active():
            faults.add_metric([fault.service, fault.action], 1)
        yield faults
        partitions = GaugeMetricFamily("laglab_partitions", "Partitions in force")
        partitions.add_metric([], len(lab.shaping_view.partitions()))
        yield partitions

        qps = GaugeMetricFamily("laglab_load_qps", "Queries per second of the running load (sysbench report)")
        load_rows = list(lab.load.rows) if lab.load.running else []
        qps.add_metric([], load_rows[-1]["qps"] if load_rows else 0.0)
        yield qps

        info = InfoMetricFamily(
            "laglab_run", "The scenario run in progress and its point", labels=["scenario", "point"]
        )
        for run in self.runs.values():
            if run.status == "running":
                info.add_metric([run.plan.scenario.name, str(run.point.index + 1 if run.point else 1)], {"id": run.id})
        yield info


def render(lab: Lab, runs: dict) -> bytes:
    registry = CollectorRegistry()
    registry.register(LabCollector(lab, runs))
    return generate_latest(registry)
