"""Issue 15 in a real browser: human mode never repeats a step (1), deletions and insertions
show in the Editor and in Compare (2), a step in flight shows its progress, cannot be
double-fired and is cancelled by Stop (3), and no page makes a request off 127.0.0.1 (14)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from tests.e2e.browser_helpers import IDLE, HeldAnswer, _episode, _expect, click, fill, key, rerun_by, see

pytestmark = pytest.mark.e2e


def test_human_mode_clears_its_boxes_and_never_repeats_a_step(browser, page, llm, start_app, tmp_path):
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm)
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}")
    page.locator(".st-key-human_mode label").first.click()
    fill(page, f"h_thought_{v.id}_0", "First I look around.")
    click(page, "h_submit")
    see(page, "Act 1: think: First I look around.")
    # the boxes for the next turn are new and empty; submitting them sends nothing again
    _expect()(key(page, f"h_thought_{v.id}_1").locator("textarea")).to_have_value("")
    click(page, "h_submit")
    see(page, "write a thought or an action")
    page.wait_for_function(IDLE)  # the run that said so has ended: what it stored is stored
    from sessions.store import Store

    s = Store(tmp_path / "e2e.db")
    assert [x.thought for x in s.versions.steps(v.id)] == ["First I look around."]
    s.close()
    # typed but not taken: a reload asks first (item 13)
    key(page, f"h_thought_{v.id}_1").locator("textarea").fill("not applied yet")
    before = len(page.dialogs)
    page.evaluate("setTimeout(() => location.reload(), 0)")
    for _ in range(50):  # (the dialog comes within a moment; it is dismissed, the page stays)
        if len(page.dialogs) > before:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(300)
    assert len(page.dialogs) == before + 1


def test_deleted_and_inserted_thoughts_show_in_editor_and_compare(browser, page, llm, start_app, tmp_path):
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm)
    eng.human_step(v.id, thought="The desk may hold it.")
    eng.human_step(v.id, action="look")
    eng.human_step(v.id, thought="I also see it is done already.")
    eng.human_step(v.id, action="inventory")
    gone = eng.editor.edit(v.id, 3, "delete_thought", keep_rest=True)
    ins = eng.editor.edit(gone.id, 2, "insert_thought", "Hint: check the desk first.", keep_rest=True)
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}&version={gone.id}")
    marker = page.get_by_text("Thought deleted here by a person (show it)")
    _expect()(marker).to_be_visible()
    marker.click()
    see(page, "I also see it is done already.")
    page.goto(f"{app.url}/compare?episode={ep.id}&left={v.id}&right={ins.id}")
    table = page.locator("table.rd-cmp")
    _expect()(table.locator("tr.rd-deleted")).to_have_count(1)
    _expect()(table.locator("tr.rd-deleted")).to_contain_text("— deleted by a person —")
    _expect()(table.locator("tr.rd-inserted")).to_have_count(1)
    _expect()(table.locator("tr.rd-inserted")).to_contain_text("Hint: check the desk first.")
    _expect()(table.locator("del.rd-del")).to_have_count(0)  # no strike-through on unrelated text
    _expect()(page.get_by_test_id("stMetricValue").nth(3)).to_have_text("2")  # steps edited by a person


def test_a_step_in_flight_shows_progress_runs_once_and_stop_cancels_it(browser, page, llm, start_app, tmp_path):
    held = HeldAnswer()
    llm.set_responder(held)
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm, cache=False, timeout_s=20)
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}")
    step = key(page, "btn_step").locator("button")
    step.dblclick()  # a double click takes ONE step
    _expect()(page.get_by_text(re.compile(r"Calling the model… \d+\.\d s"))).to_be_visible(timeout=5_000)
    _expect()(step).to_be_disabled()
    held.release()
    see(page, "Act 1: look", 20_000)
    _expect()(step).to_be_enabled(timeout=10_000)
    # A second step from the double click would have called the model (held, so recorded)
    # before the first answer was let go; the runs its click asked for have all ended here.
    page.wait_for_function(IDLE)
    from sessions.store import Store

    s = Store(tmp_path / "e2e.db")
    assert len(s.versions.steps(v.id)) == 1 and len(llm.completion_requests) == 1
    # Stop while the model is being called: the version stays as it was
    step.click()
    _expect()(page.get_by_text(re.compile(r"Calling the model…"))).to_be_visible(timeout=5_000)
    held.wait_called()
    click(page, "btn_stop")
    _expect()(page.get_by_text(re.compile(r"Calling the model…"))).to_have_count(0, timeout=5_000)
    _expect()(step).to_be_enabled()
    held.release()  # the abandoned call's answer arrives meanwhile
    page.wait_for_timeout(2_500)
    assert len(s.versions.steps(v.id)) == 1 and len(llm.completion_requests) == 2
    s.close()
    _expect()(key(page, "step_2")).to_have_count(0)


def test_no_page_makes_a_request_off_the_machine(browser, page, llm, start_app, tmp_path):
    store, eng, ep, v = _episode(tmp_path / "e2e.db", llm)
    eng.human_step(v.id, thought="a thought")
    store.close()
    app = start_app()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    # Two pages loaded afresh (the root, the Editor on the episode): every page is the same
    # shell; the other pages are opened as a person opens them, by their link in the sidebar
    # (their elements load what they load; the episode stays selected) - not six more loads
    # of the shell, each paying for its script bundle again.
    for path in ("", f"editor?episode={ep.id}"):
        page.goto(f"{app.url}/{path}")
        page.wait_for_load_state("networkidle")
        _expect()(page.locator("h1").first).to_be_visible()
    see(page, "Act 1: think: a thought")
    for title, url in (
        ("Versions", "versions"),
        ("Compare", "compare"),
        ("Experiments", "experiments"),
        ("Export", "export"),
        ("Settings", "settings"),
        ("Episodes", "episodes"),
    ):
        rerun_by(page, page.locator(".st-key-page_menu a", has_text=title).first.click)
        _expect()(page).to_have_url(re.compile(rf"/{url}(\?|$)"))
        _expect()(page.locator("h1").first).to_contain_text(title)  # (drawn: what it asks for is asked)
        if url == "versions":  # the episode's version tree: the page drew the episode, not "none selected"
            _expect()(page.locator('[data-testid="stGraphVizChart"]')).to_be_visible()
    # (on the Episodes page, the last one) a click on a row of the table opens the episode
    grid = page.locator(".st-key-episodes_table").first
    _expect()(grid.locator("canvas").first).to_be_visible()  # the grid draws on a canvas
    page.wait_for_function(IDLE)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 500, box["y"] + 53)  # focus the grid (a cell of the first row)
    page.wait_for_timeout(500)
    page.mouse.click(box["x"] + 17, box["y"] + 53)  # then the row's selection marker
    _expect()(page).to_have_url(re.compile(rf"/editor\?episode={ep.id}"), timeout=10_000)
    see(page, "Act 1: think: a thought")
    assert seen
    off = [u for u in seen if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).hostname != "127.0.0.1"]
    assert off == [], off
