"""The one percentile of the lab (nearest rank on the sorted values), for lag figures, ping and the
benchmarks alike. Standard library only: the kernel suite's guest imports it too."""

from __future__ import annotations


def percentile(values, p: float) -> float | None:
    if not len(values):
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
