"""Issue 40, items 1 and 2: "proven" means better (one-sided), a harmful edit is never proven
or accepted in bulk, and the candidates of a failure (Holm) and of an experiment
(Benjamini-Hochberg) are adjusted, with raw and adjusted p shown and the one used named."""

from __future__ import annotations

import pytest

from sessions import suggestions
from tests.suggest_agents import fail_episode


def _arm(k: int, n: int) -> dict:
    return {"n": n, "success": k, "success_rate": k / n, "ci95": [0.0, 1.0], "versions": []}


def _result(t: tuple[int, int], c: tuple[int, int], step: int = 1, control_group: int = 1) -> dict:
    return {
        "treatment": _arm(*t),
        "control": _arm(*c),
        "step": step,
        "groups": {"control": control_group},
        "cost": {"calls": 1, "tokens": 10, "usd": 0.0},
        "control_cost": {"calls": 1, "tokens": 10, "usd": 0.0},
    }


def _suggestion(toy, results: list[dict | None], version: int = 1) -> suggestions.Suggestion:
    """A recorded suggestion whose candidates were verified with these arms (None: pending)."""
    s = suggestions.create(
        toy.store, episode_id=1, version_id=version, request_key="k", critic={"model": "m"}, verify_n=10
    )
    cands = [
        {"number": i, "step": 1, "kind": "rewrite_thought", "text": f"t{i}", "rationale": ""}
        for i in range(1, len(results) + 1)
    ]
    s = suggestions.record_answer(
        toy.store,
        s.id,
        prompt_label="l",
        prompt_hash="h",
        prompt_text="p",
        response="r",
        call_id=None,
        candidates=cands,
    )
    for c, r in zip(s.candidates, results):
        if r is not None:
            suggestions.record_result(toy.store, c.id, r)
    return suggestions.get(toy.store, s.id)


def test_a_harmful_edit_is_harmful_not_proven():
    from agent.suggest import verdict

    # the table: treatment 0/10 against control 10/10 was "proven: -100 points [-100, -51]"
    from trajectory.exact2x2 import two_arm

    r = two_arm(0, 10, 10, 10)
    state, words = verdict(r.diff, r.ci95, r.p_better, r.p_worse)
    assert state == "harmful" and words.startswith("harmful: -100 points [-100, ")
    # the old interval and p, read by the one-sided rule: not a proof of a fix
    state, words = verdict(-1.0, (-1.0, -0.51), 1.0, 8.7e-05)
    assert state == "harmful" and "proven" not in words
    assert verdict(-1.0, (-1.0, -0.51), 1.0, 8.7e-05, p_used=0.001, adjustment="Holm over 3")[0] == "harmful"
    # better, and the one-sided test below 0.025: proven; the interval alone is not enough
    assert verdict(0.6, (0.22, 0.84), 0.003, 0.99)[0] == "proven"
    assert verdict(1.0, (0.21, 1.0), 0.03, 0.99)[0] == "not shown"
    assert verdict(0.6, (0.22, 0.84), 0.003, 0.99, p_used=0.03, adjustment="Holm over 3")[0] == "not shown"
    assert verdict(None, None, None) == ("not shown", "not shown: no finished rollouts")


def test_when_every_candidate_hurts_none_is_proven_or_counted_and_harm_ranks_last(toy):
    from agent import critic_dialogue, suggest, suggest_experiment

    fail_episode(toy)
    s = _suggestion(toy, [_result((0, 10), (10, 10)), _result((3, 10), (10, 10)), _result((9, 10), (10, 10))])
    rep = suggest.report(s)
    by = {c["number"]: c for c in rep["candidates"]}
    assert by[1]["harmful"] and by[2]["harmful"] and not by[3]["harmful"]
    assert not any(c["proven"] for c in rep["candidates"])
    assert [c["number"] for c in rep["candidates"]] == [3, 2, 1]  # the non-harmful first, then by lower bound
    assert all(c["verdict"].startswith("harmful: ") for c in rep["candidates"][1:])
    rows = suggest_experiment.failure_rows(toy.engine, [s])
    data = suggest_experiment.experiment_report(toy.engine, 1, rows)
    assert data["proven"] == 0 and data["cost_per_proven_fix"] == {"calls": None, "tokens": None, "usd": None}
    assert suggest_experiment.accept_all_proven(toy.engine, rows) == []  # nothing accepted in bulk
    # a harmful candidate ranked first by hand is still refused in bulk
    with pytest.raises(critic_dialogue.SuggestError, match="not a proven fix"):
        suggest.accept(toy.engine, 1, 1, bulk=True)


def test_holm_within_a_failure_shows_raw_and_adjusted_p_and_uses_the_adjusted():
    """4/10 vs 0/10 is one-sided p = 0.021 alone (proven at 0.025); among three candidates
    sharing the control, Holm multiplies it by 3: not proven, and the words say so."""
    from agent.suggest_verdict import assess

    cands = [
        suggestions.Candidate(
            id=i, suggestion_id=1, number=i, step=1, kind="rewrite_thought", text="t", state="verified", result=r
        )
        for i, r in enumerate([_result((4, 10), (0, 10)), _result((0, 10), (0, 10)), _result((1, 10), (0, 10))], 1)
    ]
    s = suggestions.Suggestion(
        id=1, episode_id=1, version_id=1, request_key="k", verify_n=10, state="done", created_at="x", candidates=cands
    )
    a = assess(s)
    raw = a[1].comparison.p_better
    assert raw == pytest.approx(0.0211, abs=1e-4) and a[1].comparison.ci95[0] > 0
    assert a[1].p_adjusted == pytest.approx(3 * raw) and a[1].adjustment == "Holm over 3"
    assert a[1].state == "not shown"
    assert "one-sided p = 0.021" in a[1].words and "Holm over 3: p = 0.063 (used)" in a[1].words
    alone = assess(s.model_copy(update={"candidates": cands[:1]}))
    assert alone[1].state == "proven" and alone[1].adjustment == "Holm over 1"
    # a candidate still to verify counts in the family (p = 1 until it is)
    pending = cands[:1] + [cands[1].model_copy(update={"state": "pending", "result": None})]
    assert assess(s.model_copy(update={"candidates": pending}))[1].adjustment == "Holm over 2"


def test_benjamini_hochberg_across_an_experiment(toy):
    from agent import suggest_experiment

    fail_episode(toy)
    strong = _suggestion(toy, [_result((10, 10), (0, 10))])
    weak = _suggestion(toy, [_result((4, 10), (0, 10))] + [_result((0, 10), (0, 10))] * 4)
    rows = suggest_experiment.failure_rows(toy.engine, [strong, weak])
    best = [r["best"] for r in rows]
    assert all(b["adjustment"] == "Benjamini-Hochberg over 6" for b in best)
    assert best[0]["proven"] and best[0]["p_adjusted"] == pytest.approx(6 * best[0]["p_better"])
    # 0.021 is the second smallest of 6: BH gives 0.021 * 6 / 2 = 0.063 > 0.025
    assert best[1]["p_adjusted"] == pytest.approx(3 * best[1]["p_better"]) and not best[1]["proven"]
    assert best[1]["proven_uses"] == "p_adjusted" and best[1]["effect_ci95"][0] > 0
