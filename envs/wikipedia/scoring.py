"""The paper's scores: HotpotQA exact match and F1 (the official `hotpot_evaluate_v1`
semantics, as ReAct's wrappers use them) and FEVER label accuracy. Pure functions."""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_NO_PUNCT = str.maketrans("", "", string.punctuation)  # the same characters, dropped in one pass


def normalize_answer(s: str) -> str:
    """Lower case, drop punctuation, drop articles a/an/the, collapse white space."""
    s = s.lower()
    s = s.translate(_NO_PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_parts(prediction: str, gold: str) -> tuple[float, float, float]:
    """(f1, precision, recall). yes/no/noanswer must match exactly or score 0."""
    p, g = normalize_answer(prediction), normalize_answer(gold)
    special = ("yes", "no", "noanswer")
    if (p in special or g in special) and p != g:
        return 0.0, 0.0, 0.0
    pt, gt = p.split(), g.split()
    common = Counter(pt) & Counter(gt)
    same = sum(common.values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision, recall = same / len(pt), same / len(gt)
    return 2 * precision * recall / (precision + recall), precision, recall


def f1(prediction: str, gold: str) -> float:
    return f1_parts(prediction, gold)[0]


FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


def fever_correct(prediction: str, label: str) -> bool:
    """ReAct's FeverWrapper compares normalised strings, so `supports` == `SUPPORTS`."""
    return normalize_answer(prediction) == normalize_answer(label)
