"""The whole trajectory at a glance, in a real browser at 1400x900 (Chromium): the steps flow in
the page with the controls kept in reach (1), the overview strip's marks scroll to their step
(2), edited steps stand out (3), the what-if rollouts open in Versions every time (11), and a
new experiment is selected with its progress and Stop (13). Screenshots of each view are kept
under the test's temporary folder (tmp_path/screens; E2E_SCREENSHOTS=1 also copies them to
test-artifacts/)."""

from __future__ import annotations

import itertools
import re
import shutil
import threading
from pathlib import Path

import pytest

from tests.e2e.browser_helpers import _expect, click, fill, key, rerun_by, see, until
from tests.e2e.conftest import ARTIFACTS
from tests.scripted_server import Reply

pytestmark = pytest.mark.e2e
W, H = 1400, 900


def shot(page, tmp_path: Path, name: str, full: bool = False) -> Path:
    out = tmp_path / "screens"
    out.mkdir(exist_ok=True)
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    import os

    if os.environ.get("E2E_SCREENSHOTS"):
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(path, ARTIFACTS / path.name)
    return path


@pytest.fixture
def screen(page):
    page.set_viewport_size({"width": W, "height": H})
    return page


def _in_view(page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["y"] < H and box["y"] + box["height"] > 0


def _long_episode(db: Path, llm, steps: int = 40):
    """A built-in ALFWorld game stepped by a person: `steps` go-to steps, then one action
    rewritten at step 10 and one thought inserted before step 20 (both keeping the rest)."""
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    store = Store(db)
    eng = Engine(store)
    task = next(t for t in family("alfworld").list_tasks() if t.type == "pick_and_place_simple")
    ep, v = eng.start_episode(
        task, AgentConfig(model="scripted-model", base_url=llm.base_url, max_steps=80), {"wording": "paper"}
    )
    acts = [a for a in eng.envs.admissible_actions(v.id) or [] if a.startswith("go to ")]
    for i in range(steps):
        eng.human_step(v.id, action=acts[i % len(acts)])
    hinted = eng.editor.edit(
        v.id, 20, "insert_thought", "Hint: I have looked at most places; try the drawers.", keep_rest=True
    )
    store.close()
    return ep, v, hinted


def test_the_trajectory_flows_in_the_page_with_a_strip_that_scrolls_to_steps(browser, screen, llm, start_app, tmp_path):
    page = screen
    ep, v, hinted = _long_episode(tmp_path / "e2e.db", llm)
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}&version={hinted.id}")
    see(page, "Act 1: ", exact=False)
    # 1. the first screen shows steps (no ~420 px inner box), and the page itself scrolls
    assert _in_view(page, '[data-step="1"]')  # (the earliest steps are one block of HTML)
    assert page.locator('[data-testid="stVerticalBlock"][style*="height: 420px"]').count() == 0
    shot(page, tmp_path, "editor-first-screen")
    # 2. the strip: one mark per step; the inserted thought is an edit mark; a click scrolls to it
    marks = page.locator(".ov-strip a.ov-mark")
    _expect()(marks).to_have_count(41)
    _expect()(page.locator('.ov-strip a.ov-edited[href="#step-20"]')).to_have_count(1)  # the inserted hint
    _expect()(page.locator(".ov-strip a.ov-edited")).to_have_count(1)
    _expect()(page.locator(".ov-strip a.ov-person")).to_have_count(40)
    assert not _in_view(page, ".st-key-step_35")
    page.locator('.ov-strip a[href="#step-35"]').click()
    until(page, lambda: _in_view(page, ".st-key-step_35"))
    assert _in_view(page, ".st-key-step_35")
    # 1. the run controls and the status line stay in reach after scrolling
    assert _in_view(page, ".st-key-run_controls") and _in_view(page, ".st-key-status_line")
    top = page.locator(".st-key-run_controls").bounding_box()["y"]
    assert 0 <= top < 150
    shot(page, tmp_path, "editor-after-strip-click")
    # 3. the person's step stands out (colour and a thick border)
    style = page.locator(".st-key-step_20").evaluate(
        "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).borderLeftWidth]"
    )
    assert style[0] == "rgb(255, 248, 197)" and float(style[1].rstrip("px")) >= 6
    assert page.locator(".st-key-step_21").evaluate("e => getComputedStyle(e).backgroundColor") != style[0]
    page.locator('.ov-strip a[href="#step-20"]').click()
    until(page, lambda: _in_view(page, ".st-key-step_20"))
    shot(page, tmp_path, "editor-edited-step")
    # the full page, for a person to look at
    shot(page, tmp_path, "editor-full", full=True)


def test_an_edited_action_shows_its_old_text_as_a_diff(browser, screen, llm, start_app, tmp_path):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    page = screen
    store = Store(tmp_path / "e2e.db")
    eng = Engine(store)
    task = next(t for t in family("alfworld").list_tasks() if t.type == "pick_and_place_simple")
    ep, v = eng.start_episode(task, AgentConfig(model="scripted-model", base_url=llm.base_url), {"wording": "paper"})
    eng.human_step(v.id, thought="I should look on the shelves first.")
    eng.human_step(v.id, action="look")
    b = eng.editor.edit(v.id, 1, "rewrite_thought", "I should look in the drawers first.", keep_rest=True)
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}&version={b.id}")
    see(page, "Act 1: think: I should look in the drawers first.")
    step = page.locator(".st-key-step_1")
    _expect()(step.locator("del.rd-del", has_text="shelves")).to_have_count(1)
    _expect()(step.locator("ins.rd-ins", has_text="drawers")).to_have_count(1)
    assert step.evaluate("e => getComputedStyle(e).borderLeftColor") == "rgb(191, 135, 0)"
    assert page.locator(".st-key-step_2").evaluate("e => getComputedStyle(e).borderLeftColor") != "rgb(191, 135, 0)"
    shot(page, tmp_path, "editor-edited-thought")


def test_rollouts_open_in_versions_every_time(browser, screen, llm, start_app, tmp_path):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    page = screen
    llm.set_responder(lambda body: Reply(text=" look"))
    store = Store(tmp_path / "e2e.db")
    eng = Engine(store)
    task = next(t for t in family("alfworld").list_tasks() if t.type == "pick_and_place_simple")
    ep, v = eng.start_episode(
        task,
        AgentConfig(model="scripted-model", base_url=llm.base_url, max_steps=4, max_retries=1, timeout_s=10),
        {"wording": "paper"},
    )
    eng.human_step(v.id, action="look")
    eng.human_step(v.id, action="inventory")
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}")
    click(page, f"editbtn_{v.id}_2")
    page.get_by_text("What if… — N rollouts from step 2", exact=False).click()
    fill(page, f"wi_n_{v.id}_2", "1")  # one rollout an arm: the link, not the statistics, is under test
    click(page, f"wi_run_{v.id}_2")
    link = page.get_by_text("Open the rollouts in Versions", exact=True)
    _expect()(link).to_be_visible(timeout=60_000)
    shot(page, tmp_path, "whatif-done")
    for i in range(2):  # the second trip starts from the page come back to, as any later one
        page.get_by_text("Open the rollouts in Versions", exact=True).click()
        _expect()(page.get_by_role("heading", name="Versions")).to_be_visible(timeout=20_000)
        _expect()(page.locator('[data-testid="stGraphVizChart"]')).to_be_visible(timeout=20_000)
        shot(page, tmp_path, f"versions-from-rollouts-{i + 1}")
        page.go_back()
        _expect()(page.get_by_text("Open the rollouts in Versions", exact=True)).to_be_visible(timeout=20_000)


def test_create_and_launch_selects_the_new_experiment_with_progress_and_stop(browser, screen, llm, start_app, tmp_path):
    import json

    from tests.experiment_agents import wiki_agent

    page = screen
    root = Path(__file__).resolve().parents[2]
    hotpot = [json.loads(x) for x in (root / "envs/wikipedia/corpus/hotpotqa.jsonl").read_text().splitlines() if x]
    agent = wiki_agent({r["question"]: r["answer"] for r in hotpot}, react_steps=3)
    stopped, calls = threading.Event(), itertools.count()

    def held_after_the_first_task(body: dict) -> Reply:
        """The first task's three calls are answered; the next call waits for the test's Stop
        (however slow the machine, the run is still going when Stop is clicked)."""
        if next(calls) >= 3:
            stopped.wait(60)
        return agent(body)

    llm.set_responder(held_after_the_first_task)
    from agent import experiment
    from agent.task_selection import select_tasks
    from sessions.store import Store
    from trajectory.records import AgentConfig

    store = Store(tmp_path / "e2e.db")  # an earlier experiment, so the selector has one to stay on
    experiment.create(
        store,
        env="hotpotqa",
        method="react",
        config=AgentConfig(model="scripted-model"),
        tasks=select_tasks("hotpotqa", "builtin", source=None, limit=2, sample=None, seed=0),
        name="earlier run",
    )
    store.close()
    app = start_app({"OPENAI_BASE_URL": llm.base_url, "REACT_EDITOR_CACHE": str(tmp_path / "cache")})
    page.goto(f"{app.url}/experiments")
    _expect()(key(page, "x_pick").locator("input")).to_have_value(re.compile("^1 · earlier run"), timeout=30_000)
    page.get_by_text("New experiment", exact=True).click()
    _expect()(key(page, "x_name")).to_be_visible()
    key(page, "x_env").click()
    rerun_by(page, page.get_by_role("option", name="hotpotqa").click)
    fill(page, "x_tasks", "hp-001,hp-002,hp-003,hp-004,hp-005,hp-006")
    fill(page, "x_model", "scripted-model")
    fill(page, "x_name", "second run")
    click(page, "x_create")
    _expect()(key(page, "x_pick").locator("input")).to_have_value(re.compile("^2 · second run"), timeout=20_000)
    _expect()(key(page, "x_stop")).to_be_visible(timeout=20_000)
    _expect()(page.locator('[data-testid="stProgress"]').first).to_contain_text("/6 done")
    shot(page, tmp_path, "experiments-new-run-selected")
    try:
        click(page, "x_stop", force=True)  # (the panel is redrawn at each tick while the run goes on)
        _expect()(page.locator('[data-testid="stProgress"]').first).to_contain_text("stopped (partial)", timeout=30_000)
        _expect()(page.get_by_text("stopped (partial)", exact=True).first).to_be_attached()  # the table says the same
    finally:
        stopped.set()
    shot(page, tmp_path, "experiments-stopped-partial", full=True)
