"""Issue 42 in the Editor: a step's reasoning (`reasoning_content`) is its own collapsible part,
plain text (never markdown or HTML), editable from the step's Edit panel apart from the thought;
a tools-style step shows its call."""

from __future__ import annotations

from tests.app_helpers import cfg, click, markdownish, texts
from tests.scripted_server import Reply, tool_call
from tests.toy_envs import ROOM_TASK

REASONING = "**Plan**: <b>look</b> first\n[link](http://evil.example)"


def test_reasoning_is_a_folded_plain_text_part_and_the_call_is_shown(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, api_style="tools"))
    toy.llm.push(
        Reply(text="I will look.", reasoning=REASONING),
        Reply(reasoning="now act", tool_calls=[tool_call("act", {"command": "look"})]),
    )
    toy.engine.run(v.id, max_steps=2)
    at = make("editor", episode=ep.id)
    (part, other) = [e for e in at.expander if e.label == "Reasoning"]
    assert [t.value for t in part.text] == [REASONING] and [t.value for t in other.text] == ["now act"]
    assert not any("evil.example" in m or "<b>" in m for m in markdownish(at))
    assert not any("evil.example" in h.proto.body for h in at.get("html"))
    assert 'Tool call: act({"command": "look"})' in texts(at)


def test_the_reasoning_is_rewritten_apart_from_the_thought(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, api_style="tools"))
    toy.llm.push(Reply(text="I will look.", reasoning="old reasoning"))
    toy.engine.run(v.id, max_steps=1)
    at = make("editor", episode=ep.id)
    at = click(at, f"editbtn_{v.id}_1")
    at.radio(key=f"ed_kind_{v.id}_1").set_value("Rewrite reasoning").run()
    at.text_area(key=f"ed_reasoning_{v.id}_1").set_value("new reasoning\nover two lines").run()
    at = click(at, f"ed_apply_{v.id}_1")
    new = toy.store.episodes.get(ep.id).current_version
    (step,) = toy.engine.steps(toy.store.versions.get(new))
    assert (step.reasoning, step.thought) == ("new reasoning\nover two lines", "I will look.")
    assert step.edit.kind == "rewrite_reasoning" and step.edit.old_reasoning == "old reasoning"
