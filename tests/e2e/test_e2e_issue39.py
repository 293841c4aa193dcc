"""Issue 39 in a real browser (1280 x 800, as reported): human mode's warning is drawn where the
person looks (4), and the Experiments page's results tables show every column (7)."""

from __future__ import annotations

import pytest

from tests.e2e.browser_helpers import IDLE, _episode, _expect, at_rest, fill, key, rerun_by

pytestmark = pytest.mark.e2e

W, H = 1280, 800


def _in_view(page, locator) -> bool:
    """The whole element is inside the window (not under its bottom edge, not above its top)."""
    box = locator.bounding_box()
    return box is not None and box["y"] >= -1 and box["y"] + box["height"] <= H + 1  # (sub-pixel layout)


@pytest.mark.parametrize("env, wrong", [("alfworld", "go to drwer 2"), ("hotpotqa", "Finish Marrowgate")])
def test_the_human_mode_warning_is_drawn_in_view_with_take_it_anyway(
    browser, page, llm, start_app, tmp_path, env, wrong
):
    """The warning and "Take it anyway" were drawn under the button: at 1280 x 800 with the
    button at the window's bottom edge, below the edge."""
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm, env=env)
    for _ in range(3):  # (a HotpotQA step needs an action; an ALFWorld turn may be a thought alone)
        eng.human_step(v.id, thought="I look around first.", action=None if env == "alfworld" else "Lookup[year]")
    store.close()
    app = start_app()
    page.set_viewport_size({"width": W, "height": H})
    page.goto(f"{app.url}/editor?episode={ep.id}")
    _expect()(page.locator("h1").first).to_have_text("Editor", timeout=30_000)
    page.wait_for_function(IDLE)
    rerun_by(page, page.locator(".st-key-human_mode label").first.click)
    fill(page, f"h_action_{v.id}_3", wrong)
    take = key(page, "h_submit").locator("button")
    take.evaluate("(b) => b.scrollIntoView({block: 'end'})")  # the button on the window's bottom edge
    page.wait_for_timeout(300)
    assert _in_view(page, take), take.bounding_box()
    rerun_by(page, take.click)
    warning = page.locator(".re-alert-warning").first
    _expect()(warning).to_be_visible()
    anyway = key(page, "h_confirm").locator("button")
    page.wait_for_function(
        """() => { const b = document.querySelector('.st-key-h_confirm button');
        if (!b) return false; const r = b.getBoundingClientRect(); return r.bottom <= window.innerHeight + 1; }""",
        timeout=30_000,
    )  # (the page brings it into view; a fixed wait would guess how fast)
    assert _in_view(page, warning) and _in_view(page, anyway), (warning.bounding_box(), anyway.bounding_box())
    assert warning.bounding_box()["y"] + warning.bounding_box()["height"] <= anyway.bounding_box()["y"]  # above it
    assert abs(anyway.bounding_box()["y"] - take.bounding_box()["y"]) < 2  # beside "Take this step"
    # the label says what the box takes
    label = key(page, f"h_action_{v.id}_3").locator("label")
    assert "optional" not in label.inner_text()
    rerun_by(page, anyway.click)  # the person insists: it runs
    from sessions.store import Store

    s = Store(tmp_path / "e2e.db")
    assert s.versions.steps(v.id)[-1].action == wrong
    s.close()


def _grid_fits(page, grid) -> list:
    """[scrollWidth, clientWidth] of a data grid once its layout has come to rest."""
    return at_rest(
        page,
        lambda: grid.evaluate("""(g) => { const s = g.querySelector('.dvn-scroller');
        return s && document.fonts.status === 'loaded' ? [s.scrollWidth, s.clientWidth] : null; }"""),
    )


def test_every_results_table_shows_all_its_columns_at_1280(browser, page, llm, start_app, tmp_path):
    """At 1280 px (the sidebar open) the results tables hid their last columns (ALFWorld's
    six task types: most of the run's columns)."""
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
    cfg = AgentConfig(model="gpt-3.5-turbo-instruct", base_url=llm.base_url)
    experiment.create(
        store,
        env="alfworld",
        method="react",
        config=cfg,
        name="alfworld games, a long name",
        tasks=select_tasks("alfworld", "builtin", source=None, limit=6, sample=None, seed=0),
    )
    experiment.create(
        store,
        env="hotpotqa",
        method="react",
        config=cfg,
        name="hotpotqa questions, a long name",
        tasks=select_tasks("hotpotqa", "builtin", source=None, limit=2, sample=None, seed=0),
    )
    store.close()
    experiment_runner.run(str(tmp_path / "e2e.db"), 2)
    app = start_app()
    page.set_viewport_size({"width": W, "height": H})
    for exp_id in (2, 1):  # the HotpotQA one (opened first: the newest), then ALFWorld's
        page.goto(f"{app.url}/experiments")
        _expect()(page.get_by_role("heading", name="Results")).to_be_visible(timeout=30_000)
        page.wait_for_function(IDLE)
        if exp_id == 1:
            page.get_by_role("combobox", name="Experiment", exact=True).click()
            rerun_by(page, page.get_by_role("option").filter(has_text="alfworld games").click)
        caption = "HotpotQA: exact match" if exp_id == 2 else "ALFWorld: success rate"
        _expect()(page.get_by_text(caption).first).to_be_visible(timeout=20_000)  # its table, first on the page
        for table in range(2):  # the rates, then how each run went
            sizes = _grid_fits(page, page.locator('[data-testid="stDataFrame"]').nth(table))
            assert sizes and sizes[0] <= sizes[1], (exp_id, table, sizes)
