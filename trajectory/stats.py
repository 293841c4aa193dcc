"""Statistics for success rates, pure and dependency-free: experiments compare two
configurations task by task (exact McNemar with Newcombe's continuity-corrected paired
score interval, his method 11; method 10 and Tango's score interval on request); rollout
groups report a rate with its interval (Wilson) and the effect of an edit (Newcombe,
Fisher); what-ifs over many episodes pool stratified by episode (Cochran-Mantel-Haenszel
test, Mantel-Haenszel risk difference with Sato's variance).
Exact where it is cheap; an interval always contains its observed value exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass
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
    # At 0 and n successes the bound equals the observed value in exact arithmetic; say so
    # exactly instead of printing rounding noise such as 5.6e-17.
    lower = 0.0 if k == 0 else max(0.0, min(p, centre - half))
    upper = 1.0 if k == n else min(1.0, max(p, centre + half))
    return lower, upper


def wilson_cc(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval with continuity correction (Newcombe 1998, Stat Med 17:857,
    method 4): the roots of |p - pi| - 1/(2n) = z sqrt(pi (1 - pi) / n), in closed form.
    Bounds are exact at 0 and n successes, and the interval always contains k/n."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n == 0:
        return 0.0, 1.0
    p, z2 = k / n, z * z
    denom = 2 * (n + z2)
    lower, upper = 0.0, 1.0
    if k > 0:
        root = math.sqrt(max(0.0, z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))
        lower = max(0.0, min(p, (2 * n * p + z2 - 1 - z * root) / denom))
    if k < n:
        root = math.sqrt(max(0.0, z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))
        upper = min(1.0, max(p, (2 * n * p + z2 + 1 + z * root) / denom))
    return lower, upper


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


def _normal_sf2(z: float) -> float:
    """Two-sided normal tail probability P(|Z| >= z)."""
    return math.erfc(abs(z) / math.sqrt(2))


def _paired_square_and_add(
    a: int, b: int, c: int, d: int, z: float, interval
) -> tuple[float, float]:
    """Newcombe's square-and-add for paired proportions (his methods 8-11): the two marginal
    intervals combined with the phi correlation of the pairs, a positive correlation shrunk
    by n/2 (to 0 at most) and a negative one kept (his phi*, methods 10 and 11)."""
    if min(a, b, c, d) < 0:
        raise ValueError("counts must be non-negative")
    n = a + b + c + d
    if n == 0:
        return -1.0, 1.0
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = interval(a + b, n, z)
    l2, u2 = interval(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if cross > 0:
        cross = max(0.0, cross - n / 2)
    phi = cross / math.sqrt(margins) if margins else 0.0
    diff = (b - c) / n
    dl1, du1, dl2, du2 = p1 - l1, u1 - p1, p2 - l2, u2 - p2
    lower = diff - math.sqrt(max(0.0, dl1 * dl1 - 2 * phi * dl1 * du2 + du2 * du2))
    upper = diff + math.sqrt(max(0.0, du1 * du1 - 2 * phi * du1 * dl2 + dl2 * dl2))
    return max(-1.0, min(diff, lower)), min(1.0, max(diff, upper))


def newcombe_paired_diff(a: int, b: int, c: int, d: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's paired score interval (his method 10, Stat Med 1998;17:2635) for
    p1 - p2 of correlated proportions: a = both succeed, b = only 1, c = only 2, d = neither.
    Built from the two Wilson intervals and the phi correlation of the pairs."""
    return _paired_square_and_add(a, b, c, d, z, wilson)


def newcombe_paired_cc_diff(a: int, b: int, c: int, d: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's paired score interval with continuity correction (his method 11, Stat Med
    1998;17:2635): method 10 built on the continuity-corrected Wilson intervals
    (`wilson_cc`). Wider than method 10 by about the correction, which keeps its verdict
    "excludes 0" in step with the exact McNemar test at small n."""
    return _paired_square_and_add(a, b, c, d, z, wilson_cc)


def _tango_z(b: int, c: int, n: int, delta: float) -> float:
    """Tango's score statistic for H0: p1 - p2 = delta (restricted ML of p21)."""
    big_a, big_b, big_c = 2 * n, -b - c + (2 * n - b + c) * delta, -c * delta * (1 - delta)
    q21 = (math.sqrt(max(0.0, big_b * big_b - 4 * big_a * big_c)) - big_b) / (2 * big_a)
    var = n * (2 * q21 + delta * (1 - delta))
    num = b - c - n * delta
    if var <= 0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


def tango_diff(b: int, c: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Tango's score interval (Stat Med 1998;17:891) for p1 - p2 of paired proportions from
    the discordant counts b (only 1 succeeds) and c (only 2) among n pairs: the deltas whose
    score test is not rejected, found by bisection (the statistic decreases in delta)."""
    if b < 0 or c < 0 or b + c > n:
        raise ValueError("need 0 <= b, c and b + c <= n")
    if n == 0:
        return -1.0, 1.0
    diff = (b - c) / n

    def root(lo: float, hi: float, target: float) -> float:
        for _ in range(100):
            mid = (lo + hi) / 2
            if _tango_z(b, c, n, mid) > target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = -1.0 if _tango_z(b, c, n, -1.0) <= z else root(-1.0, diff, z)
    upper = 1.0 if _tango_z(b, c, n, 1.0) >= -z else root(diff, 1.0, -z)
    return min(diff, lower), max(diff, upper)


@dataclass(frozen=True)
class Stratified:
    """Two arms pooled over strata: the Mantel-Haenszel risk difference (arm 1 - arm 2), its
    interval from Sato's variance, and the Cochran-Mantel-Haenszel test of no association."""

    effect: float | None
    ci95: tuple[float, float] | None
    chi2: float
    p_value: float
    strata: int  # strata that carry information (both arms non-empty)


METHOD_CMH = "Cochran-Mantel-Haenszel test stratified by episode; Mantel-Haenszel risk difference (Sato variance)"


def cmh(tables: Sequence[tuple[int, int, int, int]], *, correct: bool = False, z: float = Z95) -> Stratified:
    """Pool 2x2 tables (k1 successes of n1 in arm 1, k2 of n2 in arm 2), one per stratum.
    The test is Cochran-Mantel-Haenszel (continuity-corrected when `correct`, as R's
    mantelhaen.test default); the effect is the Mantel-Haenszel common risk difference with
    Sato's (1989) variance, the estimator SAS PROC FREQ reports as COMMONRISKDIFF."""
    obs = exp = var = w = num = sp = sq = 0.0
    used = 0
    for k1, n1, k2, n2 in tables:
        if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
            raise ValueError("need 0 <= k <= n in every stratum")
        t = n1 + n2
        if n1 == 0 or n2 == 0:
            continue
        used += 1
        m1 = k1 + k2
        obs, exp = obs + k1, exp + n1 * m1 / t
        if t > 1:
            var += n1 * n2 * m1 * (t - m1) / (t * t * (t - 1))
        w += n1 * n2 / t
        num += (k1 * n2 - k2 * n1) / t
        sp += (n1 * n1 * k2 - n2 * n2 * k1 + n1 * n2 * (n2 - n1) / 2) / (t * t)
        sq += (k1 * (n2 - k2) + k2 * (n1 - k1)) / (2 * t)
    if not used:
        return Stratified(None, None, 0.0, 1.0, 0)
    dev = abs(obs - exp) - (0.5 if correct else 0.0)
    chi2 = max(0.0, dev) ** 2 / var if var > 0 else 0.0
    p = _normal_sf2(math.sqrt(chi2)) if var > 0 else 1.0
    effect = num / w
    v = (effect * sp + sq) / (w * w)
    half = z * math.sqrt(max(0.0, v))
    ci = (max(-1.0, min(effect, effect - half)), min(1.0, max(effect, effect + half)))
    return Stratified(effect, ci, chi2, min(1.0, p), used)
