"""Annotations (versioned, with annotator and time), exemplar sets, and the closed loop:
correct an episode, mark it exemplar-ready, add it to a set, run a new episode with that
set - the prompt the model receives contains the corrected text."""

from __future__ import annotations

import json

import pytest

from react_editor.main import main as cli
from sessions import annotations, exemplar_sets
from tests.export_support import ROOM_SCRIPT, WIKI_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory import formats

FIX = "CORRECTED: the mug is in cabinet 1, which I must open first."


def test_version_annotations_are_versioned_latest_wins(toy, monkeypatch):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    monkeypatch.setenv("REACT_EDITOR_USER", "alice")
    a1 = annotations.annotate_version(
        toy.store, v.id, verdict="failure", add_failure_modes=["Hallucination"], notes="n1"
    )
    a2 = annotations.annotate_version(
        toy.store, v.id, by="bob", add_failure_modes=["repetitive loop"], exemplar_ready=True
    )
    assert (a1.annotator, a2.annotator) == ("alice", "bob")
    latest = annotations.version_annotation(toy.store, v.id)
    assert latest.verdict == "failure" and latest.notes == "n1" and latest.exemplar_ready
    assert latest.failure_modes == ["hallucination", "repetitive_loop"]
    hist = annotations.version_history(toy.store, v.id)
    assert [h.annotator for h in hist] == ["alice", "bob"] and hist[0].failure_modes == ["hallucination"]
    assert hist[0].created_at < hist[1].created_at
    # an unchanged state adds no row; bad input is one clear error and writes nothing
    assert annotations.annotate_version(toy.store, v.id, by="carol", verdict="failure").id == a2.id
    with pytest.raises(annotations.AnnotationError, match="unknown failure mode"):
        annotations.annotate_version(toy.store, v.id, add_failure_modes=["typo_mode"])
    with pytest.raises(annotations.AnnotationError, match="unknown verdict"):
        annotations.annotate_version(toy.store, v.id, verdict="great")
    assert len(annotations.version_history(toy.store, v.id)) == 2
    assert annotations.exemplar_ready_versions(toy.store) == {v.id}
    annotations.annotate_version(toy.store, v.id, exemplar_ready=False)
    assert annotations.exemplar_ready_versions(toy.store) == set()


def test_step_tags_history(toy):
    toy.llm.push(*ROOM_SCRIPT[:2])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    s1 = toy.store.versions.steps(v.id)[0]
    annotations.tag_step(toy.store, s1.id, by="alice", add=["Good subgoal", "hallucinated"], note="plan is fine")
    annotations.tag_step(toy.store, s1.id, by="bob", remove=["hallucinated"])
    cur = annotations.step_annotation(toy.store, s1.id)
    assert cur.tags == ["good_subgoal"] and cur.note == "plan is fine" and cur.annotator == "bob"
    assert [h.tags for h in annotations.step_history(toy.store, s1.id)] == [
        ["good_subgoal", "hallucinated"],
        ["good_subgoal"],
    ]
    with pytest.raises(annotations.AnnotationError, match="too long"):
        annotations.tag_step(toy.store, s1.id, add=["x" * 65])
    with pytest.raises(annotations.AnnotationError, match="empty"):
        annotations.tag_step(toy.store, s1.id, add=["   "])
    assert len(annotations.step_history(toy.store, s1.id)) == 2


def test_closed_loop_alfworld(toy):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    assert toy.engine.run(v.id).success
    fixed = toy.engine.editor.edit(v.id, 1, "rewrite_thought", FIX, keep_rest=True)
    annotations.annotate_version(toy.store, fixed.id, by="alice", verdict="success", exemplar_ready=True)
    exemplar_sets.create_set(toy.store, "fixed", "alfworld")
    entry = exemplar_sets.add_version(toy.store, "fixed", fixed.id)
    assert entry.key == "react_put_0"
    env, d = exemplar_sets.prompt_dict(toy.store, "fixed")
    assert env == "alfworld" and list(d) == ["react_put_0"]
    assert d["react_put_0"] == formats.render_alfworld(ROOM_TASK.text, toy.store.versions.steps(fixed.id))
    # a new episode with that set: the exact prompt and the request the model gets
    ep2, v2 = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, exemplar_set="fixed"))
    prompt = toy.engine.prompts.prompt(v2.id)
    assert prompt == formats.alfworld_prompt([d["react_put_0"]], ROOM_TASK.text, [])
    assert f"> think: {FIX}\nOK.\n" in prompt and "I need to find a mug, then put it" not in prompt
    toy.llm.push(" go to cabinet 1")
    toy.engine.step(v2.id)
    sent = toy.llm.completion_requests[-1].body["prompt"]
    assert sent == prompt and FIX in sent


def test_closed_loop_wikipedia(toy):
    toy.llm.push(*WIKI_SCRIPT)
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    assert toy.engine.run(v.id).success
    fixed = toy.engine.editor.edit(v.id, 2, "rewrite_thought", FIX, keep_rest=True)
    annotations.annotate_version(toy.store, fixed.id, exemplar_ready=True)
    exemplar_sets.create_set(toy.store, "wiki-fixed", "hotpotqa")
    exemplar_sets.add_version(toy.store, "wiki-fixed", fixed.id)
    env, d = exemplar_sets.prompt_dict(toy.store, "wiki-fixed")
    assert list(d) == ["webthink_simple1"]
    block = d["webthink_simple1"]
    assert block.startswith("\nQuestion: When was the capital of Velmora founded?\nThought 1:")
    assert f"Thought 2: {FIX}\nAction 2: Search[Marrowgate]\n" in block
    assert block.endswith("Action 4: Finish[1650]\n")  # the Finish observation is dropped
    ep2, v2 = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm, exemplar_set="wiki-fixed"))
    toy.llm.push(" I search Velmora.\nAction 1: Search[Velmora]")
    toy.engine.step(v2.id)
    sent = toy.llm.completion_requests[-1].body["prompt"]
    assert sent == formats.HOTPOTQA_INSTRUCTION + block + WIKI_TASK.text + "\nThought 1:"


def test_set_rules_and_replacement(toy):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    exemplar_sets.create_set(toy.store, "s1", "alfworld")
    exemplar_sets.add_version(toy.store, "s1", v.id)
    v2 = toy.engine.editor.edit(v.id, 1, "rewrite_thought", FIX, keep_rest=True)
    e2 = exemplar_sets.add_version(toy.store, "s1", v2.id)  # same episode: replaces in place
    assert [(e.key, e.version_id) for e in exemplar_sets.entries(toy.store, "s1")] == [("react_put_0", v2.id)]
    assert e2.pos == 0
    ep_w, vw = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    with pytest.raises(exemplar_sets.ExemplarSetError, match="is for alfworld"):
        exemplar_sets.add_version(toy.store, "s1", vw.id)
    with pytest.raises(exemplar_sets.ExemplarSetError, match="exists already"):
        exemplar_sets.create_set(toy.store, "s1", "alfworld")
    with pytest.raises(exemplar_sets.ExemplarSetError, match="invalid"):
        exemplar_sets.create_set(toy.store, "builtin", "alfworld")
    assert exemplar_sets.remove(toy.store, "s1", key="react_put_0") == 1
    assert exemplar_sets.prompt_dict(toy.store, "s1") == ("alfworld", {})
    # removal is recorded, not deleted
    assert (
        toy.store.db.execute("select count(*) from exemplar_set_entries where removed_at is not null").fetchone()[0]
        == 2
    )


def test_cli_annotate_tag_exemplars(toy, capsys, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    fixed = toy.engine.editor.edit(v.id, 1, "rewrite_thought", FIX, keep_rest=True)
    capsys.readouterr()
    assert (
        cli(
            [
                "annotate",
                str(ep.id),
                "--verdict",
                "success",
                "--mode",
                "reasoning_error",
                "--exemplar-ready",
                "--note",
                "fixed plan",
                "--by",
                "dana",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["version_id"] == fixed.id and out["annotator"] == "dana" and out["exemplar_ready"] is True
    assert cli(["tag", f"{ep.id}:{v.id}", "--step", "1", "--add", "hallucinated", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tags"] == ["hallucinated"]
    assert cli(["tag", str(ep.id), "--step", "99", "--add", "x"]) == 2
    assert "no step 99" in capsys.readouterr().err
    assert cli(["annotate", str(ep.id), "--mode", "nonsense"]) == 2
    assert "unknown failure mode" in capsys.readouterr().err
    assert cli(["exemplars", "add", "mine", "--exemplar-ready", "--all-versions", "--create", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"version": fixed.id, "ref": f"{ep.id}:2", "key": "react_put_0", "pos": 0}
    ]
    assert cli(["exemplars", "show", "mine", "--prompts", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["env"] == "alfworld" and FIX in shown["prompts"]["react_put_0"]
    assert cli(["annotate", str(ep.id), "--history", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
