"""Every window of a long version opens in the Editor whatever edits its path holds: each
edit kind (rewrite, delete and insert a thought, rewrite an action) and a thought deleted twice
at the same place. Issue 39 item 2: a deleted thought's marker was drawn twice with one key
(StreamlitDuplicateElementKey) when its window was opened in full."""

from __future__ import annotations

from collections import Counter

from app_pages.editor_steps import window_label, windows
from tests.app_helpers import cfg, ok
from tests.toy_envs import ROOM_TASK


def _turns(engine, vid: int, n: int) -> None:
    """n more turns on a version: thought turns at 1, 2 and every third one after."""
    for i in range(n):
        if i % 3 == 0 or i == 1:
            engine.human_step(vid, thought=f"I should look around ({i}).")
        else:
            engine.human_step(vid, action="go to shelf 1" if i % 2 else "go to table 1")


def _thoughts(engine, vid: int) -> list[int]:
    """The steps of a version that are thought turns."""
    return [s.index for s in engine.steps(engine.store.versions.get(vid)) if s.thought and not s.action]


def _keys(at) -> list[str]:
    """Every widget and block key drawn on the page (block ids carry a user key as a suffix)."""
    out = []

    def walk(node):
        k = getattr(node, "key", None)
        if k:
            out.append(k)
        for c in getattr(node, "children", {}).values():
            walk(c)

    walk(at._tree)
    return out


def _walk_windows(make, ep_id: int, vid: int, n: int) -> int:
    """Open every "Earlier steps in full" window of the version; the number opened."""
    at = make("editor", episode=ep_id, version=vid)
    wins = windows(n - 30)
    for w in wins:
        at.session_state[f"older_win_{vid}"] = window_label(w)
        ok(at.run())
        dup = [k for k, c in Counter(_keys(at)).items() if c > 1]
        assert not dup, dup
    return len(wins)


def test_every_window_of_long_versions_with_every_edit_kind_opens(app):
    toy, make = app
    eng = toy.engine
    ep, v1 = eng.start_episode(ROOM_TASK, cfg(toy.llm))
    _turns(eng, v1.id, 46)
    steps = eng.steps(eng.store.versions.get(v1.id))
    assert _thoughts(eng, v1.id)[:2] == [1, 2] and len(steps) == 46
    # a deleted thought at step 1 (the crash), then the new step 1's thought deleted too
    d1 = eng.editor.edit(v1.id, 1, "delete_thought", keep_rest=True)
    d2 = eng.editor.edit(d1.id, 1, "delete_thought", keep_rest=True)
    d3 = eng.editor.edit(d2.id, _thoughts(eng, d2.id)[2], "delete_thought", keep_rest=True)
    rw = eng.editor.edit(d3.id, _thoughts(eng, d3.id)[3], "rewrite_thought", "A better thought.", keep_rest=True)
    ins = eng.editor.edit(rw.id, 5, "insert_thought", "A hint.", keep_rest=True)
    act = eng.editor.edit(ins.id, 7, "rewrite_action", "go to shelf 1")
    _turns(eng, act.id, 38)
    opened = 0
    for v in (d1, d2, d3, rw, ins, act):
        v = eng.store.versions.get(v.id)
        n = len(eng.steps(v))
        assert n > 40, (v.id, n)
        opened += _walk_windows(make, ep.id, v.id, n)
    assert opened >= 6


def test_a_familys_option_and_custom_field_never_share_a_key_with_the_form(app, monkeypatch):
    """A plugin's custom field `name` (or an option and a field of one key) drew a second
    widget under the "Episode name" box's key: the Episodes page crashed."""
    from dataclasses import replace

    from envs import registry
    from envs.base import CustomField, Option

    toy, make = app
    fams = dict(registry._FAMILIES)
    fams["alfworld"] = replace(
        fams["alfworld"],
        custom_fields=(CustomField("name", "Name"), CustomField("game", "Game")),
        options=(Option("game", "--game", "Game option"), Option("model", "--model", "Model option")),
    )
    monkeypatch.setattr(registry, "_FAMILIES", fams)
    at = make("episodes")
    at.selectbox(key="new_env").set_value("alfworld").run()
    ok(at.radio(key="new_how").set_value("Custom").run())
    labels = [t.label for t in at.text_input]
    assert {"Name", "Game", "Game option", "Model option", "Episode name (optional)"} <= set(labels), labels


def test_a_step_committed_before_the_page_read_the_version_is_drawn_once(app, monkeypatch):
    """A run's step job can commit its step before the page reads the version and report it
    after: the page drew the step, then drew its box again under the same keys."""
    from app_pages import editor_body
    from tests.app_helpers import WIN, click

    toy, make = app
    toy.llm.push(*WIN)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.step(v.id)
    real, calls = editor_body.settle, []

    def settle(page, job):  # the job's report names a step the page drew already, then its own
        steps = real(page, job)
        calls.append(1)
        return (toy.engine.steps(toy.store.versions.get(v.id))[:1] + steps) if len(calls) == 1 else steps

    monkeypatch.setattr(editor_body, "settle", settle)
    at = make("editor", episode=ep.id)
    at.number_input(key="run_n").set_value(3)
    click(at, "btn_run_n")
    for _ in range(3):
        ok(at.run())
    assert calls and len(toy.store.versions.steps(v.id)) == 4
    dup = [k for k, c in Counter(_keys(at)).items() if c > 1]
    assert not dup, dup
