"""The verdict on suggested fixes (issue 40): one-sided proof, harm, ranking, and the
multiplicity adjustment of the candidates' p-values.

A candidate is "proven" when the lower bound of its effect's 95% interval is above 0 AND the
one-sided test that the treatment is better - adjusted for the other candidates - is below
ALPHA_ONE = 0.025 (the one-sided level the interval's lower end inverts). One that is
significantly worse (upper bound below 0, one-sided "worse" p below 0.025) is "harmful": it
is ranked after every other verified candidate and never accepted in bulk. Within one
failure the candidates are adjusted by Holm's step-down (each candidate still to be verified
counts with p = 1); across `suggest --experiment` by Benjamini-Hochberg over every tested
candidate of every failure. The statistics are recomputed from the arms' counts
(`trajectory.exact2x2.two_arm`: Boschloo's exact unconditional test and its inverted interval
for small arms, the Miettinen-Nurminen score procedure for large ones), so an old record
reads with today's procedure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from sessions import suggestions
from trajectory.exact2x2 import two_arm
from trajectory.multiplicity import BH, HOLM, benjamini_hochberg, holm
from trajectory.numbers import effect_text, p_text
from trajectory.stats import Comparison

ALPHA = 0.05
ALPHA_ONE = ALPHA / 2  # one-sided: the level the lower end of a two-sided 95% interval inverts
TESTED = ("verified", "accepted", "dismissed")


def comparison_of(result: dict[str, Any] | None) -> Comparison | None:
    """The what-if's comparison, treatment minus control, from its recorded arms."""
    t, c = (result or {}).get("treatment"), (result or {}).get("control")
    if not t or not c or not t.get("n") or not c.get("n"):
        return None
    return two_arm(int(t["success"]), int(t["n"]), int(c["success"]), int(c["n"]))


def verdict(
    effect: float | None,
    ci: Sequence[float] | None,
    p_better: float | None,
    p_worse: float | None = None,
    *,
    p_used: float | None = None,
    adjustment: str | None = None,
) -> tuple[str, str]:
    """(state, words), state 'proven', 'harmful' or 'not shown'. Proven: lower bound above 0
    and the one-sided p that it is better (`p_used`, the adjusted one, when given) below
    0.025. Harmful: upper bound below 0 and the one-sided p that it is worse below 0.025."""
    if effect is None or ci is None:
        return "not shown", "not shown: no finished rollouts"
    lo, hi = ci
    used = p_better if p_used is None else p_used
    if hi < 0 and p_worse is not None and p_worse < ALPHA_ONE:
        return "harmful", f"harmful: {effect_text(effect, ci, None)}; one-sided p (worse) {p_text(p_worse)[2:]}"
    body = f"{effect_text(effect, ci, None)}; one-sided {p_text(p_better)}"
    if adjustment and p_used is not None:
        body += f", {adjustment}: {p_text(p_used)} (used)"
    if lo > 0 and used is not None and used < ALPHA_ONE:
        return "proven", f"proven: {body}"
    return "not shown", f"not shown: {body}"


@dataclass
class Assessment:
    """A candidate's statistics and verdict within its family of candidates."""

    comparison: Comparison | None
    p_adjusted: float | None
    adjustment: str | None  # "Holm over K" or "Benjamini-Hochberg over M"
    state: str
    words: str

    @property
    def lower(self) -> float:
        c = self.comparison
        return c.ci95[0] if c is not None and c.ci95 is not None else float("-inf")


def _family(cands: Sequence[suggestions.Candidate]) -> list[suggestions.Candidate]:
    """The candidates tested against the failure's controls: verified ones and those still
    to verify (the latter count with p = 1 until they are)."""
    return [c for c in cands if c.state in (*TESTED, "pending")]


def _p_better(c: suggestions.Candidate) -> float:
    cmp = comparison_of(c.result) if c.state in TESTED else None
    return 1.0 if cmp is None or cmp.p_better is None else cmp.p_better


def assess(s: suggestions.Suggestion, adjusted: dict[int, tuple[float, str]] | None = None) -> dict[int, Assessment]:
    """{candidate number: Assessment}: Holm within the suggestion, or the `adjusted`
    {candidate id: (p, label)} an experiment-wide adjustment gave."""
    fam = _family(s.candidates)
    if adjusted is None:
        ps = holm([_p_better(c) for c in fam])
        label = f"{HOLM} over {len(fam)}"
        adjusted = {c.id: (p, label) for c, p in zip(fam, ps)}
    out = {}
    for c in s.candidates:
        cmp = comparison_of(c.result) if c.state in TESTED else None
        p_adj, label = adjusted.get(c.id, (None, None))
        if cmp is None or cmp.ci95 is None:
            words = (
                (c.result or {}).get("verdict") or c.skip or "not verified yet (run the same command again to continue)"
            )
            out[c.number] = Assessment(cmp, p_adj, label, "not shown", words)
            continue
        state, words = verdict(cmp.diff, cmp.ci95, cmp.p_better, cmp.p_worse, p_used=p_adj, adjustment=label)
        out[c.number] = Assessment(cmp, p_adj, label, state, words)
    return out


def experiment_adjusted(ss: Sequence[suggestions.Suggestion]) -> dict[int, tuple[float, str]]:
    """Benjamini-Hochberg over every tested (or still to test) candidate of these failures."""
    fam = [c for s in ss for c in _family(s.candidates)]
    ps = benjamini_hochberg([_p_better(c) for c in fam])
    label = f"{BH} over {len(fam)}"
    return {c.id: (p, label) for c, p in zip(fam, ps)}


def ranked(s: suggestions.Suggestion, a: dict[int, Assessment] | None = None) -> list[suggestions.Candidate]:
    """Best first: verified candidates that are not harmful by the lower bound of their
    interval, then the harmful ones, then those still to verify, then the ones never verified
    (flagged, not applicable)."""
    a = assess(s) if a is None else a
    order = {"verified": 0, "accepted": 0, "dismissed": 0, "pending": 2, "flagged": 3, "skipped": 3}

    def key(c: suggestions.Candidate):
        group = order.get(c.state, 4)
        if group == 0 and a[c.number].state == "harmful":
            group = 1
        return group, -a[c.number].lower, c.number

    return sorted(s.candidates, key=key)


def candidate_json(c: suggestions.Candidate, rank: int, a: Assessment) -> dict[str, Any]:
    r = c.result or {}
    cmp = a.comparison
    return {
        "number": c.number,
        "rank": rank,
        "step": c.step,
        "kind": c.kind,
        "text": c.text,
        "rationale": c.rationale,
        "leaks_answer": c.leaks_answer,
        "proven": a.state == "proven",
        "harmful": a.state == "harmful",
        "verdict": a.words,
        "effect": cmp.diff if cmp else r.get("effect"),
        "effect_ci95": list(cmp.ci95) if cmp and cmp.ci95 else None,
        "p_value": cmp.p_value if cmp else None,
        "p_better": cmp.p_better if cmp else None,
        "p_worse": cmp.p_worse if cmp else None,
        "p_adjusted": a.p_adjusted,
        "adjustment": a.adjustment,
        "proven_uses": "p_adjusted" if a.p_adjusted is not None else "p_better",
        "method": cmp.method if cmp else r.get("method"),
        "control": r.get("control"),
        "treatment": r.get("treatment"),
        "cost": r.get("cost"),
        "state": c.state,
        "accepted_version": c.accepted_version,
        "confirmation": r.get("confirmation"),
    }


def report(s: suggestions.Suggestion, adjusted: dict[int, tuple[float, str]] | None = None) -> dict[str, Any]:
    """`suggest --json`: the contract of issue 29 with issue 40's one-sided, adjusted verdicts."""
    a = assess(s, adjusted)
    return {
        "episode": s.episode_id,
        "version": s.version_id,
        "first_failure_step": s.first_failure_step,
        "suggestion": s.id,
        "critic": s.critic,
        "prompt": {"label": s.prompt_label, "hash": s.prompt_hash},
        "alpha_one_sided": ALPHA_ONE,
        "min_detectable_effect": detectable(s),
        "candidates": [candidate_json(c, i, a[c.number]) for i, c in enumerate(ranked(s, a), 1)],
    }


def detectable(s: suggestions.Suggestion) -> list[dict[str, Any]]:
    """For each control arm the candidates were verified against: the smallest rise over its
    observed rate that `--verify N` rollouts per arm prove with 80% power, one candidate at
    0.025 one-sided and the best of the K at Holm's first step (0.025 / K)."""
    from trajectory.exact2x2 import EXACT_MAX_ARM, min_detectable_effect

    k = max(1, len(_family(s.candidates)))
    seen: dict[Any, dict[str, Any]] = {}
    for c in s.candidates:
        r = c.result or {}
        ctl, gid = r.get("control"), (r.get("groups") or {}).get("control")
        if not ctl or not ctl.get("n") or gid in seen:
            continue
        rate, n = ctl["success"] / ctl["n"], s.verify_n
        seen[gid] = {
            "step": r.get("step"),
            "control": f"{ctl['success']}/{ctl['n']}",
            "control_rate": rate,
            "rollouts_per_arm": n,
            "power": 0.8,
            "alpha_one_sided": ALPHA_ONE,
            "effect": min_detectable_effect(rate, n, n, alpha_one=ALPHA_ONE, exact_max=EXACT_MAX_ARM),
            "candidates": k,
            "effect_best_of_k": min_detectable_effect(rate, n, n, alpha_one=ALPHA_ONE / k, exact_max=EXACT_MAX_ARM),
        }
    return list(seen.values())


def detectable_text(d: dict[str, Any]) -> str:
    """One line of `detectable`: what --verify N can prove at this control's rate."""

    def pts(x: float | None) -> str:
        return "no rise (not even to 100%)" if x is None else f"a rise of +{math.ceil(x * 100 - 1e-9)} points or more"

    line = (
        f"with --verify {d['rollouts_per_arm']} at step {d['step']}'s control rate {d['control_rate']:.0%} "
        f"({d['control']}): 80% power to prove {pts(d['effect'])} (one-sided 0.025)"
    )
    if d["candidates"] > 1:
        line += (
            f"; the best of {d['candidates']} candidates (Holm, 0.025/{d['candidates']}): {pts(d['effect_best_of_k'])}"
        )
    return line


def method_lines(report_: dict[str, Any]) -> list[str]:
    """What a suggest report's verdicts read (CLI and app alike): the test, the adjustment,
    and what --verify N can detect at each control's rate."""
    cands = report_["candidates"]
    methods = sorted({c["method"] for c in cands if c.get("method")})
    adj = next((c["adjustment"] for c in cands if c.get("adjustment")), None)
    out = [f"test: {m}" for m in methods]
    if adj:
        out.append(f"proven = lower bound > 0 and the one-sided p adjusted by {adj} < 0.025 (raw p shown first)")
    return out + [detectable_text(d) for d in report_.get("min_detectable_effect") or []]
