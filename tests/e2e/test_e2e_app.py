"""The app in a real browser (Playwright + Debian's Chromium) against `streamlit run app.py`
on 127.0.0.1, with the scripted model server as the only stand-in.

The first test is the paper's Figure 5 on a built-in ALFWorld game: the model hallucinates
in a thought and fails; the person deletes the bad sentence, adds a hint a few steps later,
resumes, and the agent wins; the Compare page shows both versions."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.e2e.browser_helpers import _expect, click, fill, key, rerun_by, see
from tests.e2e.conftest import ARTIFACTS
from tests.scripted_server import Reply, prompt_text

pytestmark = pytest.mark.e2e

EVIL = "<script>alert(1)</script> <img src=x onerror=alert(1)> [link](http://evil)"


def choose(page, k: str, option: str) -> None:
    """Pick a radio option; one already picked is clicked too, but asks for no run."""
    label = key(page, k).get_by_text(option, exact=True)
    if key(page, k).get_by_role("radio", name=option).is_checked():
        label.click()
    else:
        rerun_by(page, label.click)


def snap(page, name: str) -> None:
    """With E2E_SCREENSHOTS=1, keep a screenshot of a key view in test-artifacts/."""
    if os.environ.get("E2E_SCREENSHOTS"):
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


# ---------------------------------------------------------------------- Figure 5


def _alfworld_game():
    """A built-in pick-and-place game and the walkthrough stored with it (go, take, go, put),
    replayed here to a win (the stored walkthrough, not the planner: the planner runs in a
    process per step, and expert hints have their own tests)."""
    try:
        from envs.alfworld.fastgame import load_game_data
        from envs.alfworld.tasks import rebuild_path
        from envs.alfworld.wording import to_wording
        from envs.registry import family

        fam = family("alfworld")
        tasks = fam.list_tasks()
    except ImportError as exc:  # only a missing env package skips; anything else fails
        pytest.skip(f"envs.alfworld cannot be imported: {exc}")
    for task in tasks:
        if task.type != "pick_and_place_simple":
            continue
        walk = [to_wording(c, "paper") for c in (load_game_data(rebuild_path(task)).walkthrough or [])]
        if not (
            len(walk) == 4
            and walk[0].startswith("go to ")
            and walk[1].startswith("take ")
            and walk[3].startswith("put ")
        ):
            continue
        env = fam.make_env(task, {"wording": "paper"})
        env.reset(task)
        won = [env.step(cmd).done for cmd in walk][-1]
        env.close()
        if won:
            return task, walk
    pytest.fail("no built-in pick_and_place_simple game with a winning go/take/go/put walkthrough")


def _commands(prompt: str) -> list[str]:
    """The commands of the trajectory being continued (after the last task cue)."""
    tail = prompt[prompt.rfind("\nHere is the task.\n") :]
    return [seg.split("\n", 1)[0].strip() for seg in tail.split("\n>")[1:] if seg.strip()]


def test_figure5_edit_a_hallucinated_thought_add_a_hint_and_win(browser, page, llm, start_app, tmp_path):
    from agent.engine import Engine
    from sessions.store import Store
    from trajectory.records import AgentConfig

    task, walk = _alfworld_game()
    go_obj, take, go_recep, put = walk
    obj = take[len("take ") : take.index(" from ")]
    recep = put[put.index(" in/on ") + len(" in/on ") :]
    think1 = (
        f"think: To solve the task, I need to find and take {obj}, then put it in {recep}. First I go to {go_obj[6:]}."
    )
    good = f"Now I find {obj}. Next, I need to take it."
    bad_sentence = " I also see that the task is already done, so I only need to look around."
    bad = f"think: {good}{bad_sentence}"
    dawdle = f"think: I am at {recep} now. I wonder what is here."
    hint = f"Hint: I am holding {obj} and I am at {recep}; I should put it there now."

    def policy(body: dict) -> str:
        cmds = _commands(prompt_text(body))
        last = cmds[-1] if cmds else None
        if last is None:
            return " " + think1
        nxt = {
            think1: go_obj,
            go_obj: bad,
            bad: "look",
            "look": "look",
            f"think: {good}": take,
            take: go_recep,
            go_recep: dawdle,
            dawdle: "look",
            f"think: {hint}": put,
        }.get(last, "look")
        return " " + nxt

    llm.set_responder(policy)
    db = tmp_path / "e2e.db"
    store = Store(db)
    ep, v1 = Engine(store).start_episode(
        task,
        AgentConfig(model="scripted-model", base_url=llm.base_url, max_steps=10, max_retries=1, timeout_s=10),
        {"wording": "paper"},
        name="figure 5",
    )
    store.close()
    app = start_app()

    # 1. the model runs and fails: the hallucinated thought at step 3, then it loops
    page.goto(f"{app.url}/editor?episode={ep.id}")
    see(page, "Your task is to: " + task.text.split("Your task is to: ")[1], exact=False)
    click(page, "btn_run_end")
    see(page, "Done: failure (reward 0). Edit a thought or action above to try another way.", 60_000)
    see(page, f"Act 3: {bad}")

    # 2. edit step 3: delete the bad sentence, regenerate from there (a new version)
    click(page, f"editbtn_{v1.id}_3")
    box = key(page, f"ed_thought_{v1.id}_3").locator("textarea")
    _expect()(box).to_have_value(bad[len("think: ") :])
    fill(page, f"ed_thought_{v1.id}_3", box.input_value().replace(bad_sentence, ""))
    _expect()(key(page, f"ed_keep_{v1.id}_3").locator("input[type=radio]").first).to_be_checked()  # the default
    click(page, f"ed_apply_{v1.id}_3")
    see(page, f"Act 3: think: {good}")
    see(page, "Step 3 · edited by a person (thought rewritten)")
    v2 = int(re.search(r"version=(\d+)", page.url).group(1))
    assert v2 != v1.id

    # 3. resume three steps: the agent takes the object, goes there, and dawdles
    fill(page, "run_n", "3")
    click(page, "btn_run_n")
    see(page, f"Act 6: {dawdle}", 60_000)
    _expect()(key(page, "step_7")).to_have_count(0)

    # 4. a hint after step 5 (replacing the dawdling), then run to the end: success
    click(page, f"editbtn_{v2}_5")
    choose(page, f"ed_kind_{v2}_5", "Insert a thought after this step")
    fill(page, f"ed_insert_{v2}_5", hint)
    choose(page, f"ed_keep_{v2}_5", "Regenerate from here")
    click(page, f"ed_apply_{v2}_5")
    see(page, f"Act 6: think: {hint}")
    v3 = int(re.search(r"version=(\d+)", page.url).group(1))
    click(page, "btn_run_end")
    see(page, "Done: success (reward 1).", 60_000)
    see(page, f"Act 7: {put}")
    snap(page, "figure5-editor")

    # the database agrees: three versions, the failing one unchanged
    store = Store(db)
    assert store.versions.get(v1.id).outcome.success is False and len(store.versions.steps(v1.id)) == 10
    assert store.versions.get(v3).outcome.success is True
    assert [s.action for s in store.versions.steps(v3)][-1] == put
    store.close()

    # 5. Compare: the failing and the succeeding version side by side
    page.goto(f"{app.url}/compare?episode={ep.id}&left={v1.id}&right={v3}")
    table = page.locator("table.rd-cmp")
    _expect()(table).to_be_visible()
    _expect()(table.locator("del.rd-del").first).to_contain_text("the task is already done")
    _expect()(table.locator(".rd-failure").first).to_have_text("failure")
    _expect()(table.locator(".rd-success").first).to_have_text("success")
    _expect()(table.locator("tr.rd-edited")).to_have_count(2)  # step 3 (rewritten) and step 6 (the hint)
    snap(page, "figure5-compare")
    assert page.dialogs == []


# ---------------------------------------------------------------------- safety


def test_untrusted_text_stays_text_in_the_browser(browser, page, llm, start_app, tmp_path):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    store = Store(tmp_path / "e2e.db")
    eng = Engine(store)
    task = family("hotpotqa").list_tasks()[0]
    ep, v = eng.start_episode(task, AgentConfig(model="scripted-model", base_url=llm.base_url))
    eng.human_step(v.id, thought=f"I think {EVIL}", action=f"Search[{EVIL}]")
    obs = store.versions.steps(v.id)[0].observation
    assert EVIL in obs, obs  # the environment echoes the search term
    edited = eng.editor.edit(v.id, 1, "rewrite_thought", "a plain thought", keep_rest=True)
    store.close()
    app = start_app()

    def nothing_live() -> None:
        main = page.locator("section.stMain, [data-testid='stMain']").first
        assert main.locator("script").count() == 0
        assert main.locator("img[src='x']").count() == 0
        assert main.locator("a[href='http://evil']").count() == 0

    page.goto(f"{app.url}/editor?episode={ep.id}&version={v.id}")
    see(page, f"Observation 1: {obs}")
    see(page, f"Thought 1: I think {EVIL}")
    nothing_live()
    page.goto(f"{app.url}/compare?episode={ep.id}&left={v.id}&right={edited.id}")
    _expect()(page.locator("table.rd-cmp")).to_contain_text("<script>alert(1)</script>")
    nothing_live()
    page.wait_for_timeout(500)
    assert page.dialogs == []


# ---------------------------------------------------------------------- run / stop, start, human mode


def test_stop_halts_a_run_mid_way(browser, page, llm, start_app, tmp_path):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    llm.set_responder(lambda body: Reply(text=" look", delay_s=0.4))
    store = Store(tmp_path / "e2e.db")
    task = family("alfworld").list_tasks()[0]
    ep, v = Engine(store).start_episode(
        task, AgentConfig(model="scripted-model", base_url=llm.base_url, cache=False, timeout_s=10)
    )
    store.close()
    app = start_app()
    page.goto(f"{app.url}/editor?episode={ep.id}")
    click(page, "btn_run_end")
    _expect()(key(page, "step_3")).to_be_visible(timeout=30_000)  # progress is visible while it runs
    _expect()(page.get_by_text(re.compile(r"steps · running · \d+ added by this run"))).to_be_visible()
    click(page, "btn_stop")
    _expect()(page.get_by_text(re.compile(r"· running ·"))).to_have_count(0, timeout=10_000)
    store = Store(tmp_path / "e2e.db")
    from sessions import jobs

    deadline = time.monotonic() + 10  # the page says stopped once asked; the run's job ends within one call
    while jobs.active(store, episode_id=ep.id) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not jobs.active(store, episode_id=ep.id)
    n = len(store.versions.steps(v.id))
    page.wait_for_timeout(2000)
    assert len(store.versions.steps(v.id)) == n and 3 <= n < 50
    assert jobs.version_states(store, [v.id]) == {v.id: "stopped"}  # its run's job says so
    store.close()
    _expect()(key(page, f"step_{n + 1}")).to_have_count(0)
    _expect()(page.get_by_text(re.compile(r"steps · stopped"))).to_be_visible()


def test_start_episode_in_the_browser_and_play_it_by_hand(browser, page, llm, start_app):
    app = start_app()
    page.goto(app.link())  # the URL `react-editor app` prints
    see(page, "Start a new episode")
    # no model configured: the banner says how to connect one
    _expect()(page.get_by_text(re.compile("No model configured. Set OPENAI_API_KEY")).first).to_be_visible()
    _expect()(key(page, "new_task_text")).to_contain_text("Your task is to:")
    click(page, "new_start")
    _expect()(page.get_by_role("heading", name="Editor")).to_be_visible()
    _expect()(page).to_have_url(re.compile(r"/editor\?episode=1"))
    page.locator(".st-key-human_mode label").first.click()
    fill(page, "h_thought_1_0", "First I look at what is here.")
    sugg = key(page, "h_sugg_1_0")
    sugg.click()
    rerun_by(page, page.get_by_role("option", name=re.compile(r"^go to ")).first.click)
    action = key(page, "h_action_1_0").locator("textarea")
    _expect()(action).to_have_value(re.compile(r"^go to "))  # the suggestion fills the action box
    chosen = action.input_value()
    assert chosen.startswith("go to ")
    click(page, "h_submit")
    see(page, "Act 1: think: First I look at what is here.")
    see(page, f"Act 2: {chosen}")
    see(page, "Step 2 · written by a person")
    assert llm.completion_requests == []
