"""trajectory/stats.py against textbook values."""

from __future__ import annotations

import pytest

from trajectory import stats


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


def test_bootstrap_interval_is_reproducible_and_covers_the_difference():
    a = [True] * 30 + [False] * 10
    b = [True] * 20 + [False] * 20
    lo, hi = stats.bootstrap_diff_ci(a, b, seed=1)
    assert (lo, hi) == stats.bootstrap_diff_ci(a, b, seed=1)
    assert lo < 0.25 < hi and lo > 0  # every discordant pair favours a
    same = [True, False] * 10
    assert stats.bootstrap_diff_ci(same, same) == (0.0, 0.0)
    with pytest.raises(ValueError):
        stats.bootstrap_diff_ci([True], [True, False])


def test_bad_counts_are_refused():
    with pytest.raises(ValueError):
        stats.wilson(5, 3)
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 2)
