"""Issue 42 item 1 in the app: every selector of an API style (project defaults, a new episode,
the Editor's agent settings, a new experiment, an experiment's re-run, suggest's critic on a
version and on an experiment's failures) offers completions, chat, messages and tools - the
records' `ApiStyle`, no list of the app's own - and what is chosen is what is used."""

from __future__ import annotations

from contextlib import closing
from typing import get_args

from sessions.store import Store
from tests.app_helpers import captions, ok
from tests.suggest_agents import fail_episode
from trajectory.records import ApiStyle

FOUR = ["completions", "chat", "messages", "tools"]


def _offers(at, key: str, inherit: bool = False) -> list:
    box = at.selectbox(key=key)
    assert box.label.endswith("API style")
    return box.options[1:] if inherit else box.options


def test_the_four_styles_are_the_records_own():
    assert list(get_args(ApiStyle)) == FOUR


def test_settings_new_episode_and_editor_offer_every_style(app, toy):
    _, make = app
    assert _offers(make("settings"), "set_api_style") == FOUR
    assert _offers(make("episodes"), "new_api_style") == FOUR
    fail_episode(toy)  # a failed version: the Editor shows its agent settings and the critic's
    at = make("editor", episode=1)
    assert _offers(at, "cfg_api_1") == FOUR
    critic = at.selectbox(key="sg_api_1")
    assert critic.options == ["(the version's own)", *FOUR] and critic.value is None
    # the agent settings' choice is the new version's style
    at.selectbox(key="cfg_api_1").set_value("tools")
    ok(at.button(key="cfg_apply").click().run())
    current = toy.store.episodes.get(1).current_version
    assert current != 1 and toy.store.versions.config(current).api_style == "tools"


def test_experiments_new_rerun_and_critic_offer_every_style(page):
    make, db, _llm = page
    from agent import experiment
    from agent.task_selection import select_tasks
    from trajectory.records import AgentConfig

    with closing(Store(db)) as store:
        tasks = select_tasks("hotpotqa", "builtin", source=None, limit=2, sample=None, seed=0)
        exp = experiment.create(
            store, env="hotpotqa", method="react", config=AgentConfig(model="m"), tasks=tasks, name="base"
        )
        store.db.execute("update experiment_items set status = 'done', success = 0 where experiment_id = ?", [exp.id])
    at = make()
    assert _offers(at, "x_api_style") == FOUR
    assert _offers(at, f"x_rr_api_{exp.id}") == FOUR
    critic = at.selectbox(key="sg_x_api")
    assert critic.options == ["(each version's own)", *FOUR]
    # a re-run in another style says so, and runs in it
    at.selectbox(key=f"x_rr_api_{exp.id}").set_value("messages")
    ok(at.run())
    assert any("api style completions -> messages" in c for c in captions(at))


def test_no_page_keeps_a_list_of_styles_of_its_own():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "app_pages"
    own = [p.name for p in sorted(root.glob("*.py")) if '"completions", "chat"' in p.read_text(encoding="utf-8")]
    assert own == []


def test_the_critic_asks_in_the_style_chosen_for_it(app, toy):
    """The version runs on completions; its critic, set to chat here, is asked on /chat/completions."""
    import time

    from tests.suggest_agents import CRITIC_MARK, critic_json

    _, make = app
    agent = fail_episode(toy)
    agent.critic = critic_json()  # no candidate: the job ends after the critic's answer
    at = make("editor", episode=1)
    at.selectbox(key="sg_api_1").set_value("chat")
    at.number_input(key="sg_n_1").set_value(1)
    ok(at.button(key="sg_run_1").click().run())
    deadline = time.time() + 60
    while not at.session_state["suggest_job"].finished.is_set():
        assert time.time() < deadline, "the suggest job did not finish"
        time.sleep(0.1)
    asked = [r for r in toy.llm.completion_requests if CRITIC_MARK in r.prompt]
    assert asked and all(r.path.endswith("/chat/completions") for r in asked)
    assert all(r.path.endswith("/v1/completions") for r in toy.llm.completion_requests if r not in asked)
