"""Multiple-comparison adjustments of p-values: Holm's step-down (family-wise error, for the
candidates of one failure and compare's per-type tests) and Benjamini-Hochberg (false
discovery rate, for every candidate of an experiment-wide suggest)."""

from __future__ import annotations

from typing import Sequence

HOLM = "Holm"
BH = "Benjamini-Hochberg"


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's (1979) adjusted p-values: the i-th smallest of m times (m - i + 1), made
    monotone; None (nothing tested) stays None and does not count in m."""
    tested = {i: p for i, p in enumerate(ps) if p is not None}
    idx = sorted(tested, key=tested.__getitem__)
    m, out, run = len(idx), list(ps), 0.0
    for rank, i in enumerate(idx):
        run = max(run, min(1.0, (m - rank) * tested[i]))
        out[i] = run
    return out


def benjamini_hochberg(ps: Sequence[float | None]) -> list[float | None]:
    """Benjamini and Hochberg's (1995) adjusted p-values (q-values of the step-up rule): the
    i-th smallest of m times m / i, made monotone from the largest down; None stays None."""
    tested = {i: p for i, p in enumerate(ps) if p is not None}
    idx = sorted(tested, key=tested.__getitem__)
    m, out, run = len(idx), list(ps), 1.0
    for rank in range(m - 1, -1, -1):
        i = idx[rank]
        run = min(run, tested[i] * m / (rank + 1))
        out[i] = min(1.0, run)
    return out
