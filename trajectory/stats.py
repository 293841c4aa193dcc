"""Statistics for success rates, pure and dependency-free. Every comparison reports one
procedure: an interval and the p-value of the test it inverts, so the interval excludes 0
exactly when p < 0.05. Experiments compare two configurations task by task (`paired_test`:
the exact McNemar test and its inverted interval); a what-if compares two independent arms
(`mn_diff`: the Miettinen-Nurminen score interval and test, continuity-corrected); what-ifs
over many episodes pool stratified by episode (`mn_stratified`: the stratified score interval
and its test, the Cochran-Mantel-Haenszel test; both in `trajectory.score_intervals`). Wilson intervals for single rates; Newcombe,
Tango, Fisher and Sato's Mantel-Haenszel interval are kept for comparison. Small what-if arms
use the exact unconditional procedure of `trajectory.exact2x2` (`exact2x2.two_arm`). Exact tails come
from the regularized incomplete beta (scipy.stats.binom, log space): at most a second at 10^6
pairs or 10^5 strata (benchmarks/stats_simulation.py --timings). An interval always contains
its observed value exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from scipy.special import gammaln
from scipy.stats import beta as beta_dist
from scipy.stats import binom

Z95 = 1.959963984540054


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs: b tasks only A solved,
    c tasks only B solved. Under H0 each discordant pair is a fair coin. The tail is the
    regularized incomplete beta (scipy.stats.binom.cdf): microseconds at 10^6 pairs."""
    if b < 0 or c < 0:
        raise ValueError("counts must be non-negative")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * float(binom.cdf(min(b, c), n, 0.5)))


def mcnemar_midp(b: int, c: int) -> float:
    """Two-sided mid-p McNemar test (Fagerland, Lydersen and Laake 2013): the exact p minus
    the probability of the observed split, i.e. 2 [P(X < k) + P(X = k) / 2] with k = min(b, c).
    Less conservative than the exact test but not bounded by 0.05 (2/32 with 5 discordant
    pairs), so `compare` reports the exact test; kept for the simulation."""
    if b < 0 or c < 0:
        raise ValueError("counts must be non-negative")
    n, k = b + c, min(b, c)
    if b == c:  # the observed split is the middle: p = 1 exactly
        return 1.0
    below = float(binom.cdf(k - 1, n, 0.5)) if k else 0.0
    return min(1.0, 2 * below + float(binom.pmf(k, n, 0.5)))


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
    probability of tables with the same margins that are no more likely than this one.
    Hypergeometric probabilities in log space (vectorised) with R's relative tolerance 1e-7,
    so 10^6 tables take milliseconds."""
    if min(a, b, c, d) < 0:
        raise ValueError("counts must be non-negative")
    row1, col1, n = a + b, a + c, a + b + c + d
    if n == 0:
        return 1.0
    lo, hi = max(0, col1 - (n - row1)), min(row1, col1)
    x = np.arange(lo, hi + 1, dtype=float)
    logs = (
        gammaln(row1 + 1)
        - gammaln(x + 1)
        - gammaln(row1 - x + 1)
        + gammaln(n - row1 + 1)
        - gammaln(col1 - x + 1)
        - gammaln(n - row1 - col1 + x + 1)
    )
    dens = np.exp(logs - logs.max())
    observed = dens[a - lo] * (1 + 1e-7)
    return min(1.0, math.fsum(dens[dens <= observed]) / math.fsum(dens))


def _normal_sf2(z: float) -> float:
    """Two-sided normal tail probability P(|Z| >= z)."""
    return math.erfc(abs(z) / math.sqrt(2))


def _paired_square_and_add(
    a: int, b: int, c: int, d: int, z: float, interval: Callable[[int, int, float], tuple[float, float]]
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
    cross: float = a * d - b * c
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
    p_value: float | None  # None when no stratum has both arms
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
        return Stratified(None, None, 0.0, None, 0)
    dev = abs(obs - exp) - (0.5 if correct else 0.0)
    chi2 = max(0.0, dev) ** 2 / var if var > 0 else 0.0
    p = _normal_sf2(math.sqrt(chi2)) if var > 0 else 1.0
    effect = num / w
    v = (effect * sp + sq) / (w * w)
    half = z * math.sqrt(max(0.0, v))
    ci = (max(-1.0, min(effect, effect - half)), min(1.0, max(effect, effect + half)))
    return Stratified(effect, ci, chi2, min(1.0, p), used)


# ------------------------------------------------- one procedure: a test and its interval
#
# Each comparison reports an interval and the p-value of the test it inverts, so "the
# interval excludes 0" and "p < 0.05" never disagree (benchmarks/stats_simulation.py
# measures their size and coverage).

ALPHA = 0.05  # the level every reported 95% interval inverts


def _root(f: Callable[[float], float], lo: float, hi: float, tol: float = 1e-12) -> float:
    """The root of a monotone function with f(lo) and f(hi) of opposite signs: regula falsi
    with the Illinois step (a dozen evaluations, not 60), bisecting where f is infinite."""
    flo, fhi, side = f(lo), f(hi), 0
    for i in range(200):
        if hi - lo <= tol:
            break
        finite = math.isfinite(flo) and math.isfinite(fhi) and flo != fhi
        x = lo - flo * (hi - lo) / (fhi - flo) if finite else (lo + hi) / 2
        if not lo < x < hi:
            x = (lo + hi) / 2
        fx = f(x)
        if fx == 0:
            return x
        if (fx < 0) == (flo < 0):
            lo, flo = x, fx
            fhi, side = (fhi / 2, 1) if side == 1 else (fhi, 1)
        else:
            hi, fhi = x, fx
            flo, side = (flo / 2, -1) if side == -1 else (flo, -1)
        if abs(hi - lo) > tol and side and i % 8 == 7:  # guard against slow one-sided creeping
            mid = (lo + hi) / 2
            fm = f(mid)
            if (fm < 0) == (flo < 0):
                lo, flo = mid, fm
            else:
                hi, fhi = mid, fm
    return (lo + hi) / 2


def _binom_upper(k: int, n: int, p: float, mid: bool) -> float:
    """P(X > k) + w P(X = k) for X ~ Binomial(n, p), w = 1/2 (mid-p) or 1 (exact): the
    regularized incomplete beta through scipy, constant time at any n."""
    w = 0.5 if mid else 1.0
    if p <= 0.0:
        return 0.0 if k > 0 else w
    if p >= 1.0:
        return 1.0 if k < n else w
    return float(binom.sf(k, n, p)) + w * float(binom.pmf(k, n, p))


@lru_cache(maxsize=65536)
def binomial_ci(k: int, n: int, mid: bool = False, alpha: float = ALPHA) -> tuple[float, float]:
    """Exact (Clopper-Pearson) or mid-p (Berry and Armitage 1995) interval of a binomial
    proportion: the p whose one-sided tails are not below alpha/2, i.e. the inversion of the
    two-sided exact (or mid-p) binomial test that doubles the smaller tail."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n == 0:
        return 0.0, 1.0
    if not mid:  # Clopper-Pearson in closed form: quantiles of the beta distribution
        lower = 0.0 if k == 0 else float(beta_dist.ppf(alpha / 2, k, n - k + 1))
        upper = 1.0 if k == n else float(beta_dist.isf(alpha / 2, k + 1, n - k))
        return min(lower, k / n), max(upper, k / n)
    lower = 0.0 if k == 0 else _root(lambda p: _binom_upper(k, n, p, mid) - alpha / 2, 0.0, k / n)
    upper = 1.0 if k == n else _root(lambda p: _binom_upper(n - k, n, 1 - p, mid) - alpha / 2, k / n, 1.0)
    return lower, upper


@dataclass(frozen=True)
class Comparison:
    """A difference with its 95% interval and the p-value of the test the interval inverts
    (None when nothing was compared), and the name of that procedure."""

    diff: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    method: str
    p_better: float | None = None  # one-sided: arm 1 better (the interval's lower end inverts it at 0.025)
    p_worse: float | None = None  # one-sided: arm 1 worse (the upper end)


METHOD_PAIRED = (
    "exact McNemar test; its inverted interval (Clopper-Pearson interval of the discordant "
    "split, scaled by the Wilson interval of the discordant share)"
)
METHOD_PAIRED_MIDP = (
    "mid-p McNemar test; its inverted interval (mid-p interval of the discordant "
    "split, scaled by the Wilson interval of the discordant share)"
)


def paired_test(b: int, c: int, n: int, *, mid: bool = False) -> Comparison:
    """Paired difference p_A - p_B = psi (2 theta - 1) from b (only A), c (only B) of n pairs,
    psi the share of discordant pairs and theta the share of them A wins. The test is
    McNemar's test of theta = 1/2 (exact, or mid-p); the interval scales theta's interval that
    inverts that test by psi's Wilson interval at whichever end widens it, so it excludes 0
    exactly when p < 0.05 and still carries the uncertainty of psi. Exact by default: the
    mid-p test exceeds its size (0.0625 with 5 discordant pairs; docs/experiments.md)."""
    if b < 0 or c < 0 or b + c > n:
        raise ValueError("need 0 <= b, c and b + c <= n")
    method = METHOD_PAIRED_MIDP if mid else METHOD_PAIRED
    if n == 0:
        return Comparison(None, None, None, method)
    m = b + c
    p = mcnemar_midp(b, c) if mid else mcnemar_exact(b, c)
    t_lo, t_hi = binomial_ci(b, m, mid)
    g_lo, g_hi = 2 * t_lo - 1, 2 * t_hi - 1
    # the inversion and the integer p agree up to bisection rounding: let the exact p decide
    if p < ALPHA:
        g_lo, g_hi = (max(g_lo, 1e-12), g_hi) if b > c else (g_lo, min(g_hi, -1e-12))
    else:
        g_lo, g_hi = min(g_lo, 0.0), max(g_hi, 0.0)
    s_lo, s_hi = wilson(m, n)
    lower = g_lo * (s_lo if g_lo >= 0 else s_hi)
    upper = g_hi * (s_hi if g_hi >= 0 else s_lo)
    d = (b - c) / n
    return Comparison(d, (max(-1.0, min(d, lower)), min(1.0, max(d, upper))), p, method)
