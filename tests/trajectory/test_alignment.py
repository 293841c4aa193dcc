"""Compare's alignment by step identity (trajectory/alignment.py), on versions the real engine
made with each kind of edit (toy environments, scripted model)."""

from __future__ import annotations

from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.alignment import align_versions, carried_map, person_edits
from trajectory.records import AgentConfig

WANDER = [
    " think: I need a mug; it may be in the cabinet.",
    " go to shelf 1",
    " go to table 1",
    " think: Nothing here. I should look elsewhere.",
    " go to cabinet 1",
    " open cabinet 1",
    " take mug 1 from cabinet 1",
    " go to table 1",
]


def _cfg(llm):
    return AgentConfig(model="scripted-model", base_url=llm.base_url, max_retries=0, timeout_s=5, cache=False)


def _wandered(toy):
    toy.llm.push(*WANDER)
    ep, v = toy.engine.start_episode(ROOM_TASK, _cfg(toy.llm))
    toy.engine.run(v.id, max_steps=len(WANDER))
    return ep, toy.store.versions.get(v.id)


def _rows(toy, a, b):
    va, vb = toy.store.versions.get(a), toy.store.versions.get(b)
    return align_versions(toy.store.versions.steps(a), toy.store.versions.steps(b), va.edits, vb.edits)


def kinds(rows):
    return [r.kind for r in rows]


def test_deleted_thought_with_kept_steps_is_one_row_and_the_rest_match(toy):
    ep, v = _wandered(toy)
    new = toy.engine.editor.edit(v.id, 4, "delete_thought", keep_rest=True)
    rows = _rows(toy, v.id, new.id)
    assert kinds(rows) == ["same"] * 3 + ["deleted"] + ["carried"] * 4
    d = rows[3]
    assert d.left.index == 4 and d.right is None and d.deleted_text == "Nothing here. I should look elsewhere."
    assert [(r.left.index, r.right.index) for r in rows[4:]] == [(5, 4), (6, 5), (7, 6), (8, 7)]
    assert person_edits(rows) == 1 and sum(r.differs for r in rows) == 1
    # the other way round: the step exists only on the right, still "deleted"
    back = _rows(toy, new.id, v.id)
    assert kinds(back)[3] == "deleted" and back[3].left is None and back[3].right.index == 4


def test_inserted_thought_is_one_sided_not_a_rewrite_of_the_old_step(toy):
    ep, v = _wandered(toy)
    new = toy.engine.editor.edit(v.id, 3, "insert_thought", "Hint: the mug is in the cabinet.", keep_rest=True)
    rows = _rows(toy, v.id, new.id)
    assert kinds(rows) == ["same", "same", "inserted"] + ["carried"] * 6
    assert rows[2].left is None and rows[2].right.thought == "Hint: the mug is in the cabinet."
    assert rows[3].left.action == rows[3].right.action == "go to table 1"
    assert person_edits(rows) == 1


def test_regenerated_steps_after_an_edit_are_marked_not_diffed(toy):
    ep, v = _wandered(toy)
    toy.llm.push(" go to cabinet 1", " open cabinet 1")
    new = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "The mug is in the cabinet.", keep_rest=False)
    toy.engine.run(new.id, max_steps=2)
    rows = _rows(toy, v.id, new.id)
    assert kinds(rows) == ["edited", "regenerated", "regenerated"] + ["only"] * 5
    assert (
        rows[1].after_edit == 1 and rows[1].left.action == "go to shelf 1" and rows[1].right.action == "go to cabinet 1"
    )
    assert rows[-1].right is None and rows[-1].left.index == 8
    assert person_edits(rows) == 1


def test_delete_then_regenerate_and_chains_of_kept_edits(toy):
    ep, v = _wandered(toy)
    toy.llm.push(" go to cabinet 1")
    gone = toy.engine.editor.edit(v.id, 4, "delete_thought", keep_rest=False)
    toy.engine.step(gone.id)
    rows = _rows(toy, v.id, gone.id)
    assert kinds(rows)[:5] == ["same"] * 3 + ["deleted", "regenerated"] and rows[4].after_edit == 4
    # two kept edits in a row: carried copies of carried copies still match the first version
    a = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "A mug. Cabinet?", keep_rest=True)
    b = toy.engine.editor.edit(a.id, 4, "rewrite_thought", "Still no mug.", keep_rest=True)
    rows = align_versions(
        toy.store.versions.steps(v.id),
        toy.store.versions.steps(b.id),
        v.edits,
        toy.store.versions.get(b.id).edits,
        carried_map(toy.store.versions.steps(a.id)),
    )
    assert kinds(rows) == ["edited", "carried", "carried", "edited", "carried", "carried", "carried", "carried"]
    assert person_edits(rows) == 2


def test_an_insertion_among_regenerated_steps_stays_in_place(toy):
    ep, v = _wandered(toy)
    toy.llm.push(" go to cabinet 1", " open cabinet 1")
    a = toy.engine.editor.edit(v.id, 2, "rewrite_action", "go to cabinet 1")
    toy.engine.run(a.id, max_steps=1)
    b = toy.engine.editor.edit(a.id, 4, "insert_thought", "Hint: take the mug now.", keep_rest=False)
    rows = _rows(toy, v.id, b.id)
    assert kinds(rows) == ["same", "edited", "regenerated", "inserted"] + ["only"] * 5
    assert rows[2].after_edit == 2 and rows[3].right.index == 4 and rows[4].left.index == 4


def test_wikipedia_deleted_thought_keeps_its_step_as_an_edit(toy):
    toy.llm.push(
        " I should search Velmora.\nAction 1: Search[Velmora]", " Look up the capital.\nAction 2: Lookup[capital]"
    )
    ep, v = toy.engine.start_episode(WIKI_TASK, _cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    new = toy.engine.editor.edit(v.id, 1, "delete_thought", keep_rest=True)
    rows = _rows(toy, v.id, new.id)
    assert kinds(rows) == ["edited", "carried"]
    assert rows[0].right.thought is None and rows[0].left.thought == "I should search Velmora."
    assert person_edits(rows) == 1
