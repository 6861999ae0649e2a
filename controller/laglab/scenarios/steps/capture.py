"""`capture: {link: [a, b], max_bytes, snaplen}`: the link's packets captured, a pcap per side (tcpdump
in each side's namespace, laglab/measurement/captures.py), into the run's folder (captures/point<N>-step<M>-a-b/),
for the step's `duration` or else to the end of the point's window (at most limits.CAPTURE_SECONDS);
the report's Captures section links them."""

from __future__ import annotations

from pydantic import Field

from laglab import limits
from laglab.measurement.captures import MIN_SECONDS, SNAPLEN, SNAPLEN_RANGE
from laglab.scenarios.steps.base import StepKind, now, register


@register
class CaptureStep(StepKind):
    name = "capture"
    link: tuple[str, str]
    max_bytes: int = Field(limits.CAPTURE_BYTES, ge=1, le=limits.CAPTURE_BYTES)
    snaplen: int = Field(SNAPLEN, ge=SNAPLEN_RANGE[0], le=SNAPLEN_RANGE[1])

    def check_duration(self, step) -> None:
        if step.duration is not None and not MIN_SECONDS <= step.duration <= limits.CAPTURE_SECONDS:
            raise ValueError(
                f"duration: a capture lasts {MIN_SECONDS:g}s to {limits.CAPTURE_SECONDS}s (limit capture_seconds)"
            )

    def describe(self) -> str:
        return f"capture {self.link[0]}<->{self.link[1]}"

    def items(self, run, number, step, at, order, key):
        lasts = min(step.duration if step.duration is not None else run.length - at, limits.CAPTURE_SECONDS)
        out = [(at, next(order), number, self.describe(), lambda: self.start(run, key, step, number, lasts))]
        if step.duration is not None and at + step.duration < run.length:
            out.append((at + step.duration, next(order), number, f"{self.describe()} ends", lambda: run.undo(key)))
        return out

    def start(self, run, key, step, number: int, seconds: float) -> tuple[float, bool]:
        captures = run.parts.captures
        folder = run.folder / "captures" / f"point{run.point}-step{number}-{self.link[0]}-{self.link[1]}"
        made = captures.start(*self.link, seconds, self.max_bytes, self.snaplen, folder=folder)

        def end() -> float:
            made.stop("duration")
            made.wait(15)
            return now()

        run.later(key, step, end)  # the point's end stops it too
        return now(), False
