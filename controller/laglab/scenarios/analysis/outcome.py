"""What a point and a run came to, decided once (#52.1). summary.json, the API's run, report.md,
report.html, `laglab run`'s lines and its exit code all read the `outcome` stored here and decide
nothing themselves: before, the report looked at the assertions and the consistency check only while
the CLI also counted link verification, load errors and failed timeline steps, so a report could say
PASS above a `laglab run` that exited 1.

A point is
- NOT VALID when what it measured is not what was asked: the link was not as asked (verification),
  the load failed, or a timeline step failed. Its checks then mean nothing either way.
- FAIL when one of the scenario's assertions did not hold;
- PASS when every assertion held; NO CHECKS when it states none (an exploratory run).

A run that did not finish has its status (INTERRUPTED, FAILED) and why. A finished run is FAIL when the
target differs from the source (data lost is a finding whatever else happened), NOT VALID when a point
is, FAIL when a point or a search's `expect` failed, then PASS or NO CHECKS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Verdict = Literal["PASS", "FAIL", "NOT VALID", "NO CHECKS", "INTERRUPTED", "FAILED", "RUNNING", "PENDING"]


PLAIN = ("PASS", "FAIL")  # what PASS and FAIL say unless the scenario words them (`verdict:`)


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)  # why, in words; empty for PASS and NO CHECKS
    checks: int = 0  # assertions and a search's expectations judged
    failed: int = 0  # of them, those that did not hold
    said: str = ""  # the verdict in the scenario's words (REPRODUCED for PASS in a ticket's); "" = verdict

    @property
    def words(self) -> str:
        """What report.md's title, the CLI's closing line and the dashboard print."""
        return self.said or self.verdict

    @property
    def held(self) -> bool:
        """Nothing failed and the run is valid: `laglab run` exits 0."""
        return self.verdict in ("PASS", "NO CHECKS")

    def as_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "held": self.held,
            "reasons": list(self.reasons),
            "checks": self.checks,
            "failed": self.failed,
            "said": self.words,
        }

    @classmethod
    def from_json(cls, doc: dict) -> Outcome:
        return cls(
            doc["verdict"], list(doc.get("reasons") or []), int(doc.get("checks") or 0), int(doc.get("failed") or 0),
            str(doc.get("said") or ""),
        )  # fmt: skip

    def worded(self, words: tuple[str, str]) -> Outcome:
        """This outcome with PASS and FAIL said as the scenario says them; every other verdict as it is
        (NOT VALID is never worded as a result: its checks mean nothing either way)."""
        said = dict(zip(PLAIN, words, strict=True)).get(self.verdict, "")
        return Outcome(self.verdict, self.reasons, self.checks, self.failed, said.upper() if said else "")


def of_point(point: dict) -> Outcome:
    """A point's outcome from its measured result (summarise.point_result)."""
    checks = point.get("assertions") or []
    failed = [a for a in checks if not a["passed"]]
    invalid = []
    verification = point.get("verification") or {}
    if verification and not verification.get("ok", True):
        invalid.append(f"the link was not as asked: {_not_as_asked(verification)}")
    if point.get("load_error"):
        invalid.append(f"the load failed: {point['load_error']}")
    for event in point.get("timeline") or []:
        if event.get("error"):
            what = event.get("text") or event.get("action") or "?"
            invalid.append(f"timeline step {event.get('step', '?')} ({what}) failed: {event['error']}")
    if invalid:
        return Outcome("NOT VALID", invalid, len(checks), len(failed))
    if failed:
        return Outcome("FAIL", [f"`{a['assertion']}` did not hold" for a in failed], len(checks), len(failed))
    return Outcome("PASS" if checks else "NO CHECKS", [], len(checks), 0)


def _not_as_asked(v: dict) -> str:
    """The link verification's figures that did not hold, in words (scenarios/measure.verify_link)."""
    said = []
    if v.get("rtt_ok") is False:
        median = (v.get("rtt") or {}).get("median_ms")
        measured = "no ping answered" if median is None else f"RTT {median} ms"
        said.append(f"{measured} for {v.get('rtt_asked_ms')} ms asked")
    if v.get("rate_ok") is False:
        got = v.get("throughput_mbit")
        measured = "no throughput measured" if got is None else f"{got} Mbit/s"
        said.append(f"{measured} for {v.get('rate_asked_mbit')} Mbit/s asked")
    return "; ".join(said) or "see the point's verification"


def point_outcome(point: dict) -> Outcome:
    """The outcome stored with a point; a point of an older summary.json (none stored) gets it decided
    by the same rule."""
    stored = point.get("outcome")
    return Outcome.from_json(stored) if stored else of_point(point)


def of_run(
    status: str,
    reason: str | None,
    points: list[dict],
    consistency: dict | None,
    knees: list[dict],
    words: tuple[str, str] = PLAIN,
) -> Outcome:
    """A run's outcome from its status, its points' outcomes, the consistency check and a search's knees,
    PASS and FAIL in the scenario's `words`."""
    return _of_run(status, reason, points, consistency, knees).worded(words)


def _of_run(status: str, reason: str | None, points: list[dict], consistency: dict | None, knees: list[dict]) -> Outcome:  # fmt: skip
    if status != "completed":
        return Outcome(status.upper(), [reason] if reason else [])  # type: ignore[arg-type]
    outcomes = [(p.get("point"), point_outcome(p)) for p in points]
    expectations = [c for knee in knees or [] for c in knee.get("expect") or []]
    checks = sum(o.checks for _, o in outcomes) + len(expectations)
    failed = sum(o.failed for _, o in outcomes) + sum(1 for c in expectations if not c["passed"])
    if consistency is not None and consistency.get("identical") is False:
        differences = "; ".join(consistency.get("differences") or [])[:300]
        return Outcome("FAIL", [f"the target differs from the source: {differences}"], checks, failed)
    invalid = [f"point {n}: {why}" for n, o in outcomes if o.verdict == "NOT VALID" for why in o.reasons]
    if invalid:
        return Outcome("NOT VALID", invalid, checks, failed)
    reasons = [f"point {n}: {why}" for n, o in outcomes if o.verdict == "FAIL" for why in o.reasons]
    reasons += [
        f"search: `{c['expectation']}` did not hold (knee {c['knee']})" for c in expectations if not c["passed"]
    ]
    if reasons:
        return Outcome("FAIL", reasons, checks, failed)
    return Outcome("PASS" if checks else "NO CHECKS", [], checks, 0)


def run_outcome(summary: dict) -> Outcome:
    """The outcome stored in a summary.json (or the API's run); an older one gets it decided by the same
    rule from what it stored."""
    stored = summary.get("outcome")
    if stored:
        return Outcome.from_json(stored)
    consistency = summary.get("consistency")
    if consistency is None and summary.get("identical") is not None:  # the API's run says `identical`
        consistency = {"identical": summary["identical"], "differences": []}
    return of_run(
        str(summary.get("status") or "unknown"),
        summary.get("reason"),
        points if isinstance(points := summary.get("points"), list) else summary.get("summary") or [],
        consistency,
        summary.get("knees") or [],
    )
