"""The version tree: every edit kind branches and leaves old versions byte-identical;
resume puts the environment in the exact state (token, snapshot and replay paths); a replay
mismatch is reported; storage grows only with what is new."""

from __future__ import annotations

import json

import pytest

from agent.engine import Engine, EngineError
from envs.base import ReplayMismatch
from tests.engine_scripts import ROOM_SCRIPT, WIKI_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK, WIKI_TASK


def dump_version(store, vid) -> str:
    v = store.versions.get(vid)
    steps = store.versions.steps(vid)
    return json.dumps(
        [v.leaf_step_id, v.edits and [e.model_dump() for e in v.edits], [s.model_dump() for s in steps]], sort_keys=True
    )


def room_version(toy, n=6):
    toy.llm.push(*ROOM_SCRIPT[:n])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=n)
    return ep, v


def test_rewrite_thought_keep_rest_carries_steps_and_keeps_old(toy):
    ep, v = room_version(toy)
    before = dump_version(toy.store, v.id)
    n_calls = len(toy.llm.requests)
    v2 = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "The mug is in cabinet 1.", keep_rest=True)
    assert dump_version(toy.store, v.id) == before
    assert len(toy.llm.requests) == n_calls  # keeping the rest calls no model
    s2 = toy.store.versions.steps(v2.id)
    s1 = toy.store.versions.steps(v.id)
    assert s2[0].thought == "The mug is in cabinet 1." and s2[0].source == "human"
    assert s2[0].edit.old_thought == s1[0].thought and s2[0].edit.replaced_step == s1[0].id
    assert [(s.action, s.observation) for s in s2[1:]] == [(s.action, s.observation) for s in s1[1:]]
    assert toy.store.versions.get(v2.id).outcome.success is True  # carried the winning end
    assert toy.store.episodes.get(ep.id).current_version == v2.id
    assert v2.parent_version == v.id and len(v2.edits) == 1


def test_rewrite_thought_regenerates_from_edit(toy):
    ep, v = room_version(toy, 3)
    toy.llm.push(" go to cabinet 1", " open cabinet 1")
    v2 = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "Check cabinet 1 first.")
    assert len(toy.store.versions.steps(v2.id)) == 1
    toy.engine.run(v2.id, max_steps=2)
    prompt = toy.llm.completion_requests[-2].body["prompt"]
    assert prompt.endswith("> think: Check cabinet 1 first.\nOK.\n>")
    assert "To solve the task" not in prompt.split("Here is the task.")[1]


def test_delete_and_insert_thought_alfworld(toy):
    ep, v = room_version(toy)
    v_del = toy.engine.editor.edit(v.id, 1, "delete_thought", keep_rest=True)
    s = toy.store.versions.steps(v_del.id)
    assert len(s) == 5 and all(x.action for x in s) and [x.index for x in s] == [1, 2, 3, 4, 5]
    assert toy.store.versions.get(v_del.id).edits[0].kind == "delete_thought"
    v_ins = toy.engine.editor.edit(v.id, 3, "insert_thought", "Now open it.", keep_rest=True)
    s = toy.store.versions.steps(v_ins.id)
    assert len(s) == 7 and s[2].thought == "Now open it." and s[3].action == "open cabinet 1"
    assert [x.index for x in s] == list(range(1, 8))
    # insert regenerate: the hint is the last step, the model continues from it
    v_ins2 = toy.engine.editor.edit(v.id, 2, "insert_thought", "Go to the cabinet.")
    assert [x.thought for x in toy.store.versions.steps(v_ins2.id)][-1] == "Go to the cabinet."
    with pytest.raises(EngineError, match="no thought"):
        toy.engine.editor.edit(v.id, 2, "delete_thought")


def test_rewrite_action_executes_in_restored_state(toy):
    ep, v = room_version(toy, 4)  # think, go cabinet, open, take
    v2 = toy.engine.editor.edit(v.id, 3, "rewrite_action", "go to table 1")
    s = toy.store.versions.steps(v2.id)
    assert s[-1].action == "go to table 1" and s[-1].observation == "On the table 1, you see nothing."
    assert s[-1].edit.old_action == "open cabinet 1"
    # the original version still resumes in its own state (holding the mug)
    toy.llm.push(" go to table 1", " put mug 1 in/on table 1")
    rep = toy.engine.run(v.id)
    assert rep.success is True
    with pytest.raises(EngineError, match="cannot be kept"):
        toy.engine.editor.edit(v.id, 3, "rewrite_action", "go to table 1", keep_rest=True)
    with pytest.raises(EngineError, match="thought"):
        toy.engine.editor.edit(v.id, 1, "rewrite_action", "go to table 1")


def test_wiki_thought_edit_makes_model_write_the_action(toy):
    toy.llm.push(*WIKI_SCRIPT)
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    v2 = toy.engine.editor.edit(v.id, 2, "rewrite_thought", "Marrowgate is the capital; search it.")
    assert toy.store.versions.get(v2.id).draft_thought == "Marrowgate is the capital; search it."
    toy.llm.push(" Search[Marrowgate]")
    rep = toy.engine.step(v2.id)
    req = toy.llm.completion_requests[-1]
    assert req.body["prompt"].endswith("Thought 2: Marrowgate is the capital; search it.\nAction 2:") and req.body[
        "stop"
    ] == ["\n"]
    st = rep.steps[0]
    assert (st.thought, st.action, st.source) == (
        "Marrowgate is the capital; search it.",
        "Search[Marrowgate]",
        "human",
    )
    assert st.edit.kind == "rewrite_thought" and toy.store.versions.get(v2.id).draft_thought is None
    # insert in Wikipedia format: a hint at step 3 without keeping the rest
    v3 = toy.engine.editor.edit(v.id, 3, "insert_thought", "Look up founded.")
    assert toy.store.versions.get(v3.id).draft_thought == "Look up founded."
    with pytest.raises(EngineError, match="belongs to a step"):
        toy.engine.editor.edit(v.id, 3, "insert_thought", "x", keep_rest=True)
    v4 = toy.engine.editor.edit(v.id, 2, "delete_thought", keep_rest=True)
    s4 = toy.store.versions.steps(v4.id)
    assert s4[1].thought is None and s4[1].action == "Search[Marrowgate]" and len(s4) == 4


def test_bad_edits_change_nothing(toy):
    ep, v = room_version(toy, 3)
    rows = (
        toy.store.db.execute("select count(*) from steps").fetchone()[0]
        + toy.store.db.execute("select count(*) from versions").fetchone()[0]
    )
    for args in [
        (9, "rewrite_thought", "x"),
        (1, "rewrite_thought", ""),
        (1, "rewrite_thought", "x" * 1_000_000),
        (2, "rewrite_thought", "x"),
        (1, "bogus", "x"),
        (0, "delete_thought", None),
    ]:
        with pytest.raises(EngineError):
            toy.engine.editor.edit(v.id, *args)
    after = (
        toy.store.db.execute("select count(*) from steps").fetchone()[0]
        + toy.store.db.execute("select count(*) from versions").fetchone()[0]
    )
    assert rows == after


def test_resume_after_restart_replays_and_checks(toy):
    ep, v = room_version(toy, 4)
    fresh = Engine(toy.store)  # a new process: no in-memory states
    toy.llm.push(" go to table 1", " put mug 1 in/on table 1")
    fresh.prompts._clients = toy.engine.prompts._clients
    rep = fresh.run(v.id)
    assert rep.success is True
    env = toy.made[-1]
    assert env.resets == 1  # replayed from a single reset


def test_resume_from_in_process_state_does_not_replay(toy):
    ep, v = room_version(toy, 4)
    env = toy.made[-1]
    before = env.steps_taken
    v2 = toy.engine.editor.branch(v.id, 2)
    toy.llm.push(" open cabinet 1")
    toy.engine.step(v2.id)
    assert env.steps_taken == before + 1  # restored from the token at step 2, no replay


def test_replay_mismatch_is_reported(toy, monkeypatch):
    ep, v = room_version(toy, 3)
    toy.engine.envs.forget_env(ep.id)
    drifting = Engine(toy.store)
    from envs import registry

    fam = registry._FAMILIES["alfworld"]
    orig = fam.make_env
    monkeypatch.setattr(
        fam, "make_env", lambda task, options, blobs=None: orig(task, {**options, "drift": True}, blobs)
    )
    with pytest.raises(ReplayMismatch, match="step 2"):
        drifting.step(v.id)
    assert len(toy.store.versions.steps(v.id)) == 3


def test_snapshot_restore_path_wiki(toy):
    toy.llm.push(*WIKI_SCRIPT[:4])
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    steps = toy.store.versions.steps(v.id)
    assert steps[-1].snapshot == {"page": "Marrowgate", "kw": None, "cnt": 0, "answer": None}
    fresh = Engine(toy.store)
    fresh.prompts._clients = toy.engine.prompts._clients
    fresh.step(v.id)  # lookup after restore from the stored snapshot, no replay
    env = [e for e in toy.made if e.kind == "hotpotqa"][-1]
    assert env.steps_taken == 1
    assert toy.store.versions.steps(v.id)[-1].observation == "(Result 1 / 1) The town was founded in 1650."


def test_edit_storage_does_not_copy_prefix(toy):
    ep, v = room_version(toy)
    n0 = toy.store.db.execute("select count(*) from steps").fetchone()[0]
    toy.engine.editor.edit(v.id, 5, "insert_thought", "Put it on the table now.")
    n1 = toy.store.db.execute("select count(*) from steps").fetchone()[0]
    assert n1 - n0 == 1


def test_foreign_and_newer_databases_are_refused(tmp_path):
    import sqlite3

    from sessions.store import Store, StoreError

    foreign = tmp_path / "foreign.db"
    c = sqlite3.connect(foreign)
    c.execute("create table people (name text)")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="not a ReAct Editor database"):
        Store(foreign)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a ReAct Editor database"):
        Store(junk)
    newer = tmp_path / "newer.db"
    s = Store(newer)
    s.db.execute("update meta set value = '999' where key = 'schema_version'")
    s.close()
    with pytest.raises(StoreError, match="newer"):
        Store(newer)


def test_migrations_apply_forward_on_old_database(tmp_path, monkeypatch):
    from sessions import schema
    from sessions.store import Store

    path = tmp_path / "old.db"
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
    Store(path).close()
    monkeypatch.undo()
    s = Store(path)
    assert int(s.db.execute("select value from meta where key='schema_version'").fetchone()[0]) == len(
        schema.MIGRATIONS
    )


def test_suggestions_before_a_step_come_from_that_state(toy):
    ep, v = room_version(toy, 4)  # think, go cabinet, open, take
    env = toy.made[-1]
    seen = []
    orig = env.admissible_actions
    env.admissible_actions = lambda: seen.append(dict(env.s)) or orig()
    toy.engine.envs.admissible_actions(v.id, before=3)
    assert seen[-1]["at"] == "cabinet 1" and seen[-1]["open"] is False  # after step 2, before "open"
    toy.engine.envs.admissible_actions(v.id)
    assert seen[-1]["holding"] == "mug 1"
    with pytest.raises(EngineError, match="no step 9"):
        toy.engine.envs.admissible_actions(v.id, before=9)


def test_insert_thought_after_last_step(toy):
    toy.llm.push(*WIKI_SCRIPT[:3])
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    v2 = toy.engine.editor.edit(v.id, 3, "insert_thought", "Look up founded.")
    assert (
        toy.store.versions.get(v2.id).draft_thought == "Look up founded." and len(toy.store.versions.steps(v2.id)) == 2
    )
    toy.llm.push(" Lookup[founded]")
    rep = toy.engine.step(v2.id)
    assert rep.steps[0].action == "Lookup[founded]" and rep.steps[0].thought == "Look up founded."
    ep, done = room_version(toy)
    with pytest.raises(EngineError, match="finished"):
        toy.engine.editor.edit(done.id, 7, "insert_thought", "too late")
