"""Issue 28 in a real browser: /episodes opens the Episodes page (14), and Stop on a single
step makes the status line and the selector say "stopped" (7)."""

from __future__ import annotations

import re

import pytest

from tests.e2e.browser_helpers import IDLE, HeldAnswer, _episode, _expect, still
from tests.e2e.browser_helpers import at_rest as _at_rest

pytestmark = pytest.mark.e2e


def test_episodes_has_its_own_address(browser, page, llm, start_app, tmp_path):
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm)
    store.close()
    app = start_app()
    page.goto(f"{app.url}/episodes")
    _expect()(page.locator("h1").first).to_have_text("Episodes", timeout=20_000)
    page.wait_for_function(IDLE)  # (a missing page is said when the run begins)
    _expect()(page.get_by_text("Page not found")).to_have_count(0)
    page.goto(f"{app.url}/")  # the root opens the same page, at its address
    _expect()(page).to_have_url(re.compile(r"/episodes$"), timeout=10_000)
    _expect()(page.locator("h1").first).to_have_text("Episodes", timeout=20_000)
    _expect()(page.get_by_text("Page not found")).to_have_count(0)


def _covered(page, k: str) -> bool:
    """Is the middle of element `k` hidden under another element (the sticky bar)?"""
    return page.evaluate(
        """(k) => {
        const el = document.querySelector('.st-key-' + k); const r = el.getBoundingClientRect();
        const top = document.elementFromPoint(r.left + 40, r.top + r.height / 2);
        return !(top && el.contains(top)); }""",
        k,
    )


def test_the_sticky_bar_stays_one_row_and_shows_the_status_line(browser, page, llm, start_app, tmp_path):
    """Issue 28 #12: on a finished version the bar grew to ~200 px and hid the status line."""
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm, max_steps=4)
    for i in range(4):  # (a step may be a thought and an act: the version ends at its limit)
        if not store.versions.get(v.id).outcome.done:
            eng.human_step(v.id, thought=f"thought {i} " + "words " * 120, action="look")
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}")
    _expect()(page.locator(".st-key-status_line").get_by_text(re.compile(r"\d steps ·"))).to_be_visible(timeout=30_000)
    title = page.locator("h1").first  # (it scrolls with the page)
    top = title.bounding_box()["y"]
    page.mouse.move(700, 500)  # over the page, not the sidebar: the wheel scrolls what is under the pointer
    page.mouse.wheel(0, 1500)
    assert still(page, title, moved_from=top), "the page did not scroll"
    bar = page.locator(".st-key-run_controls").bounding_box()
    assert bar["height"] <= 80, bar
    assert not _covered(page, "status_line")


def test_stop_on_a_single_step_reads_stopped(browser, page, llm, start_app, tmp_path):
    """Issue 28 #7: after Stop on a single step the status line and the version selector say
    "stopped" (they said "running" until a reload)."""
    held = HeldAnswer()
    llm.set_responder(held)
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm, cache=False, timeout_s=20)
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}")
    step = page.locator(".st-key-btn_step button")
    _expect()(step).to_be_enabled(timeout=30_000)
    step.click()
    _expect()(page.get_by_text(re.compile(r"Calling the model…"))).to_be_visible(timeout=10_000)
    held.wait_called()
    page.locator(".st-key-btn_stop button").click()
    status = page.locator(".st-key-status_line")
    _expect()(status).to_contain_text("stopped", timeout=10_000)
    _expect()(status).not_to_contain_text("running")
    selector = page.get_by_role("combobox", name="Version")
    _expect()(selector).to_have_value(re.compile(r"\(stopped\)"))
    held.release()  # the abandoned call's answer arrives: still stopped
    page.wait_for_timeout(2_500)
    _expect()(status).to_contain_text("stopped")
    _expect()(selector).to_have_value(re.compile(r"\(stopped\)"))


def test_the_results_table_fits_the_page(browser, page, llm, start_app, tmp_path):
    """Issue 28 #20: HotpotQA's results table was wider than the page (its last columns cut)."""
    import json
    from pathlib import Path

    from agent import experiment, experiment_runner
    from agent.task_selection import select_tasks
    from sessions.store import Store
    from tests.experiment_agents import wiki_agent
    from trajectory.records import AgentConfig

    root = Path(__file__).resolve().parents[2]
    hotpot = [json.loads(x) for x in (root / "envs/wikipedia/corpus/hotpotqa.jsonl").read_text().splitlines() if x]
    llm.set_responder(wiki_agent({r["question"]: "no" for r in hotpot}, react_steps=1))
    store = Store(tmp_path / "e2e.db")
    experiment.create(
        store,
        env="hotpotqa",
        method="react",
        config=AgentConfig(model="scripted-model", base_url=llm.base_url),
        tasks=select_tasks("hotpotqa", "builtin", source=None, limit=2, sample=None, seed=0),
        name="a run with a long name",
    )
    store.close()
    experiment_runner.run(str(tmp_path / "e2e.db"), 1)
    app = start_app()
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{app.url}/experiments")
    grid = page.locator('[data-testid="stDataFrame"]').first
    _expect()(grid).to_be_visible(timeout=30_000)
    page.wait_for_function(IDLE)  # the run has ended; then the grid's own layout comes to rest
    sizes = _at_rest(
        page,
        lambda: grid.evaluate("""(g) => { const s = g.querySelector('.dvn-scroller');
        return s && document.fonts.status === 'loaded' ? [s.scrollWidth, s.clientWidth] : null; }"""),
    )
    assert sizes and sizes[0] <= sizes[1], sizes
