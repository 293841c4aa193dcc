"""Inter-annotator agreement (issue 43 item 4): Cohen's kappa from its definition checked
against textbook examples, Krippendorff's alpha (the `krippendorff` package) against
Krippendorff's own worked example, and the agreement of judgments as stored (a pair judged
the other way round is the same pair); undefined statistics are None with a reason, never NaN."""

from __future__ import annotations

import math

import pytest

from trajectory.agreement import agreement, agreement_lines, cohen_kappa, krippendorff_alpha
from trajectory.records import Judgment


def _two_by_two(yy: int, yn: int, ny: int, nn: int) -> tuple[list[str], list[str]]:
    """Rater A's and rater B's labels from a 2x2 table (rows: A yes/no; columns: B yes/no)."""
    a = ["yes"] * (yy + yn) + ["no"] * (ny + nn)
    b = ["yes"] * yy + ["no"] * yn + ["yes"] * ny + ["no"] * nn
    return a, b


@pytest.mark.parametrize(
    "table, kappa",
    [
        ((20, 5, 10, 15), 0.4),  # Wikipedia, "Cohen's kappa", simple example: p_o = 0.7, p_e = 0.5
        ((45, 15, 25, 15), 0.06 / 0.46),  # same p_o = 0.6, p_e = 0.54: kappa 0.1304
        ((25, 35, 5, 35), 0.14 / 0.54),  # same p_o = 0.6, p_e = 0.46: kappa 0.2593
    ],
)
def test_cohen_kappa_matches_textbook_examples(table, kappa):
    value, note = cohen_kappa(*_two_by_two(*table))
    assert note is None and value == pytest.approx(kappa, abs=1e-12)


def test_cohen_kappa_is_undefined_when_both_raters_give_one_label_only():
    value, note = cohen_kappa(["A"] * 5, ["A"] * 5)
    assert value is None and "undefined" in note and "'A'" in note
    assert cohen_kappa([], []) == (None, "no items judged by both")
    assert cohen_kappa(["A", "B"], ["B", "A"])[0] == pytest.approx(-1.0)


def test_krippendorff_alpha_matches_krippendorffs_worked_example():
    """Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: four
    observers, twelve units, missing values; nominal alpha = 0.743."""
    rows = {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    }
    units = [{c: v[j] for c, v in rows.items() if v[j] is not None} for j in range(12)]
    value, note = krippendorff_alpha(units)
    assert note is None and round(value, 3) == 0.743
    value, note = krippendorff_alpha([{"x": "A", "y": "A"}, {"x": "A", "z": "A"}])
    assert value is None and "undefined" in note


def _j(a: int, b: int, better: str, who: str) -> Judgment:
    return Judgment(episode_id=1, version_a=a, version_b=b, better=better, annotator=who)


def test_agreement_of_two_annotators_counts_a_flipped_pair_as_the_same_pair():
    js = [
        _j(1, 2, "A", "ann"),
        _j(2, 1, "B", "bob"),  # pair (1,2): alike (bob asked the other way round)
        _j(1, 3, "A", "ann"),
        _j(1, 3, "tie", "bob"),  # unlike
        _j(1, 4, "B", "ann"),
        _j(4, 1, "A", "bob"),  # alike
        _j(1, 5, "B", "ann"),
    ]  # judged once: not a unit
    a = agreement(js)
    assert (a.judgments, a.pairs, a.pairs_multi, a.annotators) == (7, 4, 3, ["ann", "bob"])
    assert a.agreement == pytest.approx(2 / 3) and a.all_agree == 2
    expected, _ = cohen_kappa(["A", "A", "B"], ["A", "tie", "B"])
    assert a.kappa == pytest.approx(expected) and a.kappa_note is None
    assert a.alpha is not None and not math.isnan(a.alpha)
    text = "\n".join(agreement_lines(a))
    assert "raw agreement: 66.7%" in text and f"Cohen's kappa: {expected:.3f}" in text and "nan" not in text.lower()


def test_agreement_beyond_two_annotators_gives_alpha_and_each_twos_kappa():
    js = [
        _j(1, 2, "A", "ann"),
        _j(1, 2, "A", "bob"),
        _j(1, 2, "B", "cy"),
        _j(1, 3, "B", "ann"),
        _j(1, 3, "B", "cy"),
        _j(1, 4, "tie", "bob"),
        _j(1, 4, "tie", "cy"),
    ]
    a = agreement(js)
    assert a.annotators == ["ann", "bob", "cy"] and a.kappa is None and "3 annotators" in a.kappa_note
    assert a.alpha is not None and [t.annotators for t in a.by_annotators] == [
        ["ann", "bob"],
        ["ann", "cy"],
        ["bob", "cy"],
    ]
    assert a.agreement == pytest.approx(3 / 5)  # (ann,bob) alike, (ann,cy) and (bob,cy) not; two pairs alike


def test_agreement_says_why_a_statistic_is_undefined():
    a = agreement([_j(1, 2, "A", "ann"), _j(1, 2, "A", "bob")])
    assert a.agreement == 1.0 and a.kappa is None and a.alpha is None
    text = "\n".join(agreement_lines(a))
    assert "Cohen's kappa: undefined: every judgment is 'A'" in text and "nan" not in text.lower()
    none = agreement([_j(1, 2, "A", "ann")])
    assert none.pairs_multi == 0 and none.agreement is None
    assert "n/a (no pair judged by two or more annotators)" in "\n".join(agreement_lines(none))
