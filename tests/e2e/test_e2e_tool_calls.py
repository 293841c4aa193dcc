"""Issue 42 in a real browser: a `tools`-style step shows its reasoning as its own folded part
and its call as plain text (hostile text stays text), and a person rewrites the reasoning from
the Edit panel - on HotpotQA (search/lookup/finish calls) and on ALFWorld (act(command), a
thought turn with no call)."""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.browser_helpers import _expect, click, fill, key, rerun_by, see
from tests.scripted_server import Reply, tool_call

pytestmark = pytest.mark.e2e

EVIL = "<script>alert(1)</script> <img src=x onerror=alert(1)>"


def _nothing_live(page) -> None:
    main = page.locator("section.stMain, [data-testid='stMain']").first
    assert main.locator("script").count() == 0
    assert main.locator("img[src='x']").count() == 0


def _start(tmp_path, llm, kind: str, steps: int):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    store = Store(tmp_path / "e2e.db")
    eng = Engine(store)
    task = family(kind).list_tasks()[0]
    cfg = AgentConfig(model="scripted-model", base_url=llm.base_url, api_style="tools", max_retries=1, timeout_s=10)
    ep, v = eng.start_episode(task, cfg)
    for _ in range(steps):
        eng.step(v.id)
    got = store.versions.steps(v.id)
    store.close()
    return ep, v, got


def test_hotpotqa_reasoning_folds_the_call_shows_and_a_person_rewrites_the_reasoning(
    browser, page, llm, start_app, tmp_path
):
    llm.set_responder(
        lambda body: Reply(
            text="I search the entity first.",
            reasoning=f"Maybe {EVIL} is a trap.",
            tool_calls=[tool_call("search", {"entity": "Colorado orogeny"})],
        )
    )
    ep, v, got = _start(tmp_path, llm, "hotpotqa", 1)
    assert got[0].tool_call is not None and got[0].reasoning == f"Maybe {EVIL} is a trap."
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}&version={v.id}")
    see(page, "Thought 1: I search the entity first.")
    see(page, 'Tool call: search({"entity": "Colorado orogeny"})')
    folded = key(page, f"reasoning_{v.id}_1")
    _expect()(folded).to_be_visible()
    _expect()(folded.get_by_text(f"Maybe {EVIL} is a trap.")).to_be_hidden()  # folded until opened
    rerun_by(page, folded.locator("summary").first.click)
    _expect()(folded.get_by_text(f"Maybe {EVIL} is a trap.")).to_be_visible()
    _nothing_live(page)

    click(page, f"editbtn_{v.id}_1")
    rerun_by(page, key(page, f"ed_kind_{v.id}_1").get_by_text("Rewrite reasoning", exact=True).click)
    fill(page, f"ed_reasoning_{v.id}_1", "Search Colorado orogeny, then find the eastern sector.")
    click(page, f"ed_apply_{v.id}_1")
    _expect()(page).to_have_url(re.compile(r"version=(?!%d\b)\d+" % v.id), timeout=30_000)
    new = int(re.search(r"version=(\d+)", page.url).group(1))

    from sessions.store import Store

    store = Store(tmp_path / "e2e.db")
    edited = store.versions.steps(new)[0]
    assert edited.reasoning == "Search Colorado orogeny, then find the eastern sector."
    assert edited.thought == "I search the entity first." and edited.tool_call.name == "search"
    assert store.versions.steps(v.id)[0].reasoning == f"Maybe {EVIL} is a trap."  # the original is kept
    store.close()
    assert page.dialogs == []


def test_alfworld_a_thought_turn_and_a_call_each_read_as_text(browser, page, llm, start_app, tmp_path):
    def agent(body: dict) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "user" and last["content"] == "OK.":  # after the thought turn: act
            return Reply(text="", tool_calls=[tool_call("act", {"command": "look"})])
        return Reply(text=f"I will look around {EVIL}.", reasoning="the room first")

    llm.set_responder(agent)
    ep, v, got = _start(tmp_path, llm, "alfworld", 2)
    assert [s.action for s in got] == [None, "look"] and got[1].tool_call.arguments == {"command": "look"}
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}&version={v.id}")
    see(page, f"Act 1: think: I will look around {EVIL}.")
    see(page, "Tool call: act(" + json.dumps({"command": "look"}) + ")")
    _expect()(key(page, f"reasoning_{v.id}_1")).to_be_visible()
    _nothing_live(page)
    assert page.dialogs == []
