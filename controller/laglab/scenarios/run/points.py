"""The points a run measures, in order: the sweep's, or a search's probes as it asks for them, and the
search's answer per sweep point (summary.json's `knees`): the knee search (analysis/knee_search.py) driven
point by point, apart from the run that measures each probe."""

from __future__ import annotations

from laglab.scenarios.analysis.knee_search import judge
from laglab.scenarios.analysis.record import PointRecord
from laglab.scenarios.plan import Plan, Point


class RunPoints:
    """The points a run measures: its sweep's, or each search's probes as the search asks for them; and
    the search's answer per sweep point (`knees`) as the probes come in."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.knees: list[dict] = []  # a search's answer per sweep point, as each one ends

    def each(self, summary: list[PointRecord]):
        """The points to measure: the sweep's, or each search's probes as it asks for them (a probe's
        verdict is read from its result, appended to summary before the next one is asked)."""
        search = self.plan.search
        if search is None:
            yield from self.plan.points
            return
        for group in self.plan.points:
            knee = search.knee_search()
            numbers = []
            while (asked := knee.next()) is not None:
                value, factor = asked
                yield self.plan.probe(group, value, factor, index=len(summary))
                result = summary[-1]
                rate = result.load.get("rate_tps") or None  # a write rate asked, searched or not
                verdict, slope, why = judge(search.criterion, result, asked_rate=rate)
                knee.record(value, verdict, slope)
                numbers.append(result.point)
                result.probe = {"search": group.index + 1, "param": search.param, "value": search.value(value),
                                "window_factor": factor, "verdict": verdict, "why": why}  # fmt: skip
                self._write(group, knee, numbers, final=False)
            self._write(group, knee, numbers, final=True)

    def _write(self, group: Point, knee, numbers: list[int], final: bool) -> None:
        """The search's answer for one sweep point so far (summary.json), replaced as probes come in."""
        search = self.plan.search
        result = knee.result()
        entry = {
            "search": group.index + 1,
            "at": group.params,
            "param": search.param,
            "goal": "highest" if search.highest else "lowest",
            "until": search.until,
            "resolution": search.resolution,
            **result,
            "knee": None if result["knee"] is None else search.value(result["knee"]),
            "bracket": None if result["bracket"] is None else [None if v is None else search.value(v) for v in result["bracket"]],
            "points": list(numbers),
            "final": final,
        }  # fmt: skip
        if final:
            entry["expect"] = search.expectations(entry["knee"])
        self.knees[:] = [k for k in self.knees if k["search"] != entry["search"]] + [entry]

    def doc(self) -> dict:
        """summary.json's search and knees: one per sweep point, and `knee` by knob when there is one."""
        if self.plan.search is None:
            return {}
        doc: dict = {"search": self.plan.search.model_dump(mode="json", by_alias=True), "knees": self.knees}
        if len(self.plan.points) == 1 and self.knees:
            doc["knee"] = {self.plan.search.param: self.knees[0]["knee"]}
        return doc
