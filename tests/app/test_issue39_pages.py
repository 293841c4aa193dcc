"""Issue 39 in the app (AppTest): the Export page opens on a choice that works (5), the
Experiments and Versions pages (7), and untrusted names stay plain text (18)."""

from __future__ import annotations

import json

from tests.app_helpers import cfg, click, ok
from tests.engine_scripts import ROOM_SCRIPT
from tests.toy_envs import ROOM_TASK, WIKI_TASK


def _alerts(at, kind: str = "error") -> list[str]:
    return [h.proto.body for h in at.get("html") if f"re-alert-{kind}" in h.proto.body]


def _two_environments(toy) -> None:
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    _, w = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.llm.push(" I search Velmora.\nAction 1: Search[Velmora]")
    toy.engine.step(w.id)


# ---------------------------------------------------------------------- 5: Export's defaults


def test_the_export_page_opens_on_a_choice_that_works_with_two_environments(app):
    """It opened on `prompt` with every environment: "a prompt export holds one environment"."""
    toy, make = app
    _two_environments(toy)
    at = make("export")
    at = click(at, "exp-go")  # Prepare export, nothing changed
    assert not _alerts(at), _alerts(at)
    data, rep, fmt, name = at.session_state["exp-data"]
    assert rep["versions"] == 2 and rep["episodes"] == 2
    envs = {json.loads(line)["episode"]["task"]["env"] for line in data.decode().splitlines()}
    assert envs == {"alfworld", "hotpotqa"}
    # a one-environment format over two environments is said before the button is pressed
    at.selectbox(key="exp-format").set_value("prompt")
    ok(at.run())
    assert any("holds one environment" in c.value for c in at.caption), [c.value for c in at.caption]
    at.selectbox(key="exp-env").set_value("alfworld")
    ok(at.run())
    assert not any("holds one environment" in c.value for c in at.caption)
