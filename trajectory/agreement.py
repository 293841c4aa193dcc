"""How often annotators agree on pairwise judgments (pure): raw agreement over the pairs two or
more people judged, Cohen's kappa for each two annotators (from its definition), Krippendorff's
alpha (nominal, the `krippendorff` package) over all of them; and the lines the faces print.
A statistic that is undefined (one category only: agreement by chance is certain) is None with
the reason, never NaN."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from itertools import combinations

from pydantic import Field

from trajectory.records import Judgment, Record

CATEGORIES = ("A", "B", "tie")  # a judgment of a pair as stored (A = the lower version id)


class TwoAnnotators(Record):
    """Two annotators' agreement over the pairs both judged."""

    annotators: list[str] = Field(description="The two annotators, in name order.")
    pairs: int = Field(description="Version pairs both of them judged.")
    agreed: int = Field(description="Of those, the pairs they judged alike.")
    agreement: float | None = Field(description="agreed / pairs; None when they judged no pair in common.")
    kappa: float | None = Field(description="Cohen's kappa over those pairs; None when undefined (see kappa_note).")
    kappa_note: str | None = Field(None, description="Why kappa is undefined; None when it is defined.")


class Agreement(Record):
    """Inter-annotator agreement over the version pairs judged by two or more people."""

    judgments: int = Field(description="Judgments read (one per annotator and pair).")
    pairs: int = Field(description="Version pairs judged at all.")
    pairs_multi: int = Field(description="Version pairs judged by two or more annotators: the units measured.")
    annotators: list[str] = Field(
        default_factory=list, description="The annotators who judged a pair someone else judged too, in name order."
    )
    agreement: float | None = Field(
        None,
        description="Raw agreement: of every two annotators' judgments of one pair, the share that are alike; "
        "None when no pair was judged twice.",
    )
    all_agree: int = Field(0, description="Pairs on which every annotator who judged them agrees.")
    kappa: float | None = Field(
        None,
        description="Cohen's kappa when exactly two annotators judged pairs in common; None otherwise or when "
        "undefined (kappa_note).",
    )
    kappa_note: str | None = Field(None, description="Why kappa is not given; None when it is.")
    alpha: float | None = Field(
        None,
        description="Krippendorff's alpha (nominal) over every multiply judged pair and annotator; None when "
        "undefined (alpha_note).",
    )
    alpha_note: str | None = Field(None, description="Why alpha is not given; None when it is.")
    by_annotators: list[TwoAnnotators] = Field(
        default_factory=list, description="Each two annotators' agreement and Cohen's kappa over the pairs both judged."
    )


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable]) -> tuple[float | None, str | None]:
    """Cohen's kappa of two raters' labels of the same items, from its definition:
    (p_o - p_e) / (1 - p_e), p_o the share of items labelled alike, p_e the agreement expected by
    chance from each rater's own label frequencies. (None, why) when undefined: no items, or
    p_e = 1 (both gave every item one and the same label)."""
    if len(first) != len(second):
        raise ValueError("two raters' labels of the same items: the lists differ in length")
    n = len(first)
    if n == 0:
        return None, "no items judged by both"
    p_o = sum(a == b for a, b in zip(first, second)) / n
    f1, f2 = Counter(first), Counter(second)
    p_e = sum(f1[k] * f2[k] for k in f1) / (n * n)
    if p_e >= 1.0:
        (only,) = set(first)
        return None, f"undefined: every judgment is {only!r}, so agreement by chance is certain"
    return (p_o - p_e) / (1.0 - p_e), None


def krippendorff_alpha(units: Sequence[Mapping[str, Hashable]]) -> tuple[float | None, str | None]:
    """Krippendorff's alpha, nominal, of units each judged by some annotators ({annotator:
    label}); missing judgments are allowed. (None, why) when undefined: no unit judged twice, or
    one label only (no disagreement to expect)."""
    import krippendorff
    import numpy as np

    paired = [u for u in units if len(u) >= 2]
    if not paired:
        return None, "no pair judged by two or more annotators"
    labels = sorted({str(v) for u in paired for v in u.values()})
    if len(labels) < 2:
        return None, f"undefined: every judgment is {labels[0]!r}, so no disagreement is expected by chance"
    code = {label: i for i, label in enumerate(labels)}
    coders = sorted({c for u in paired for c in u})
    data = np.full((len(coders), len(paired)), np.nan)
    for j, u in enumerate(paired):
        for c, v in u.items():
            data[coders.index(c), j] = code[str(v)]
    value = float(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal", value_domain=list(range(len(labels))))
    )
    return value, None


def agreement(judgments: Iterable[Judgment]) -> Agreement:
    """The agreement of whoever judged the same pairs (judgments as stored: one per annotator
    and pair, oriented A = the lower version id)."""
    units: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)
    count = 0
    for j in judgments:
        count += 1
        lo, hi = sorted((j.version_a, j.version_b))
        units[(lo, hi)][j.annotator] = j.better if j.version_a == lo else {"A": "B", "B": "A"}.get(j.better, j.better)
    multi = [u for u in units.values() if len(u) >= 2]
    out = Agreement(judgments=count, pairs=len(units), pairs_multi=len(multi))
    if not multi:
        out.kappa_note = out.alpha_note = "no pair judged by two or more annotators"
        return out
    out.annotators = sorted({a for u in multi for a in u})
    alike = total = 0
    for u in multi:
        for a, b in combinations(sorted(u), 2):
            total += 1
            alike += u[a] == u[b]
    out.agreement = alike / total
    out.all_agree = sum(len(set(u.values())) == 1 for u in multi)
    for a, b in combinations(out.annotators, 2):
        both = [u for u in multi if a in u and b in u]
        if not both:
            continue
        k, note = cohen_kappa([u[a] for u in both], [u[b] for u in both])
        same = sum(u[a] == u[b] for u in both)
        out.by_annotators.append(
            TwoAnnotators(
                annotators=[a, b], pairs=len(both), agreed=same, agreement=same / len(both), kappa=k, kappa_note=note
            )
        )
    if len(out.annotators) == 2:
        (two,) = out.by_annotators
        out.kappa, out.kappa_note = two.kappa, two.kappa_note
    else:
        out.kappa_note = (
            f"{len(out.annotators)} annotators: Cohen's kappa is for two (see alpha, and each two annotators' kappa)"
        )
    out.alpha, out.alpha_note = krippendorff_alpha(multi)
    return out


def _stat(value: float | None, note: str | None) -> str:
    return f"{value:.3f}" if value is not None else (note or "n/a")


def agreement_lines(a: Agreement) -> list[str]:
    """The agreement as people read it (the CLI prints these lines; the app shows them)."""
    lines = [
        (
            f"{a.judgments} judgment{'s' if a.judgments != 1 else ''} of {a.pairs} version "
            f"pair{'s' if a.pairs != 1 else ''}; {a.pairs_multi} judged by two or more annotators"
        )
    ]
    if not a.pairs_multi:
        lines.append("agreement: n/a (no pair judged by two or more annotators)")
        return lines
    lines.append(f"annotators: {', '.join(a.annotators)}")
    lines.append(
        f"raw agreement: {a.agreement:.1%} of judgments two annotators made of one pair are alike; "
        f"every annotator agrees on {a.all_agree} of {a.pairs_multi} pairs"
    )
    lines.append(f"Cohen's kappa: {_stat(a.kappa, a.kappa_note)}")
    lines.append(f"Krippendorff's alpha (nominal): {_stat(a.alpha, a.alpha_note)}")
    if len(a.by_annotators) > 1:
        for t in a.by_annotators:
            lines.append(
                f"  {t.annotators[0]} and {t.annotators[1]}: {t.pairs} pairs, {t.agreed} alike, "
                f"kappa {_stat(t.kappa, t.kappa_note)}"
            )
    if a.pairs_multi < 10:
        lines.append(
            f"(only {a.pairs_multi} pair{'s' if a.pairs_multi != 1 else ''} judged twice: these figures are rough)"
        )
    return lines
