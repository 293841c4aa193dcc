"""Issue 29: `suggest` - a scripted critic proposes edits, each proven (or not) by a what-if
against a scripted agent, through the real CLI, client and scripted model server."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from sessions import suggestions
from tests.cli_helpers import cli, cli_json
from tests.scripted_server import Reply
from tests.suggest_agents import CRITIC_MARK, GOOD, HINT, IDLE, IDLE2, cfg, critic_json, fail_episode
from tests.toy_envs import WIKI_TASK

ROOT = Path(__file__).resolve().parents[2]

BAD_STEP = {"step": 40, "kind": "rewrite_action", "text": "go to cabinet 1", "rationale": "x"}


def counts(toy) -> dict[str, int]:
    return {
        t: toy.store.db.execute(f"select count(*) from {t}").fetchone()[0]
        for t in ("versions", "steps", "suggestions", "candidates", "model_calls", "rollout_groups")
    }


def test_the_good_candidate_ranks_first_and_is_proven(toy, capsys):
    failed = fail_episode(toy)
    failed.critic = critic_json(IDLE, GOOD, IDLE2, BAD_STEP)
    out = cli_json(capsys, "suggest", "1", "--candidates", "4", "--verify", "5", "--db", str(toy.db))
    assert set(out) >= {"episode", "version", "first_failure_step", "candidates"}
    assert (out["episode"], out["version"]) == (1, 1)
    assert out["first_failure_step"] == 3  # the second visit to the shelf repeats the action
    fields = {
        "number",
        "rank",
        "step",
        "kind",
        "text",
        "rationale",
        "leaks_answer",
        "proven",
        "verdict",
        "effect",
        "effect_ci95",
        "p_value",
        "control",
        "treatment",
        "cost",
    }
    assert all(fields <= set(c) for c in out["candidates"])
    assert [c["rank"] for c in out["candidates"]] == [1, 2, 3, 4]
    best, *rest = out["candidates"]
    assert (best["number"], best["kind"], best["text"]) == (2, "insert_thought_before", HINT)
    assert best["proven"] is True and best["effect"] == 1.0
    assert best["treatment"]["success"] == 5 and best["control"]["success"] == 0
    # the what-if's own statistics (its interval and exact test), said in words
    lo, hi = best["effect_ci95"]
    assert 0 < lo < hi and best["p_value"] < 0.05
    assert best["verdict"] == (
        f"proven: +100 points [{math.floor(lo * 100):+d}, +100]; one-sided p < 0.001, "
        f"Holm over 3: p = {best['p_adjusted']:.2g} (used)"
    )
    assert best["p_adjusted"] == pytest.approx(3 * best["p_better"]) and best["proven_uses"] == "p_adjusted"
    assert best["cost"]["calls"] > 0
    assert all(not c["proven"] for c in rest)
    idle = [c for c in rest if c["number"] in (1, 3)]
    assert all(
        re.fullmatch(
            r"not shown: \+0 points \[-\d+, \+\d+\]; one-sided p = [\d.]+, Holm over 3: p = [\d.]+ "
            r"\(used\)",
            c["verdict"],
        )
        for c in idle
    )
    assert rest[-1]["number"] == 4 and "does not apply: step 40" in rest[-1]["verdict"]
    assert rest[-1]["treatment"] is None  # an inapplicable candidate is never verified
    # one control group per step K, shared by the candidates there (IDLE2 after step 3 is K = 4)
    kinds = toy.store.db.execute("select kind, step from rollout_groups order by id").fetchall()
    assert sorted(k for k in kinds if k[0] == "control") == [("control", 1), ("control", 2), ("control", 4)]
    # the same command again asks the critic afresh; candidates proposed again find their what-ifs
    before = (failed.critic_calls, failed.agent_calls)
    again = cli_json(capsys, "suggest", "1", "--candidates", "4", "--verify", "5", "--db", str(toy.db))
    assert again["suggestion"] == out["suggestion"] + 1 and again["candidates"] == out["candidates"]
    assert (failed.critic_calls, failed.agent_calls) == (before[0] + 1, before[1])
    # the critic call is recorded with the episode and priced like the others
    (purpose,) = toy.store.db.execute("select purpose from model_calls where purpose = 'critic'").fetchone()
    assert purpose == "critic"


def test_show_prompt_is_the_exact_text_sent(toy, capsys):
    failed = fail_episode(toy)
    db_ = str(toy.db)
    code, before, _ = cli(capsys, "suggest", "1", "--show-prompt", "--db", db_)
    assert code == 0 and CRITIC_MARK in before and "Step 3: go to shelf 1" in before
    assert "repeated_action" in before and "first step that raised a failure signal is step 3" in before
    failed.critic = critic_json(IDLE)
    cli_json(capsys, "suggest", "1", "--verify", "1", "--db", db_)
    sent = [r.body["prompt"] for r in toy.llm.completion_requests if CRITIC_MARK in r.body.get("prompt", "")]
    code, after, _ = cli(capsys, "suggest", "1", "--show-prompt", "--db", db_)
    assert sent == [before] and after == before
    s = suggestions.latest(toy.store, 1)
    assert s.prompt_text == before and s.prompt_label == "command-v1" and len(s.prompt_hash) == 64


def test_malformed_critic_output_is_one_line_and_writes_nothing(toy, capsys):
    failed = fail_episode(toy)
    before = counts(toy)
    for answer in ("I think step 2 is wrong.", '{"candidates": "none"}', "```json\n{broken\n```"):
        failed.critic = answer
        code, out, err = cli(capsys, "suggest", "1", "--db", str(toy.db))
        assert code == 2 and out == "" and err.count("\n") == 1 and "no JSON object" in err
    after = counts(toy)
    assert after == before


def test_accept_makes_the_edit_as_edit_does_records_origin_and_resumes(toy, capsys):
    failed = fail_episode(toy)
    failed.critic = critic_json(IDLE, GOOD)
    out = cli_json(capsys, "suggest", "1", "--candidates", "2", "--verify", "5", "--db", str(toy.db))
    good = next(c for c in out["candidates"] if c["text"] == HINT)
    res = cli_json(capsys, "suggest", "1:1", "--accept", str(good["number"]), "--db", str(toy.db))
    assert res["success"] is True
    new = toy.store.episodes.get(1).current_version
    steps = toy.store.versions.steps(new)
    assert steps[1].thought == HINT and steps[1].source == "human"
    origin = steps[1].edit.origin
    assert origin["critic_model"] == "scripted-model" and len(origin["critic_prompt_hash"]) == 64
    kinds = [
        toy.store.db.execute("select kind from rollout_groups where id = ?", [g]).fetchone()[0]
        for g in origin["whatif_groups"]
    ]
    assert kinds == ["control", "treatment"] and origin["verdict"].startswith("proven")
    shown = cli_json(capsys, "show", "1", "--version", str(new), "--db", str(toy.db))
    assert shown[1]["edit"]["origin"] == origin
    # the jsonl export carries it
    out_file = toy.db.parent / "out.jsonl"
    code, _, err = cli(capsys, "export", "1", "--format", "jsonl", "--out", str(out_file), "--db", str(toy.db))
    text = out_file.read_text(encoding="utf-8")
    assert code == 0, err
    assert '"origin"' in text and origin["critic_prompt_hash"] in text


def test_a_candidate_stating_the_gold_answer_is_flagged_and_not_verified(toy, capsys):
    def agent(body: dict) -> str:
        prompt = body.get("prompt") or ""
        if CRITIC_MARK in prompt:
            assert "1650" not in prompt.split("Trajectory:")[0]  # the gold answer never reaches the critic
            return json.dumps(
                {
                    "candidates": [
                        {"step": 1, "kind": "rewrite_thought", "text": "The answer is 1,650.", "rationale": "leak"},
                        {
                            "step": 1,
                            "kind": "rewrite_thought",
                            "text": "I should search Marrowgate.",
                            "rationale": "ok",
                        },
                    ]
                }
            )
        return " I guess.\nAction 1: Finish[1712]" if prompt.endswith("Thought 1:") else " Finish[1712]"

    toy.llm.set_responder(agent)
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    assert not toy.engine.run(v.id).success
    out = cli_json(capsys, "suggest", "1", "--verify", "2", "--db", str(toy.db))
    leak = next(c for c in out["candidates"] if c["number"] == 1)
    assert leak["leaks_answer"] is True and leak["proven"] is False and leak["treatment"] is None
    assert "leaks the answer" in leak["verdict"] and leak["rank"] == 2
    other = next(c for c in out["candidates"] if c["number"] == 2)
    assert other["leaks_answer"] is False and other["treatment"]["n"] == 2
    groups = toy.store.db.execute("select count(*) from rollout_groups where kind = 'treatment'").fetchone()[0]
    assert groups == 1  # only the clean candidate was verified


@pytest.mark.parametrize(
    "argv, message",
    [
        (["suggest"], "give an episode"),
        (["suggest", "1", "--candidates", "0"], "--candidates must be between 1"),
        (["suggest", "1", "--verify", "0"], "--verify must be between 1"),
        (["suggest", "1", "--accept", "1"], "has no suggestions yet"),
        (["suggest", "1", "--limit", "3"], "--limit is for --experiment"),
        (["suggest", "--experiment", "nope", "--where", "failed"], "nope"),
        (["suggest", "--experiment", "x"], "--where failed"),
        (["suggest", "--experiment", "x", "--where", "failed", "--accept", "1"], "are for one episode"),
        (["suggest", "1", "--accept-all-proven"], "--accept-all-proven is for --experiment"),
        (["suggest", "1", "--confirm", "3"], "--confirm is for --experiment"),
        (
            ["suggest", "--experiment", "x", "--where", "failed", "--confirm", "3"],
            "--confirm is for --accept-all-proven",
        ),
        (["suggest", "1", "--critic-prompt", "/nonexistent/t.txt"], "cannot read the critic prompt"),
    ],
)
def test_bad_input_is_one_line(toy, capsys, argv, message):
    fail_episode(toy)
    code, out, err = cli(capsys, *argv, "--db", str(toy.db))
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


def test_a_critic_prompt_file_replaces_the_template(toy, capsys, tmp_path):
    fail_episode(toy)
    f = tmp_path / "mine.txt"
    f.write_text(f"{CRITIC_MARK} (mine).\n{{transcript}}\nGold? {{task}}\n{{nope}}\n", encoding="utf-8")
    code, text, _ = cli(capsys, "suggest", "1", "--show-prompt", "--critic-prompt", str(f), "--db", str(toy.db))
    assert code == 0 and text.startswith(f"{CRITIC_MARK} (mine).\nStep 1: think:") and "{nope}" in text


def test_the_answer_is_read_leniently_and_the_verdict_needs_both_tests():
    from agent.critic_dialogue import SuggestError, parse_answer
    from agent.suggest import verdict

    one = {"step": 1, "kind": "rewrite_thought", "text": "x", "rationale": "y"}
    for text in (
        json.dumps({"candidates": [one]}),
        "```json\n" + json.dumps({"candidates": [one]}) + "\n```",
        "Sure! {not json} then " + json.dumps({"note": 1, "candidates": [one, "junk"]}) + " bye",
    ):
        assert parse_answer(text) == [one]
    with pytest.raises(SuggestError, match="nothing was written"):
        parse_answer('{"candidate": []}')
    assert verdict(0.6, (0.22, 0.84), 0.003, 0.99) == ("proven", "proven: +60 points [+22, +84]; one-sided p = 0.0030")
    assert verdict(0.1, (-0.25, 0.42), 0.3, 0.7) == (
        "not shown",
        "not shown: +10 points [-25, +42]; one-sided p = 0.30",
    )
    assert verdict(1.0, (0.21, 1.0), 0.1)[0] == "not shown"  # the interval alone is not enough
    assert verdict(None, None, None) == ("not shown", "not shown: no finished rollouts")


def test_leaks_answer_uses_the_scorers_normalisation():
    from agent.critic_dialogue import leaks_answer
    from envs.registry import family

    norm = family("hotpotqa").qa.normalize
    assert leaks_answer("I think it is THE Sel river.", "the Sel", norm)
    assert not leaks_answer("Selby is a town.", "Sel", norm)  # whole words only
    assert not leaks_answer("anything", None, norm)


def test_a_chat_critic_is_asked_for_json_and_show_prompt_is_the_message_sent(toy, capsys):
    failed = fail_episode(toy)
    failed.critic = critic_json(IDLE)
    db_ = str(toy.db)
    out = cli_json(
        capsys, "suggest", "1", "--verify", "1", "--critic-api-style", "chat", "--critic-model", "judge", "--db", db_
    )
    assert out["critic"]["model"] == "judge" and out["critic"]["api_style"] == "chat"
    (req,) = [r for r in toy.llm.requests if "messages" in (r.body or {})]
    assert req.body["response_format"] == {"type": "json_object"} and req.body["model"] == "judge"
    code, shown, _ = cli(
        capsys,
        "suggest",
        "1",
        "--critic-api-style",
        "chat",
        "--critic-model",
        "judge",
        "--show-prompt",
        "--verify",
        "1",
        "--db",
        db_,
    )
    assert shown == req.body["messages"][0]["content"] and shown.endswith("Answer with the JSON object only.")


def test_a_server_without_json_mode_is_asked_again_without_it(toy, capsys):

    failed = fail_episode(toy)
    inner = failed.critic = critic_json(IDLE)

    def strict(body):
        if "response_format" in body:
            return Reply(status=400, message="unsupported parameter: response_format")
        return failed(body)

    toy.llm.set_responder(strict)
    out = cli_json(capsys, "suggest", "1", "--verify", "1", "--critic-api-style", "chat", "--db", str(toy.db))
    assert [c["text"] for c in out["candidates"]] == [IDLE["text"]] and inner


def test_verify_n_prints_the_smallest_effect_it_detects_and_the_test_it_uses(toy, capsys):
    """Issue 40, item 3: the output names the procedure and what --verify N can detect with
    80% power at the control's rate."""
    from trajectory.exact2x2 import min_detectable_effect

    failed = fail_episode(toy)
    failed.critic = critic_json(IDLE, GOOD)
    code, text, err = cli(capsys, "suggest", "1", "--candidates", "2", "--verify", "5", "--db", str(toy.db))
    assert code == 0, err
    assert "test: Boschloo's exact unconditional test and the interval that inverts it" in text
    one = math.ceil(min_detectable_effect(0.0, 5, 5) * 100 - 1e-9)
    two = math.ceil(min_detectable_effect(0.0, 5, 5, alpha_one=0.0125) * 100 - 1e-9)
    assert (
        f"with --verify 5 at step 1's control rate 0% (0/5): 80% power to prove a rise of +{one} points or "
        f"more (one-sided 0.025); the best of 2 candidates (Holm, 0.025/2): a rise of +{two} points"
    ) in text
    assert "proven = lower bound > 0 and the one-sided p adjusted by Holm over 2 < 0.025" in text
