"""Issue 13 in the app: the Episodes page's search box (escaped highlighted snippets that
open the Editor at the step), signal badges in the Editor, and failure modes pre-filled from
the signals in the annotation form but saved only by the person."""

from __future__ import annotations

from app_pages.search_box import hit_html
from app_pages.signal_badges import badge_text
from sessions import annotations
from tests.app_helpers import cfg, click, markdownish, ok, texts
from tests.toy_envs import ROOM_TASK

EVIL_ACTION = "go to <script>alert(1)</script> 1"


def _looping(toy):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=4))
    for action in ("go to shelf 1", "go to shelf 1", EVIL_ACTION, "go to table 1"):
        toy.engine.human_step(v.id, action=action)
    return ep, v


def test_hit_html_escapes_and_marks():
    html = hit_html("a <b>x</b> mug", [(11, 14)])
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<mark>mug</mark>" in html and "<b>" not in html
    assert badge_text(["repeated_action", "step_limit"]) == "⚑ repeated action · step limit" and badge_text([]) == ""


def test_search_box_hits_open_the_editor_at_the_step(app):
    toy, make = app
    ep, v = _looping(toy)
    at = make()
    at.text_input(key="search_q").set_value("script")
    ok(at.run())
    assert f"episode {ep.id} · v{v.id} · step 3 · action" in texts(at)
    shown = [h.proto.body for h in at.get("html")]
    assert any("go to &lt;<mark>script</mark>&gt;alert(1)&lt;/<mark>script</mark>&gt; 1" in body for body in shown), (
        shown
    )
    assert not any("<script>" in body for body in shown)
    at.text_input(key="search_q").set_value('"((')
    ok(at.run())
    assert any(t.startswith("the search query") for t in texts(at))
    at.text_input(key="search_q").set_value("[shelf 1]")  # text copied from a trajectory: searched literally
    ok(at.run())
    assert f"episode {ep.id} · v{v.id} · step 1 · action" in texts(at)
    at.text_input(key="search_q").set_value("shelf")
    at.selectbox(key="search_signal").set_value("repeated_action")
    ok(at.run())
    places = [t for t in texts(at) if t.startswith("episode ")]
    at = click(at, f"search_open_{places.index(f'episode {ep.id} · v{v.id} · step 2 · action')}")
    assert [t.value for t in at.title] == ["Editor"]
    # the hit's step (2) is open in the Editor, no other
    assert at.radio(key=f"ed_kind_{v.id}_2") and not [
        r for r in at.radio if r.key != f"ed_kind_{v.id}_2" and r.key.startswith("ed_kind_")
    ]


def test_editor_badges_and_suggested_failure_modes(app):
    toy, make = app
    ep, v = _looping(toy)
    at = make("editor", episode=ep.id)
    captions = [c.value for c in at.caption]
    assert "⚑ repeated action" in captions
    assert any(c.startswith("⚑ ") and "step limit" in c for c in captions)
    assert not any("<script>" in m for m in markdownish(at))
    # pre-filled from the signals, not saved until the person saves
    assert at.multiselect(key=f"ed-modes-{v.id}").value == ["reasoning_error"]
    assert annotations.version_annotation(toy.store, v.id) is None
    ok(at.button[[b.label for b in at.button].index("Save annotation")].click().run())  # the person confirms
    assert annotations.version_annotation(toy.store, v.id).failure_modes == ["reasoning_error"]
    # once annotated, the person's choice is the form's state, not the suggestion
    annotations.annotate_version(toy.store, v.id, failure_modes=[])
    at = make("editor", episode=ep.id)
    assert at.multiselect(key=f"ed-modes-{v.id}").value == []


def test_a_task_id_from_the_editor_header_finds_its_episode(app):
    """Issue 28 #11: the id the Editor's header shows, pasted in the search box, is a hit."""
    toy, make = app
    ep, v = _looping(toy)
    at = make()
    at.text_input(key="search_q").set_value(ROOM_TASK.id)
    ok(at.run())
    assert f"episode {ep.id} · v1 · task id" in texts(at), texts(at)
