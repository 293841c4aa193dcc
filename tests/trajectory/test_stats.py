"""trajectory/stats.py against textbook values."""

from __future__ import annotations

import pytest

from trajectory import score_intervals, stats


def test_mcnemar_exact_small_counts():
    # b=1, c=8: p = 2 * (C(9,0) + C(9,1)) / 2^9 = 20/512
    assert stats.mcnemar_exact(1, 8) == pytest.approx(20 / 512)
    assert stats.mcnemar_exact(8, 1) == pytest.approx(20 / 512)
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(5, 5) == 1.0  # capped at 1
    # b=0, c=6: 2 / 64
    assert stats.mcnemar_exact(0, 6) == pytest.approx(0.03125)


def test_wilson_matches_newcombe_1998():
    # Newcombe (1998), Stat Med 17:857, Table I: 81/263 -> 0.2553 to 0.3662
    lo, hi = stats.wilson(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2553, 0.3662)
    # 15/148 -> 0.0624 to 0.1605; 0/20 -> 0 to 0.1611
    assert tuple(round(x, 4) for x in stats.wilson(15, 148)) == (0.0624, 0.1605)
    assert tuple(round(x, 4) for x in stats.wilson(0, 20)) == (0.0, 0.1611)


def test_newcombe_difference_method_10():
    # Newcombe (1998b), Stat Med 17:873, example (a): 56/70 - 48/80 -> +0.0524 to +0.3339
    lo, hi = stats.newcombe_diff(56, 70, 48, 80)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)
    # example (e): 5/56 - 0/29 -> -0.0381 to +0.1926
    lo, hi = stats.newcombe_diff(5, 56, 0, 29)
    assert (round(lo, 4), round(hi, 4)) == (-0.0381, 0.1926)


def test_fisher_exact_lady_tasting_tea():
    # Fisher's tea-tasting table [[3, 1], [1, 3]]: two-sided p = 34/70
    assert stats.fisher_exact(3, 1, 1, 3) == pytest.approx(34 / 70)
    assert stats.fisher_exact(4, 0, 0, 4) == pytest.approx(2 / 70)
    # scipy.stats.fisher_exact([[8, 2], [1, 5]]) -> 0.03496503...
    assert stats.fisher_exact(8, 2, 1, 5) == pytest.approx(0.034965, abs=1e-6)


def test_bad_counts_are_refused():
    with pytest.raises(ValueError):
        stats.wilson(5, 3)
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 2)


# ------------------------------------------------------------------ exact endpoints


@pytest.mark.parametrize("n", [1, 3, 20, 263])
def test_wilson_endpoints_are_exact_at_zero_and_n(n):
    """An interval contains its observed proportion exactly: 0 successes -> lower bound 0.0
    (not 5.6e-17), n successes -> upper bound 1.0."""
    assert stats.wilson(0, n)[0] == 0.0
    assert stats.wilson(n, n)[1] == 1.0
    for k in range(0, n + 1, max(1, n // 7)):
        lo, hi = stats.wilson(k, n)
        assert lo <= k / n <= hi


# ------------------------------------------------------------------ paired differences


def test_newcombe_paired_method_10_published_examples():
    """Newcombe (1998), "Improved confidence intervals for the difference between binomial
    proportions based on paired data", Stat Med 17:2635, worked example a=20, b=12, c=2, d=16:
    method 10 gives +0.0562 to +0.3292. Fagerland, Lydersen & Laake (2014), Stat Methods Med
    Res 24:224, airway hyper-responsiveness (Bentur 2009) a=1, b=1, c=7, d=12: Newcombe's
    method 10 gives -0.507 to -0.026."""
    lo, hi = stats.newcombe_paired_diff(20, 12, 2, 16)
    assert (round(lo, 4), round(hi, 4)) == (0.0562, 0.3292)
    lo, hi = stats.newcombe_paired_diff(1, 1, 7, 12)
    assert (round(lo, 3), round(hi, 3)) == (-0.507, -0.026)


def test_tango_score_interval_published_examples():
    """Tango (1998), Stat Med 17:891, and the worked examples reproduced from it and its
    successors: Fagerland et al. (2014) Bentur data b=1, c=7, n=21 -> -0.517 to -0.026;
    Agresti & Min (2005), Stat Med 24:729, b=16, c=8, n=86 -> -0.020 to 0.207; Tango's
    one-discordant-pair case b=0, c=1, n=44 at 90% -> -0.096 to 0.037."""
    lo, hi = stats.tango_diff(1, 7, 21)
    assert (round(lo, 3), round(hi, 3)) == (-0.517, -0.026)
    lo, hi = stats.tango_diff(16, 8, 86)
    assert (round(lo, 3), round(hi, 3)) == (-0.020, 0.207)
    lo, hi = stats.tango_diff(0, 1, 44, z=1.6448536269514722)
    assert (round(lo, 3), round(hi, 3)) == (-0.096, 0.037)
    lo, hi = stats.tango_diff(9, 3, 32)
    assert (round(lo, 3), round(hi, 3)) == (-0.027, 0.390)


def test_paired_interval_tells_the_same_story_as_mcnemar():
    """4 tasks only A solved, 0 only B solved, 16 both failed: exact McNemar p = 0.125, so the
    interval must not exclude 0 (the percentile bootstrap gave about [0.05, 0.40]). When every
    pair agrees the interval is not the degenerate [0, 0]."""
    assert stats.mcnemar_exact(4, 0) == pytest.approx(0.125)
    lo, hi = stats.newcombe_paired_diff(0, 4, 0, 16)
    assert lo <= 0.0 < 0.2 < hi
    lo, hi = stats.newcombe_paired_diff(10, 0, 0, 10)
    assert lo < 0.0 < hi and hi - lo > 0.1


# ------------------------------------------------------------------ method 11 (continuity corrected)


def test_wilson_cc_matches_newcombe_1998_table_1():
    """Newcombe (1998), "Two-sided confidence intervals for the single proportion", Stat Med
    17:857, Table I, method 4 (score interval with continuity correction), as quoted by the
    tests of the R package ratesci (petelaud/ratesci, tests/testthat/test3.R, "Single
    proportion, Newcombe examples", wilsonci(cc = 0.5)): 15/148 -> 0.0598 to 0.1644,
    0/20 -> 0 to 0.2005, 1/29 -> 0.0018 to 0.1963."""
    assert tuple(round(x, 4) for x in stats.wilson_cc(15, 148)) == (0.0598, 0.1644)
    assert tuple(round(x, 4) for x in stats.wilson_cc(0, 20)) == (0.0, 0.2005)
    assert tuple(round(x, 4) for x in stats.wilson_cc(1, 29)) == (0.0018, 0.1963)


def _cc_root(k: int, n: int, upper: bool, z: float = stats.Z95) -> float:
    """The continuity-corrected score bound from its definition, by bisection: the pi on one
    side of k/n where |k/n - pi| - 1/(2n) = z sqrt(pi (1 - pi) / n) (an implementation
    independent of the closed form in trajectory/stats.py)."""
    p = k / n

    def gap(pi: float) -> float:
        return abs(p - pi) - 1 / (2 * n) - z * (pi * (1 - pi) / n) ** 0.5

    lo, hi = (p, 1.0) if upper else (0.0, p)
    if gap(hi if upper else lo) <= 0:
        return 1.0 if upper else 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if (gap(mid) > 0) == upper:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


@pytest.mark.parametrize("n", [1, 7, 20, 50, 148])
def test_wilson_cc_solves_its_defining_equation(n):
    for k in range(n + 1):
        lo, hi = stats.wilson_cc(k, n)
        assert lo == pytest.approx(_cc_root(k, n, upper=False), abs=1e-9)
        assert hi == pytest.approx(_cc_root(k, n, upper=True), abs=1e-9)
        w_lo, w_hi = stats.wilson(k, n)
        assert lo <= w_lo <= k / n <= w_hi <= hi  # the correction only widens
    assert stats.wilson_cc(0, n)[0] == 0.0 and stats.wilson_cc(n, n)[1] == 1.0


# The worked examples of Newcombe (1998), Stat Med 17:2635 (paired), as transcribed from the
# paper for method 10 by JoshSandhu/proofpack (fixtures/newcombe1998_paired.json) and by the
# R package propint's tests (ci.two.dep.props): (e, f, g, h) = (a, b, c, d) here.
NEWCOMBE_PAIRED_EXAMPLES = [
    (36, 12, 2, 0),
    (20, 12, 2, 16),
    (18, 12, 2, 18),
    (36, 14, 0, 0),
    (35, 14, 0, 1),
    (18, 14, 0, 18),
    (2, 97, 1, 0),
    (1, 97, 1, 1),
    (0, 29, 1, 0),
    (2, 98, 0, 0),
    (1, 98, 0, 1),
    (0, 30, 0, 0),
    (54, 0, 0, 0),
    (53, 0, 0, 1),
    (30, 0, 0, 24),
    (29, 0, 0, 25),
    (28, 0, 0, 26),
    (27, 0, 0, 27),
]


def _method_11_by_hand(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """Method 11 as the paper defines it, written out here: method 10 (square-and-add with
    phi*, the positive part of ad - bc shrunk by n/2) on the bisection roots above."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _cc_root(a + b, n, False), _cc_root(a + b, n, True)
    l2, u2 = _cc_root(a + c, n, False), _cc_root(a + c, n, True)
    num = a * d - b * c
    num = max(num - n / 2, 0) if num > 0 else num
    den = ((a + b) * (c + d) * (a + c) * (b + d)) ** 0.5
    phi = num / den if den else 0.0
    lo = (p1 - p2) - ((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2) ** 0.5
    hi = (p1 - p2) + ((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2) ** 0.5
    return max(-1.0, lo), min(1.0, hi)


@pytest.mark.parametrize("table", NEWCOMBE_PAIRED_EXAMPLES)
def test_newcombe_paired_method_11_on_the_papers_examples(table):
    """Newcombe (1998), Stat Med 17:2635, method 11 = method 10 on continuity-corrected Wilson
    intervals. The method 11 column of the paper's table of examples could not be found
    quoted in any test or document reachable here (only the method 10 column is), so the
    expected values are NOT published figures: they come from the independent derivation
    above (bisection on the defining equation, formula written from the paper's
    definition). Method 11 must also contain method 10, whose published values the test
    above checks."""
    lo, hi = stats.newcombe_paired_cc_diff(*table)
    e_lo, e_hi = _method_11_by_hand(*table)
    assert (lo, hi) == (pytest.approx(e_lo, abs=1e-9), pytest.approx(e_hi, abs=1e-9))
    m_lo, m_hi = stats.newcombe_paired_diff(*table)
    assert lo <= m_lo and m_hi <= hi
    a, b, c, d = table
    assert lo <= (b - c) / (a + b + c + d) <= hi


def test_newcombe_paired_method_11_computed_values():
    """Regression values computed with this implementation and agreed by the independent
    derivation above (not published): 20/12/2/16 -> +0.0460 to +0.3383 (method 10 published
    +0.0562 to +0.3292); the issue's 8/4/0/8 -> -0.0206 to +0.3873 (method 10: +0.0004)."""
    assert tuple(round(x, 4) for x in stats.newcombe_paired_cc_diff(20, 12, 2, 16)) == (0.046, 0.3383)
    assert tuple(round(x, 4) for x in stats.newcombe_paired_cc_diff(8, 4, 0, 8)) == (-0.0206, 0.3873)


def test_method_11_tells_the_same_story_as_mcnemar_on_the_issues_example():
    """4 tasks only A solved, 0 only B solved, 20 pairs: exact McNemar p = 0.125, so the
    interval must include 0 whatever the split of the other 16 into both/neither (method 10
    excludes 0 at 8/4/0/8, lower bound +0.0004)."""
    assert stats.mcnemar_exact(4, 0) == pytest.approx(0.125)
    assert stats.newcombe_paired_diff(8, 4, 0, 8)[0] > 0  # the issue: method 10 disagrees
    for both in range(17):
        lo, hi = stats.newcombe_paired_cc_diff(both, 4, 0, 16 - both)
        assert lo < 0.0 < 0.2 < hi, both


@pytest.mark.parametrize("n", [1, 2, 20, 50])
def test_method_11_is_not_degenerate_when_every_pair_agrees(n):
    """No discordant pair: exact p = 1, the interval straddles 0 and is never [0, 0]."""
    for both in range(n + 1):
        lo, hi = stats.newcombe_paired_cc_diff(both, 0, 0, n - both)
        assert lo < 0.0 < hi and (lo, hi) != (0.0, 0.0), both
        assert hi - lo > 0.05


def test_method_11_refuses_bad_counts_and_handles_no_pairs():
    with pytest.raises(ValueError):
        stats.newcombe_paired_cc_diff(-1, 0, 0, 0)
    with pytest.raises(ValueError):
        stats.wilson_cc(3, 2)
    assert stats.newcombe_paired_cc_diff(0, 0, 0, 0) == (-1.0, 1.0)


# ------------------------------------------------------------------ stratified pooling

RABBITS = [(0, 6, 0, 5), (3, 6, 0, 6), (6, 6, 2, 6), (5, 6, 6, 6), (2, 2, 5, 5)]


def test_cmh_matches_the_penicillin_rabbits_textbook_example():
    """Agresti, Categorical Data Analysis (penicillin and rabbits, 5 strata), the example of
    R's mantelhaen.test: Mantel-Haenszel X-squared = 3.9286 with continuity correction,
    p = 0.04747. Without the correction the statistic is (|15 - 10.73...| )^2 / V = 5.657."""
    r = stats.cmh(RABBITS, correct=True)
    assert round(r.chi2, 4) == 3.9286
    assert round(r.p_value, 5) == 0.04747
    plain = stats.cmh(RABBITS)
    assert plain.chi2 == pytest.approx(5.657142857, abs=1e-6)
    assert plain.strata == 5


def test_mantel_haenszel_risk_difference_and_sato_variance():
    """Mantel & Haenszel (1959) risk difference with Sato's (1989) variance (the formulas of
    SAS PROC FREQ COMMONRISKDIFF): on the rabbits data the estimate is
    sum((k1 n2 - k2 n1)/t) / sum(n1 n2/t); with one stratum it is the plain difference and
    Sato's variance reduces to the binomial p1(1-p1)/n1 + p2(1-p2)/n2."""
    r = stats.cmh(RABBITS)
    num = sum((k1 * n2 - k2 * n1) / (n1 + n2) for k1, n1, k2, n2 in RABBITS)
    w = sum(n1 * n2 / (n1 + n2) for _, n1, _, n2 in RABBITS)
    assert r.effect == pytest.approx(num / w)
    one = stats.cmh([(30, 40, 20, 40)])
    assert one.effect == pytest.approx(0.25)
    # W = 20, Q = (30*20 + 20*10)/160 = 5, P = (1600*20 - 1600*30)/6400 = -2.5:
    # (0.25 * -2.5 + 5) / 400 = 0.0109375 = 0.75*0.25/40 + 0.5*0.5/40
    half = stats.Z95 * 0.0109375**0.5
    assert one.ci95 == pytest.approx((0.25 - half, 0.25 + half))


def test_cmh_pools_within_episodes_not_across():
    """Episodes differ a lot (some easy, some hopeless) and the edit changes nothing inside
    any episode, but the arms got different numbers of rollouts per episode: summing the
    arms (the old pooled what-if) shows a huge effect with Fisher p < 1e-6; stratified by
    episode there is none."""
    tables = [(10, 10, 2, 2), (0, 2, 0, 10)] * 5  # treatment k/n, control k/n per episode
    r = stats.cmh(tables)
    assert r.effect == 0.0 and r.p_value == 1.0
    assert stats.fisher_exact(50, 10, 10, 50) < 1e-6  # summed: 50/60 vs 10/60


# ------------------------------------------------------------------ issue 27


def test_exact_mcnemar_at_ten_thousand_discordant_pairs():
    """`mcnemar_exact(515, 515)` raised OverflowError (0.5 ** 1030 underflows, C(1030, k)
    overflows a float): the tail is now an integer sum."""
    from fractions import Fraction
    from math import comb

    assert stats.mcnemar_exact(515, 515) == 1.0
    b, c = 4900, 5100
    # P(X <= b) = P(X >= c) = (2^n - C(n, n/2)) / 2 - sum_{b < k < n/2} C(n, k), an independent route
    n = b + c
    middle = sum(comb(n, k) for k in range(b + 1, n // 2))
    want = Fraction(2 * ((2**n - comb(n, n // 2)) // 2 - middle), 2**n)
    assert stats.mcnemar_exact(b, c) == pytest.approx(float(want), rel=1e-12)
    assert 0.04 < stats.mcnemar_exact(b, c) < 0.05  # z = 2, continuity-corrected p = 0.0459
    assert stats.mcnemar_midp(b, c) < stats.mcnemar_exact(b, c)


def test_mid_p_mcnemar_on_the_issues_examples():
    # 5 vs 0: exact 2/32, mid-p 1/32; 4 vs 0: exact 0.125, mid-p 0.0625 (Fagerland et al. 2013)
    assert stats.mcnemar_midp(5, 0) == pytest.approx(1 / 32) and stats.mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    assert stats.mcnemar_midp(0, 4) == pytest.approx(0.0625) and stats.mcnemar_exact(0, 4) == pytest.approx(0.125)
    assert stats.mcnemar_midp(3, 3) == 1.0 and stats.mcnemar_midp(0, 0) == 1.0


def test_fisher_exact_at_ten_thousand_per_cell():
    """Log-space hypergeometric terms: at 10^4 per cell (over 30 s before) the exact p agrees
    with Pearson's chi-square, which is accurate at that size."""
    import math

    a, b, c, d = 10000, 10000, 10000, 10300
    n = a + b + c + d
    chi2 = n * (a * d - b * c) ** 2 / ((a + b) * (c + d) * (a + c) * (b + d))
    assert stats.fisher_exact(a, b, c, d) == pytest.approx(math.erfc(math.sqrt(chi2 / 2)), rel=0.02)
    assert stats.fisher_exact(1000, 1000, 1000, 1000) == pytest.approx(1.0)


def test_exact_and_mid_p_binomial_intervals():
    # Clopper-Pearson 3/10: 0.0667 to 0.6525; 0/10 upper 0.3085 (= 1 - 0.025 ** 0.1)
    assert tuple(round(x, 4) for x in stats.binomial_ci(3, 10)) == (0.0667, 0.6525)
    assert stats.binomial_ci(0, 10) == (0.0, pytest.approx(1 - 0.025**0.1))
    # mid-p 0/10: (1 - p)^10 / 2 = 0.025 -> p = 1 - 0.05 ** 0.1
    assert stats.binomial_ci(0, 10, True)[1] == pytest.approx(1 - 0.05**0.1)


def test_miettinen_nurminen_published_example_and_its_test():
    # Newcombe (1998b) example (a), 56/70 - 48/80: MN interval 0.0528 to 0.3382
    r = score_intervals.mn_diff(56, 70, 48, 80, correct=False)
    assert tuple(round(x, 4) for x in r.ci95) == (0.0528, 0.3382)
    # its test at 0 is Pearson's chi-square times (N - 1) / N
    n, chi2 = 150, 150 * (56 * 32 - 14 * 48) ** 2 / (70 * 80 * 104 * 46)
    import math

    assert r.p_value == pytest.approx(math.erfc(math.sqrt(chi2 * (n - 1) / n / 2)))


def test_stratified_score_test_at_zero_is_cmh_and_its_interval_inverts_it():
    r = score_intervals.mn_stratified(RABBITS)
    assert r.p_value == pytest.approx(stats.cmh(RABBITS).p_value)
    assert r.diff == pytest.approx(stats.cmh(RABBITS).effect)
    assert r.ci95[0] > 0  # p = 0.017: the interval excludes 0
    assert score_intervals.mn_stratified([]).p_value is None and stats.cmh([]).p_value is None
    one = score_intervals.mn_stratified([(1, 1, 0, 1)])  # Sato's interval was the point [1, 1]
    assert one.ci95[0] < 0 and one.ci95[1] == 1.0 and one.p_value > 0.05
    flat = score_intervals.mn_stratified([(5, 5, 5, 5)])  # and [0, 0] here
    assert flat.ci95[0] < 0 < flat.ci95[1]


# ---------------------------------------------------------------------- issue 40


def _arm(success: int, n: int):
    from agent.rollout_stats import GroupStats

    return GroupStats(None, list(range(n)), success)


def test_the_whatif_is_exact_unconditional_at_small_arms_with_power_where_it_is_used():
    """Item 3: at 10 per arm the continuity-corrected score test rejected exactly Fisher's
    tables (power 0.47 for 10% -> 60%). The what-if now reports Boschloo's test (scipy's
    p) with the interval that inverts it; size stays under 0.05 and power is 0.66."""
    from scipy.stats import boschloo_exact

    from agent.rollout_stats import Effect
    from trajectory import exact2x2

    e = Effect(_arm(1, 10), _arm(6, 10))  # control 1/10, treatment 6/10: Fisher p = 0.057
    assert "Boschloo" in e.method and "Chan-Zhang" in e.method
    assert e.p_value == pytest.approx(boschloo_exact([[6, 1], [4, 9]]).pvalue, rel=1e-9)
    assert e.p_value < 0.05 and e.ci95[0] > 0 and e.as_json()["p_better"] == pytest.approx(e.p_value / 2)
    for n1, n2 in ((3, 3), (5, 5), (2, 6)):  # every table: interval and test agree (the benchmark: more)
        p = exact2x2.tables_two_sided(n1, n2)
        for k1 in range(n1 + 1):
            for k2 in range(n2 + 1):
                r = exact2x2.two_arm(k1, n1, k2, n2)
                assert (r.ci95[0] > 0 or r.ci95[1] < 0) == (r.p_value < 0.05), (k1, n1, k2, n2)
                assert r.p_value == pytest.approx(p[k1, k2], abs=2e-4)
    reject = exact2x2.rejection(10, 10, 0.025)
    assert exact2x2.power(10, 10, 0.6, 0.1, reject=reject) >= 0.6
    size = max(2 * exact2x2.power(10, 10, q, q, reject=reject) for q in [i / 100 for i in range(1, 100)])
    assert size <= 0.05
    # large arms keep the score procedure, named
    assert "Miettinen-Nurminen" in exact2x2.two_arm(30, 60, 20, 60).method


def test_minimum_detectable_effect_at_the_controls_rate():
    from trajectory.exact2x2 import min_detectable_effect, power

    d = min_detectable_effect(0.1, 10, 10)
    assert power(10, 10, 0.1 + d, 0.1) >= 0.8 > power(10, 10, 0.1 + d - 0.01, 0.1)
    assert min_detectable_effect(0.9, 10, 10) is None  # 100% is not enough
    assert 0.1 < min_detectable_effect(0.2, 200, 200) < 0.2  # the score test's approximation beyond 50


def test_printed_numbers_say_what_the_test_says():
    """Item 4: bounds rounded outward and never 0 when the interval excludes 0; a p below
    0.05 never printed as 0.05; compare --json unrounded."""
    from types import SimpleNamespace

    from agent.experiment_scores import _pair_counts
    from app_pages.experiment_views import _p as app_p
    from app_pages.whatif_panel import effect_text as app_effect
    from react_editor.experiment import _effect
    from react_editor.whatif import _effect_line
    from trajectory.numbers import effect_text, p_text

    assert p_text(0.049991) == "p = 0.0499" and p_text(0.04998) == "p = 0.0499" and p_text(8.7e-05) == "p < 0.001"
    assert p_text(0.049) == "p = 0.049" and p_text(0.0414) == "p = 0.041" and p_text(0.3) == "p = 0.30"
    assert app_p(0.04998) == "0.0499"
    assert effect_text(0.42, (0.004, 0.75), 0.049) == "+42.0 points [+0.4, +75.0], p = 0.049"
    assert effect_text(0.58, (0.00004, 0.89), 0.0499) == "+58.000 points [+0.004, +89.000], p = 0.0499"
    assert effect_text(0.1, (-0.2, 0.4), 0.5) == "+10 points [-20, +40], p = 0.50"
    fake = SimpleNamespace(effect=0.42, ci95=(0.004, 0.75), p_value=0.049991, method="m")
    assert "+42.0 points, 95% CI [+0.4, +75.0], p = 0.0499" in app_effect(fake)
    assert "+42.0 points, 95% CI [+0.4, +75.0], p = 0.0499" in _effect_line(fake)
    # 15 vs 5 discordant pairs of 10,000 tasks: p = 0.0414, the interval excludes 0
    xa = [True] * 15 + [False] * 5 + [False] * 9980
    xb = [False] * 15 + [True] * 5 + [False] * 9980
    c = _pair_counts(xa, xb)
    assert c["p_value"] == pytest.approx(0.0414, abs=1e-4) and 0 < c["diff_ci"][0] < 5e-5
    assert c["diff"] == 0.001 and c["tango_ci"][0] < c["diff"] < c["tango_ci"][1]
    text = _effect(c)
    assert text == "+0.100 points, 95% CI [+0.002, +0.256], p = 0.041"
    assert "[+0.0," not in text and "[0.0," not in text


@pytest.mark.timeout(20)
def test_exact_tails_at_scale():
    """Item 5: 10^6 discordant pairs and 10^5 strata in log space (the integer sums took
    over 15 s and 78 s); small-n results are those of the integer sums."""
    from fractions import Fraction
    from math import comb

    for b, c in ((3, 9), (40, 61), (700, 640)):
        n = b + c
        want = Fraction(2 * sum(comb(n, i) for i in range(min(b, c) + 1)), 2**n)
        assert stats.mcnemar_exact(b, c) == pytest.approx(min(1.0, float(want)), rel=1e-10)
    p = stats.mcnemar_exact(501_000, 499_000)  # z = 2.0: the normal tail 0.0455 to three digits
    assert p == pytest.approx(0.0455, abs=5e-4)
    assert stats.mcnemar_midp(501_000, 499_000) < p
    r = stats.paired_test(501_000, 499_000, 2_000_000)
    assert r.ci95[0] > 0 and r.p_value < 0.05
    assert 0 < stats.fisher_exact(250_000, 250_000, 249_000, 251_000) < 1
    tables = [(i % 13, 13 + i % 997, (7 * i) % 11, 11 + i % 1009) for i in range(100_000)]  # ~10^5 distinct
    s = score_intervals.mn_stratified(tables)
    assert s.ci95[0] < s.diff < s.ci95[1] and s.p_value is not None
    assert score_intervals.mn_stratified_p(tables) == pytest.approx(s.p_value)
