"""Exact unconditional comparison of two independent proportions for small arms: Boschloo's
test, the interval that inverts it, its power and the smallest effect it detects.

The test is Boschloo's (1970, Statistica Neerlandica 24:19): tables are ordered by Fisher's
one-sided p-value and the p-value is the largest probability of the tables at least as
extreme over the nuisance rate (`scipy.stats.boschloo_exact`, two-sided = twice the smaller
one-sided p). The interval is the tail-method inversion of the two one-sided exact
unconditional tests of H0: p1 - p2 = delta at 2.5% each, the construction of Chan and Zhang
(1999, Biometrics 55:1202) with Boschloo's ordering in place of their score statistic (the
ordering does not depend on delta, and it satisfies Barnard's convexity, so the tail is
monotone in delta); tables Fisher's p ties are ordered by the observed difference. The p
reported is scipy's Boschloo p, and it decides the side of 0 (the tie-break only shrinks
the regions), so the interval excludes 0 exactly when the two-sided p is below 0.05.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from scipy.special import gammaln, xlog1py, xlogy
from scipy.stats import boschloo_exact, hypergeom

from trajectory.score_intervals import mn_diff
from trajectory.stats import Comparison

GRID = 129  # nuisance rates sampled on the line p1 - p2 = delta (then refined at the best)
TIE = 1 + 1e-13  # scipy's tolerance for tables as extreme as the observed one


@lru_cache(maxsize=256)
def _order(n1: int, n2: int, greater: bool) -> np.ndarray:
    """Fisher's one-sided p of every table [x1, x2] (x1 of n1 in arm 1, x2 of n2 in arm 2):
    small when arm 1 is better (`greater`) or worse; scipy's boschloo_exact ordering."""
    x1 = np.arange(n1 + 1).reshape(-1, 1)
    x2 = np.arange(n2 + 1).reshape(1, -1)
    total = n1 + n2
    if greater:
        return hypergeom.cdf(x2, total, x1 + x2, n2)
    return hypergeom.cdf(x1, total, x1 + x2, n1)


@lru_cache(maxsize=256)
def _rank(n1: int, n2: int, greater: bool) -> np.ndarray:
    """Each table's place in the ordering, most extreme first (equal places: ties): Fisher's
    one-sided p, ties broken by the observed difference (Fisher's p is 1 for every table
    with x2 = n2, which would leave 9/10 vs 10/10 a lower bound of -1)."""
    f = _order(n1, n2, greater)
    diff = np.arange(n1 + 1)[:, None] / n1 - np.arange(n2 + 1)[None, :] / n2
    key1 = np.round(np.log(np.maximum(f, 1e-300)), 9)
    key2 = np.round(-diff if greater else diff, 12)
    keys = np.rec.fromarrays([key1.ravel(), key2.ravel()])
    _, inverse = np.unique(keys, return_inverse=True)
    return inverse.reshape(n1 + 1, n2 + 1)


def _region(x1: int, n1: int, x2: int, n2: int, greater: bool) -> np.ndarray:
    """The tables at least as extreme as [x1, x2] in Boschloo's ordering."""
    r = _rank(n1, n2, greater)
    return (r <= r[x1, x2]).astype(float)


def _pmf(n: int, p: np.ndarray | Sequence[float]) -> np.ndarray:
    """Binomial(n, p) probabilities of 0..n for each rate p (rows), in log space."""
    k = np.arange(n + 1)
    logc = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    p = np.asarray(p, dtype=float)[:, None]
    return np.exp(logc[None, :] + xlogy(k[None, :], p) + xlog1py((n - k)[None, :], -p))


def _tail(region: np.ndarray, n1: int, n2: int, delta: float, p2: np.ndarray) -> np.ndarray:
    """P(table in region) at p1 = p2 + delta, for each nuisance rate p2."""
    p1 = np.clip(p2 + delta, 0.0, 1.0)
    return np.einsum("gi,ij,gj->g", _pmf(n1, p1), region, _pmf(n2, p2))


def _sup_tail(region: np.ndarray, n1: int, n2: int, delta: float) -> float:
    """The largest tail probability over the nuisance rate on p1 - p2 = delta: a grid, then
    two finer grids around its best point (the tail is smooth in the rate)."""
    lo, hi = max(0.0, -delta), min(1.0, 1.0 - delta)
    if hi <= lo:
        return float(_tail(region, n1, n2, delta, np.array([lo]))[0])
    grid, best = np.linspace(lo, hi, GRID), 0.0
    for _ in range(3):
        vals = _tail(region, n1, n2, delta, grid)
        i = int(np.argmax(vals))
        best = max(best, float(vals[i]))
        a, b = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
        grid = np.linspace(a, b, 33)
    return min(1.0, best)


def one_sided_p(x1: int, n1: int, x2: int, n2: int, delta: float, greater: bool) -> float:
    """The exact unconditional p of H0: p1 - p2 <= delta (`greater`) or >= delta, Boschloo's
    ordering: at delta = 0 scipy's one-sided Boschloo p."""
    return _sup_tail(_region(x1, n1, x2, n2, greater), n1, n2, delta)


def _bisect(f: Callable[[float], bool], lo: float, hi: float, iters: int = 36) -> float:
    """The boundary between f false (at lo) and f true (at hi), to about 1e-13."""
    for _ in range(iters):
        mid = (lo + hi) / 2
        if f(mid):
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


@lru_cache(maxsize=4096)
def boschloo(x1: int, n1: int, x2: int, n2: int, alpha: float = 0.05) -> tuple[float, float, float, float, float]:
    """(two-sided p, p that arm 1 is better, p that it is worse, lower, upper) for p1 - p2:
    Boschloo's test (scipy) and the interval that inverts it (see the module)."""
    table = [[x1, x2], [n1 - x1, n2 - x2]]
    p_better = float(boschloo_exact(table, alternative="greater").pvalue)
    p_worse = float(boschloo_exact(table, alternative="less").pvalue)
    p_two = min(1.0, 2 * min(p_better, p_worse))
    est = x1 / n1 - x2 / n2
    half = alpha / 2
    rg, rl = _region(x1, n1, x2, n2, True), _region(x1, n1, x2, n2, False)
    # lower: the smallest delta the "better" test does not reject (its tail grows with delta)
    if _sup_tail(rg, n1, n2, -1.0 + 1e-15) > half:
        lower = -1.0
    else:
        lower = _bisect(lambda d: _sup_tail(rg, n1, n2, d) > half, -1.0, est)
    if _sup_tail(rl, n1, n2, 1.0 - 1e-15) > half:
        upper = 1.0
    else:
        upper = _bisect(lambda d: not _sup_tail(rl, n1, n2, d) > half, est, 1.0)
    # the test at 0 decides the side of 0 (the nuisance search aside, they agree)
    if p_better < half:
        lower = max(lower, 1e-12)
    elif p_worse < half:
        upper = min(upper, -1e-12)
    else:
        lower, upper = min(lower, 0.0), max(upper, 0.0)
    return p_two, p_better, p_worse, min(est, lower), max(est, upper)


EXACT_MAX_ARM = 50  # what-if arms up to this size use the exact unconditional procedure
METHOD_EXACT = (
    "Boschloo's exact unconditional test and the interval that inverts it (Chan-Zhang tail method, Boschloo ordering)"
)


@lru_cache(maxsize=4096)
def two_arm(k1: int, n1: int, k2: int, n2: int) -> Comparison:
    """A what-if's two independent arms, p1 - p2, as one procedure whose interval excludes 0
    exactly when its p < 0.05: Boschloo's exact unconditional test and its inverted interval
    (`trajectory.exact2x2`) while both arms have at most EXACT_MAX_ARM rollouts (at 10 per
    arm: size 0.04, power 0.66 for 10% -> 60%, where the score test had 0.47), else the
    continuity-corrected Miettinen-Nurminen score interval and test (`mn_diff`). The
    one-sided p-values come with it: "proven better" reads `p_better`."""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError("need 0 <= k <= n in both arms")
    if not (n1 and n2) or max(n1, n2) > EXACT_MAX_ARM:
        return mn_diff(k1, n1, k2, n2)
    p, p_better, p_worse, lo, hi = boschloo(k1, n1, k2, n2)
    return Comparison(k1 / n1 - k2 / n2, (max(-1.0, lo), min(1.0, hi)), p, METHOD_EXACT, p_better, p_worse)


# ------------------------------------------------------------- every table at once


def _tables_p(n1: int, n2: int, delta: float, greater: bool, grid: int = 1001) -> np.ndarray:
    """The one-sided p at delta of every table [x1, x2] (grid search of the nuisance rate
    only: for power, size and coverage, not for a reported p)."""
    rank = _rank(n1, n2, greater).ravel()
    order = np.argsort(rank, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(rank[order]) != 0])
    lo, hi = max(0.0, -delta), min(1.0, 1.0 - delta)
    p2 = np.linspace(lo, hi, grid) if hi > lo else np.array([lo])
    p1 = np.clip(p2 + delta, 0, 1)
    b1, b2 = _pmf(n1, p1), _pmf(n2, p2)
    prob = (b1[:, :, None] * b2[:, None, :]).reshape(len(p2), -1)[:, order]
    cum = np.cumsum(np.add.reduceat(prob, starts, axis=1), axis=1).max(axis=0)  # by place in the ordering
    return np.minimum(1.0, cum[rank]).reshape(n1 + 1, n2 + 1)


def tables_two_sided(n1: int, n2: int, delta: float = 0.0) -> np.ndarray:
    """Twice the smaller one-sided p at delta of every table: the table is outside the
    interval of its procedure (delta not covered) exactly where this is below alpha."""
    return np.minimum(1.0, 2 * np.minimum(_tables_p(n1, n2, delta, True), _tables_p(n1, n2, delta, False)))


def rejection(n1: int, n2: int, alpha_one: float) -> np.ndarray:
    """Tables whose one-sided "arm 1 is better" p at 0 is below alpha_one."""
    return _tables_p(n1, n2, 0.0, True) < alpha_one


def power(n1: int, n2: int, p1: float, p2: float, alpha_one: float = 0.025, reject: np.ndarray | None = None) -> float:
    """The chance the one-sided test at alpha_one proves arm 1 better when its rate is p1."""
    r = rejection(n1, n2, alpha_one) if reject is None else reject
    return float(_pmf(n1, [p1])[0] @ r @ _pmf(n2, [p2])[0])


def _score_power(n1: int, n2: int, p1: float, p2: float, alpha_one: float) -> float:
    """Normal approximation of the continuity-corrected score test's one-sided power."""
    from statistics import NormalDist

    nd = NormalDist()
    pbar = (n1 * p1 + n2 * p2) / (n1 + n2)
    null_sd = math.sqrt(max(pbar * (1 - pbar) * (1 / n1 + 1 / n2), 1e-300))
    alt_sd = math.sqrt(max(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2, 1e-300))
    cc = 0.5 * (1 / n1 + 1 / n2)
    return nd.cdf((p1 - p2 - cc - nd.inv_cdf(1 - alpha_one) * null_sd) / alt_sd)


def min_detectable_effect(
    p_control: float,
    n_treatment: int,
    n_control: int,
    *,
    alpha_one: float = 0.025,
    target: float = 0.8,
    exact_max: int = 50,
) -> float | None:
    """The smallest rise over the control's rate that the what-if's one-sided test at
    alpha_one proves with probability `target` (exact power of Boschloo's test for arms up to
    `exact_max`, the score test's normal approximation beyond); None when even a treatment
    that always succeeds is proven less often than that."""
    exact = max(n_treatment, n_control) <= exact_max
    reject = rejection(n_treatment, n_control, alpha_one) if exact else None

    def pw(p1: float) -> float:
        if exact:
            return power(n_treatment, n_control, p1, p_control, alpha_one, reject)
        return _score_power(n_treatment, n_control, p1, p_control, alpha_one)

    if p_control >= 1.0 or pw(1.0) < target:
        return None
    lo, hi = p_control, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if pw(mid) >= target else (mid, hi)
    return hi - p_control
