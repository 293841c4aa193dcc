"""Statistics for success rates, pure and dependency-free: experiments compare two
configurations task by task (McNemar, paired bootstrap); rollout groups report a rate with
its interval (Wilson) and the effect of an edit (Newcombe, Fisher). Exact where it is cheap."""

from __future__ import annotations

import math
import random
from typing import Sequence

Z95 = 1.959963984540054


def _binom_pmf(k: int, n: int, p: float = 0.5) -> float:
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs: b tasks only A solved,
    c tasks only B solved. Under H0 each discordant pair is a fair coin."""
    if b < 0 or c < 0:
        raise ValueError("counts must be non-negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(_binom_pmf(k, n) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n (no continuity correction)."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_diff(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) for p1 - p2 of two independent
    proportions, built from the two Wilson intervals."""
    p1, p2 = (k1 / n1 if n1 else 0.0), (k2 / n2 if n2 else 0.0)
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    d = p1 - p2
    lower = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    upper = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, lower), min(1.0, upper)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher exact p-value of the 2x2 table [[a, b], [c, d]]: the total
    probability of tables with the same margins that are no more likely than this one."""
    if min(a, b, c, d) < 0:
        raise ValueError("counts must be non-negative")
    row1, col1, n = a + b, a + c, a + b + c + d
    if n == 0:
        return 1.0
    denom = math.comb(n, col1)

    def prob(x: int) -> float:
        return math.comb(row1, x) * math.comb(n - row1, col1 - x) / denom

    observed = prob(a)
    lo, hi = max(0, col1 - (n - row1)), min(row1, col1)
    total = sum(p for x in range(lo, hi + 1) if (p := prob(x)) <= observed * (1 + 1e-7))
    return min(1.0, total)


def bootstrap_diff_ci(
    a: Sequence[bool], b: Sequence[bool], *, level: float = 0.95, n_boot: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b) over paired outcomes (the same
    tasks in the same order), resampling tasks with replacement. Seeded: reproducible."""
    if len(a) != len(b):
        raise ValueError("paired outcomes need the same length")
    n = len(a)
    if n == 0:
        return 0.0, 0.0
    diffs = [int(x) - int(y) for x, y in zip(a, b)]
    rng = random.Random(seed)
    stats = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(n_boot))
    alpha = (1 - level) / 2
    lo = stats[int(math.floor(alpha * (n_boot - 1)))]
    hi = stats[int(math.ceil((1 - alpha) * (n_boot - 1)))]
    return lo, hi
