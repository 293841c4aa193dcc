"""The fixed part of a version's prompts (instruction, exemplars, task) is built once per
episode and exemplar revision, not on every model call; the bytes sent stay those the
transcript words from scratch, and a changed exemplar set is picked up by the versions that
pin its new revision."""

from __future__ import annotations

import pytest

from agent import exemplars
from envs.registry import family
from envs.transcript.command import CommandTranscript
from envs.transcript.numbered import NumberedTranscript
from sessions import exemplar_sets
from tests.engine_scripts import ROOM_SCRIPT, WIKI_SCRIPT, cfg
from tests.toy_envs import ROOM_EXEMPLARS, ROOM_TASK, WIKI_EXEMPLARS, WIKI_TASK


def _count(monkeypatch, owner, name: str) -> list:
    """Record every call of `owner.name` (still calling it)."""
    calls: list = []
    real = getattr(owner, name)

    def counted(*args, **kw):
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_the_prefix_is_built_once_per_episode_and_revision(toy, monkeypatch):
    exemplar_sets.create_set(toy.store, "mine", "alfworld")
    for key in ("react_put_0", "react_put_1"):
        exemplar_sets.add_raw(toy.store, "mine", key, ROOM_EXEMPLARS[key])
    built = _count(monkeypatch, CommandTranscript, "fixed_prefix")
    read = _count(monkeypatch, exemplar_sets, "revision_prompts")  # the set's exemplars read and decoded
    toy.llm.push(*ROOM_SCRIPT[:5])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, exemplar_set="mine"))
    assert toy.engine.run(v.id, max_steps=5).added == 5
    assert len(toy.llm.completion_requests) == 5 and len(built) == 1 and len(read) == 1
    assert toy.engine.prompts.prompt(v.id) and len(built) == 1  # `show --prompt` uses it too

    # the bytes are those the transcript words without the cache
    tr, steps = family("alfworld").transcript, toy.engine.steps(toy.store.versions.get(v.id))
    whole = tr.prompt(tr.exemplars(ROOM_EXEMPLARS, ROOM_TASK.type, "react"), ROOM_TASK.text, steps[:4])
    assert toy.llm.completion_requests[-1].prompt == whole
    assert toy.engine.prompts.prompt(v.id) == tr.prompt(
        tr.exemplars(ROOM_EXEMPLARS, ROOM_TASK.type, "react"), ROOM_TASK.text, steps
    )

    # the set changes: a version that pins its new revision gets the new exemplars
    exemplar_sets.remove(toy.store, "mine", key="react_put_1")
    exemplar_sets.add_raw(toy.store, "mine", "react_put_1", ROOM_EXEMPLARS["react_put_1"].replace("pen", "quill"))
    child = toy.engine.editor.reconfigure(v.id, {"exemplar_set": "mine"})
    assert child.id != v.id
    toy.llm.push(ROOM_SCRIPT[5])
    toy.engine.step(child.id)
    assert "quill" in toy.llm.completion_requests[-1].prompt and len(built) == 2
    assert "quill" not in toy.engine.prompts.prompt(v.id) and len(built) == 2  # the old revision: still kept


def test_numbered_and_answer_prompts_are_built_once(toy, monkeypatch):
    built = _count(monkeypatch, NumberedTranscript, "fixed_prefix")
    toy.llm.push(*WIKI_SCRIPT)
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    sent = [r.prompt for r in toy.llm.completion_requests]
    assert len(sent) == 5 and len(built) == 1  # four steps, one with the paper's action-only fallback
    tr = family("hotpotqa").transcript
    assert all(p.startswith(tr.instruction + tr.block(WIKI_EXEMPLARS, "react") + WIKI_TASK.text + "\n") for p in sent)

    exemplar_sets.create_set(toy.store, "qa", "hotpotqa")
    exemplar_sets.add_raw(toy.store, "qa", "cotqa_simple6", "Question: Q0\nThought: T0\nAnswer: A0\n\n")
    encoded = _count(monkeypatch, exemplars, "qa_exemplars")
    ep2, v2 = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm, exemplar_set="qa"))
    first = toy.engine.prompts.qa_prompt(v2.id, "cot")
    for _ in range(5):  # CoT-SC: every sample is sent the same prompt
        assert toy.engine.prompts.qa_prompt(v2.id, "cot") == first
    assert len(encoded) == 1 and first[0].startswith("Question: Q0\nThought: T0\nAnswer: A0\n\n" + WIKI_TASK.text)


def test_a_set_not_pinned_yet_is_read_as_it_is_now(toy):
    exemplar_sets.create_set(toy.store, "mine", "alfworld")
    for key in ("react_put_0", "react_put_1"):
        exemplar_sets.add_raw(toy.store, "mine", key, ROOM_EXEMPLARS[key])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, exemplar_set="mine"))
    with toy.store.transaction():  # (a version whose prompts were never used)
        toy.store.db.execute("update versions set exemplar_rev = null where id = ?", [v.id])
    assert "pen" in toy.engine.prompts.prompt(v.id)
    exemplar_sets.remove(toy.store, "mine", key="react_put_1")
    exemplar_sets.add_raw(toy.store, "mine", "react_put_1", ROOM_EXEMPLARS["react_put_1"].replace("pen", "quill"))
    assert "quill" in toy.engine.prompts.prompt(v.id)


@pytest.mark.parametrize("style", ["react", "act"])
def test_a_transcript_words_the_same_bytes_with_or_without_the_prefix(toy, style):
    tr = family("alfworld").transcript
    prompts = ROOM_EXEMPLARS
    whole = tr.request(prompts, ROOM_TASK, [], style, None)
    fixed = tr.request(prompts, ROOM_TASK, [], style, None, fixed=tr.fixed_prefix(prompts, ROOM_TASK, style))
    assert whole == fixed
