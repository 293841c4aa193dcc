"""Issue 28 in a real browser: the product's whole loop on HotpotQA without the terminal -
run an experiment, open a failure, fix a thought, prove the fix with a what-if, save the
fixed trajectory as an exemplar, re-run with it (the leaked task left out), read the paired
comparison. Every click and typed field is counted (target: <= 20 clicks, <= 3 fields)."""

from __future__ import annotations

import json
import re
from contextlib import closing
from pathlib import Path

import pytest

from tests.e2e.browser_helpers import IDLE_DRAWN, rerun_by, runs, settle, until
from tests.scripted_server import Reply, prompt_text

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HOTPOT = [
    json.loads(line)
    for line in (ROOT / "envs/wikipedia/corpus/hotpotqa.jsonl").read_text().splitlines()
    if line.strip()
]
GOLD = {r["question"]: r["answer"] for r in HOTPOT}
FIX = "The answer is on the page of the band, not of the physicist."
_TASK = re.compile(r"^Question: (.*)$", re.MULTILINE)
_CUE = re.compile(r"(Thought|Action) (\d+):$")


def agent(body: dict) -> Reply:
    """Right on the first question, and wherever the prompt holds the person's fix (the
    edited step, a what-if treatment, or the fixed trajectory as an exemplar); else wrong."""
    prompt = prompt_text(body)
    task = (_TASK.findall(prompt) or [""])[-1]
    answer = GOLD.get(task, "?") if task == HOTPOT[0]["question"] or FIX in prompt else "Nowhere at all"
    m = _CUE.search(prompt.rstrip())
    if m and m.group(1) == "Thought":
        return Reply(text=f" I will answer.\nAction {m.group(2)}: Finish[{answer}]")
    return Reply(text=f" Finish[{answer}]")


class Person:
    """Clicks and typing, counted. A click or a typed field that reruns the script waits for
    that run to end (settle); one the page answers by itself (a list or a section opening)
    leaves the next step to wait for what it needs."""

    def __init__(self, page):
        self.page, self.clicks, self.typed = page, 0, 0

    def click(self, locator, rerun: bool = True) -> None:
        before = runs(self.page)
        locator.first.click()
        self.clicks += 1
        if rerun:
            settle(self.page, before)

    def button(self, key_part: str) -> None:
        b = self.page.locator(f'[class*="st-key-{key_part}"] button:not([disabled])')
        b.first.wait_for(timeout=60_000)
        # as a person waits for a page still redrawing: a click on a button the run is replacing is
        # lost (on a busy machine the previous action's run can still be drawing here)
        until(self.page, lambda: self.page.evaluate(IDLE_DRAWN), 30)
        self.click(b)

    def choose(self, key_part: str, option: str) -> None:
        box = self.page.locator(f'[class*="st-key-{key_part}"] [data-testid="stSelectbox"]')
        box.first.wait_for(timeout=30_000)  # drawn, not a loading skeleton
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        option_ = self.page.get_by_role("option", name=option)
        for attempt in range(4):
            # a list opened while a run still redraws the page closes with the redraw: open it on
            # an idle page, and again if it closed before the option showed
            until(self.page, lambda: self.page.evaluate(IDLE_DRAWN), 30)
            box.first.click()
            if attempt == 0:
                self.clicks += 1  # the person clicks once; a reopened list is the page's fault
            try:
                option_.first.wait_for(timeout=5_000)
                break
            except PlaywrightTimeout:
                self.page.keyboard.press("Escape")
        self.click(option_)

    def type(self, key_part: str, text: str) -> None:
        box = self.page.locator(f'[class*="st-key-{key_part}"]').locator("input, textarea").first
        box.fill(text)
        enter = "Control+Enter" if box.evaluate("e => e.tagName") == "TEXTAREA" else "Enter"
        rerun_by(self.page, lambda: box.press(enter))
        self.typed += 1


def _see(page, text: str, timeout: float = 60_000) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_text(text, exact=False).first).to_be_visible(timeout=timeout)


def test_the_whole_loop_in_the_browser(browser, page, llm, start_app, tmp_path):
    llm.set_responder(agent)
    app = start_app(
        {
            "OPENAI_BASE_URL": llm.base_url,
            "REACT_EDITOR_MODEL": "scripted-model",
            "REACT_EDITOR_CACHE": str(tmp_path / "cache"),
        }
    )
    me = Person(page)
    page.goto(f"{app.url}/experiments")
    _see(page, "No experiments yet")
    # 1. run an experiment: three HotpotQA questions
    me.choose("x_env", "hotpotqa")
    me.type("x_limit", "3")
    me.button("x_create")
    _see(page, "3/3 done: 1 success, 2 failures, 0 errors")
    # 2. open a failure, fix its thought
    me.button("x_open")
    _see(page, "Nowhere at all")
    me.button("editbtn_")
    me.type("ed_thought_", FIX)
    # 3. prove the fix with a what-if: it tests the typed fix, nothing to type again
    me.click(page.get_by_text("What if… — N rollouts from step 1", exact=False), rerun=False)
    me.button("wi_run_")
    _see(page, "treatment (edited): 10/10 success")
    _see(page, "control (as it was): 0/10 success")
    # 4. apply it and resume: the episode succeeds
    me.button("ed_resume_")
    _see(page, "Done: success")
    # 5. save the fixed trajectory as an exemplar, where it was made
    me.click(page.get_by_text("Annotate v2", exact=False), rerun=False)
    me.button("ed-xadd-")
    _see(page, "Added to exemplar set 'hotpotqa-fixes'")
    # 6. back to the experiment, re-run with the exemplar set: the leaked task is named and left out
    me.button("ed_open_exp")
    me.click(page.get_by_text("Re-run with a change", exact=False), rerun=False)
    me.choose("x_rr_set_", "hotpotqa-fixes")
    _see(page, "Leakage: exemplar set 'hotpotqa-fixes' holds the trajectory of 1 task(s)")
    me.button("x_rerun")
    # 7. the paired comparison with the source opens by itself when the re-run finishes
    _see(page, "re-ran", timeout=90_000)
    _see(page, "2/2 done: 2 successes, 0 failures, 0 errors")
    _see(page, "2 tasks in common")
    from agent import experiment_scores
    from sessions import experiments
    from sessions.store import Store

    with closing(Store(tmp_path / "e2e.db")) as store:
        new = experiments.get(store, 2)
        assert new.params["rerun_of"] == 1 and new.config.exemplar_set == "hotpotqa-fixes"
        assert [it.task.id for it in experiments.items(store, 2)] == [HOTPOT[0]["id"], HOTPOT[2]["id"]]
        c = experiment_scores.compare(store, 2, 1)
        assert c["n"] == 2 and (c["a_only"], c["b_only"]) == (1, 0) and c["leaked"] == []  # it was left out
    print(f"\nthe loop took {me.clicks} clicks and {me.typed} typed fields")
    assert me.clicks <= 20 and me.typed <= 3


def _in_view(page, locator) -> bool:
    box = locator.bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] < height and box["y"] + min(box["height"], 200) > 0


@pytest.mark.parametrize("n", [3, 35])
def test_edit_panels_open_at_their_step_on_short_and_long_alfworld_episodes(browser, page, llm, start_app, tmp_path, n):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    store = Store(tmp_path / "e2e.db")
    eng = Engine(store)
    task = family("alfworld").list_tasks()[0]
    ep, v = eng.start_episode(
        task, AgentConfig(model="scripted-model", base_url=llm.base_url, max_steps=60), {"wording": "paper"}
    )
    for i in range(n):
        eng.human_step(v.id, action="look" if i % 2 else "inventory")
    store.close()
    app = start_app()
    me = Person(page)
    page.goto(f"{app.url}/editor?episode={ep.id}")
    k = n - 2
    me.button(f"editbtn_{v.id}_{k}")
    panel = page.locator(f'[class*="st-key-edit_panel_{v.id}_{k}"]')
    panel.wait_for(timeout=30_000)

    def both() -> bool:
        return _in_view(page, page.locator(f".st-key-step_{k}")) and _in_view(page, panel)

    until(page, both)  # (the page scrolls to the panel once it is drawn)
    assert both()
    # the panel is drawn right under its step, above the next one
    assert panel.bounding_box()["y"] > page.locator(f".st-key-step_{k}").bounding_box()["y"]
    assert panel.bounding_box()["y"] < page.locator(f".st-key-step_{k + 1}").bounding_box()["y"]
