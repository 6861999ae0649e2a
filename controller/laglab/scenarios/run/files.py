"""What a run writes about itself: scenario.yaml (the scenario that ran, resolved) and summary.json (its
points, a search's knees, the cleanup's errors, the consistency check and what bounds each point)."""

from __future__ import annotations

import yaml

from laglab.measurement.results import iso
from laglab.scenarios.analysis import bottleneck, outcome
from laglab.scenarios.analysis.record import RunRecord
from laglab.scenarios.plan import Plan


def resolved_yaml(plan: Plan) -> str:
    """scenario.yaml: the scenario that ran, defaults filled in, quick overrides applied."""
    doc = {
        **plan.scenario.model_dump(mode="json"),
        "sweep": plan.sweep,
        "quick_applied": plan.quick,
        "points": [p.params for p in plan.points],
    }
    return "# resolved copy of the scenario that ran (defaults filled in, quick overrides applied)\n" + yaml.safe_dump(
        doc, sort_keys=False
    )


def _reference(plan: Plan) -> dict | None:
    """The scenario's published figures, and whether this run's settings make them comparable."""
    reference = plan.scenario.reference
    return None if reference is None else reference.for_summary(plan.scenario)


def summary_doc(run, consistency_report) -> dict:
    """summary.json of a run (ScenarioRun) as it stands, the run's record: written after each point and at
    the end."""
    plan = run.plan
    tolerance = plan.scenario.bottleneck
    doc = {
        "id": run.id,
        "scenario": plan.scenario.name,
        "status": run.status,
        "reason": run.reason,
        "started": iso(run.started),
        "finished": iso(run.finished) if run.finished else None,
        "quick": plan.quick,
        "sweep": plan.sweep,
        "link_between": list(plan.scenario.link.between),
        "reference": _reference(plan),
        "points": [p.as_json() for p in run.summary],
        # a search's answers: one per sweep point, and `knee` by knob when there is one (assertions:
        # summary["knee"]["load.rate"] >= 150)
        **run.points.doc(),
        # Points whose measured window had more runnable tasks than cores (hostload.py): CPU-bound
        # figures, not the network's.
        "host_saturated_points": [p.point for p in run.summary if (p.host or {}).get("saturated")],
        "cleanup_errors": run.cleanup_errors,
        "bottleneck_tolerance": {"pct": tolerance.tolerance_pct, "slope": tolerance.slope_tolerance},
        "consistency": None
        if consistency_report is None
        else {
            k: consistency_report[k]
            for k in ("identical", "differences", "gtid", "clusters")
            if k in consistency_report
        },
    }
    # What should bound each point, predicted, against what was measured (analysis/bottleneck.py).
    doc["bottlenecks"] = bottleneck.explain(doc, run.environment)
    # What the run came to, decided once (outcome.py): report.md, report.html and the CLI read it.
    words = plan.scenario.verdict.words()
    doc["outcome"] = outcome.of_run(
        run.status, run.reason, doc["points"], doc["consistency"], run.knees, words
    ).as_json()
    return RunRecord.model_validate(doc).as_json()  # exactly the declared record (analysis/record.py)
