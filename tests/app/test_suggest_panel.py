"""Issue 29 in the app: "Suggest fixes" on a failed version in the Editor - a background job,
then candidate cards with rationale, what-if bars and verdict; Accept makes the edit and
resumes; Dismiss sets a card aside. AppTest, toy room, scripted agent and critic."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from sessions import suggestions
from tests.app_helpers import alerts, captions
from tests.suggest_agents import GOOD, HINT, IDLE, critic_json, fail_episode

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_editor(toy, monkeypatch, episode: int) -> AppTest:
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REACT_EDITOR_MODEL"):
        monkeypatch.delenv(var, raising=False)
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("app_pages/editor.py")
    at.query_params["episode"] = str(episode)
    return ok(at.run())


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    return at


def wait_job(at: AppTest, timeout_s: float = 60.0) -> AppTest:
    """Rerun until the suggest job has finished (AppTest does not tick fragments)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if at.session_state["suggest_job"].finished.is_set():
            return ok(at.run())
        time.sleep(0.1)
    raise AssertionError("the suggest job did not finish")


def test_suggest_fixes_cards_accept_and_dismiss(toy, monkeypatch):
    agent = fail_episode(toy)
    agent.critic = critic_json(IDLE, GOOD)
    at = open_editor(toy, monkeypatch, 1)
    assert any(e.label.startswith("Suggest fixes") for e in at.expander)
    at.number_input(key="sg_n_1").set_value(5)
    ok(at.button(key="sg_run_1").click().run())
    at = wait_job(at)
    shown = [t.value for t in at.text]
    assert "#1 · step 2 · insert thought before · candidate 2" in shown and HINT in shown
    assert any(t.startswith("proven: +100 points [+") for t in shown)
    assert any(t.startswith("not shown: +0 points [") for t in shown)
    assert any("80% power to prove a rise of" in c.value for c in at.caption)  # issue 40: what N can detect
    assert "Why: the shelf is empty" in shown
    assert len(at.get("vega_lite_chart")) == 2  # each verified card has its what-if bars
    assert any("Candidates at steps 1 (1), 2 (1)" in c.value for c in at.caption)
    css = [h.proto.body for h in at.get("html") if "8250df" in h.proto.body]
    assert css and '.ov-mark[href="#step-1"], .ov-mark[href="#step-2"]' in css[0]  # marked on the strip
    s = suggestions.latest(toy.store, 1)
    ok(at.button(key=f"sg_dismiss_{s.id}_1").click().run())
    assert suggestions.latest(toy.store, 1).candidates[0].state == "dismissed"
    ok(at.button(key=f"sg_accept_{s.id}_2").click().run())
    new = toy.store.episodes.get(1).current_version
    assert new != 1
    steps = toy.store.versions.steps(new)
    assert steps[1].thought == HINT and steps[1].edit.origin["candidate"] == 2
    assert suggestions.latest(toy.store, 1).candidates[1].accepted_version == new
    # issue 39: the 20 verification rollouts took no v-number: the fix is v2 (it read "v22"), on its card too
    from sessions import numbering

    assert numbering.label_of(toy.store, new) == "v2" and len(toy.store.versions.ids(1)) == 22
    old = AppTest.from_file(APP, default_timeout=30)
    old.switch_page("app_pages/editor.py")
    old.query_params["episode"], old.query_params["version"] = "1", "1"
    assert "accepted as v2" in " ".join(t.value for t in ok(old.run()).text)  # the card on the failed v1
    # the Editor shows where the step came from: a fixed label and the critic, prompt hash and groups
    at = open_editor(toy, monkeypatch, 1)
    assert any(e.label.startswith("Annotate v2:") for e in at.expander)
    assert any("Step 2 · proven suggested fix accepted by a person" in c.value for c in at.caption)
    assert any(
        t.value.startswith("suggested by critic scripted-model (prompt command-v1, sha256 ")
        and "proven: +100 points" in t.value
        for t in at.text
    )


def test_no_panel_on_a_won_version(toy, monkeypatch):
    agent = fail_episode(toy)
    agent.critic = critic_json(GOOD)
    v = toy.engine.editor.edit(1, 2, "insert_thought", HINT)
    toy.engine.run(v.id)
    assert toy.store.versions.get(v.id).outcome.success
    at = open_editor(toy, monkeypatch, 1)
    assert not any(e.label.startswith("Suggest fixes") for e in at.expander)


def _experiment_with_failures(scripted_llm, tmp_path, monkeypatch) -> str:
    """Experiment "x" (2 HotpotQA tasks) run by an agent that a thought rewritten at step 1
    fixes; returns its database path."""
    from react_editor.main import main
    from tests.suggest_agents import MAGIC, hotpot_fixer

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    fix = {"step": 1, "kind": "rewrite_thought", "text": MAGIC, "rationale": "read it again"}
    scripted_llm.set_responder(hotpot_fixer([fix]))
    db_ = str(tmp_path / "x.db")
    assert (
        main(
            [
                "experiment",
                "run",
                "--env",
                "hotpotqa",
                "--limit",
                "2",
                "--name",
                "x",
                "--model",
                "m",
                "--base-url",
                scripted_llm.base_url,
                "--db",
                db_,
            ]
        )
        == 0
    )
    return db_


def test_experiments_page_shows_the_fixes_and_accepts_all_proven(scripted_llm, tmp_path, monkeypatch, capsys):
    from react_editor.main import main
    from sessions import exemplar_sets
    from sessions.store import Store
    from tests.suggest_agents import MAGIC

    db_ = _experiment_with_failures(scripted_llm, tmp_path, monkeypatch)
    assert main(["suggest", "--experiment", "x", "--where", "failed", "--verify", "5", "--db", db_]) == 0
    capsys.readouterr()
    store = Store(db_)
    exemplar_sets.create_set(store, "fixes", "hotpotqa")

    class Toy:  # what open_editor needs
        db = tmp_path / "x.db"

    at = open_editor(Toy, monkeypatch, 1)
    at.switch_page("app_pages/experiments.py")
    ok(at.run())
    (df,) = [d for d in at.dataframe if "best candidate" in d.value.columns]
    assert len(df.value) == 2 and list(df.value["effect"]) == [100, 100]
    assert df.value.iloc[0]["best candidate"] == f"step 1 rewrite_thought: {MAGIC}"
    assert df.value.iloc[0]["verdict"].startswith("proven: +100 points")
    assert df.value.iloc[0]["adjusted p"].endswith("(Benjamini-Hochberg over 2)")  # issue 40: raw and adjusted p
    at.text_input(key="sg_x_set").set_value("fixes")
    ok(at.button(key="sg_x_accept").click().run())
    assert at.session_state["sg_x_job"].finished.wait(60)
    assert any("the 5 fresh rollouts per arm at positions 6-10" in t.value for t in at.text)  # confirmed first
    tasks = [store.episodes.get(store.versions.get(r).episode_id).task.id for r in (1, 2)]
    assert any(
        c.startswith(
            f"Leakage: exemplar set 'fixes' now holds a trajectory of 2 task(s) of "
            f"experiment x: {', '.join(tasks)} - leaked"
        )
        for c in captions(at)
    )
    entries = exemplar_sets.entries(store, "fixes")
    assert len(entries) == 2
    for e in entries:  # resumed to a success, then added to the set
        v = store.versions.get(e.version_id)
        steps = store.versions.steps(v.id)
        assert v.outcome.success and steps[0].thought == MAGIC
        assert steps[0].edit.origin["verdict"].startswith("proven")
    store.close()


def test_stop_halts_the_suggest_job_and_running_again_continues(toy, monkeypatch):
    from sessions import jobs
    from tests.scripted_server import Reply

    agent = fail_episode(toy)
    agent.critic = critic_json(IDLE, GOOD)
    # once two rollouts are done, the model holds every answer until Stop was pressed: the job
    # is surely mid-run when stopped (4 rollouts an arm, not 20 run to leave time for the click)
    hold, release = threading.Event(), threading.Event()

    def respond(body):
        if hold.is_set():
            release.wait(60)
        return Reply(text=agent(body), delay_s=0.05)

    toy.llm.set_responder(respond)
    at = open_editor(toy, monkeypatch, 1)
    at.number_input(key="sg_n_1").set_value(4)
    ok(at.button(key="sg_run_1").click().run())
    job = at.session_state["suggest_job"]
    deadline = time.time() + 30
    while job.done_n < 2 and time.time() < deadline:
        time.sleep(0.01)
    hold.set()
    ok(at.run())
    assert any("Press Stop" in p.proto.text for p in at.get("progress"))
    ok(at.button(key="sg_stop").click().run())
    release.set()
    assert job.finished.wait(30)
    at = ok(at.run())
    assert jobs.get(toy.store, job.id).state == "stopped"
    states = [c.state for c in suggestions.latest(toy.store, 1).candidates]
    assert "pending" in states  # what did not finish is left for the next run
    assert any(t.value.startswith("not verified yet") for t in at.text)
    toy.llm.set_responder(agent)
    ok(at.button(key="sg_run_1").click().run())
    at = wait_job(at, 120)
    assert [c.state for c in suggestions.latest(toy.store, 1).candidates] == ["verified", "verified"]


def test_stop_cancels_the_critic_call_in_flight(toy, monkeypatch):
    """Issue 38: Stop while the critic call hangs (a server that never answers) ends the job
    at once: the call is cancelled, nothing is recorded, no request leaves after it. The 30 s
    wait only guards a hang (before the fix the critic call waited for its timeout, retried
    and failed)."""
    from sessions import jobs
    from tests.scripted_server import Reply

    fail_episode(toy)
    toy.llm.requests.clear()
    toy.llm.set_responder(lambda body: Reply(hang=True))
    at = open_editor(toy, monkeypatch, 1)
    ok(at.button(key="sg_run_1").click().run())
    job = at.session_state["suggest_job"]
    deadline = time.time() + 30
    while not toy.llm.completion_requests and time.time() < deadline:
        time.sleep(0.02)
    stopped_at = time.monotonic()
    ok(at.button(key="sg_stop").click().run())
    assert job.finished.wait(30), "Stop waited for the critic's answer"
    assert [r for r in toy.llm.completion_requests if r.received_at > stopped_at] == []
    assert len(toy.llm.completion_requests) == 1
    assert jobs.get(toy.store, job.id).state == "stopped"
    latest = suggestions.latest(toy.store, 1)
    assert latest is None or not latest.candidates  # no answer recorded
    at = ok(at.run())
    assert any("stopped" in a for a in alerts(at, "error")), alerts(at, "error")


def _drawn(at: AppTest) -> list[str]:
    """Step captions ('Step N') and card headers ('#R · step N · ...'), in the order drawn."""
    import re

    out = []

    def walk(node):
        t = type(node).__name__
        if t == "Caption" and re.fullmatch(r"Step \d+ · .*", node.value):
            out.append(node.value.split(" · ")[0])
        elif t == "Text" and re.match(r"#\d+ · step \d+ · ", node.value):
            out.append(node.value)
        for c in getattr(node, "children", {}).values():
            walk(c)

    walk(at._tree)
    return out


def test_each_card_is_drawn_under_its_step(toy, monkeypatch):
    from agent import suggest

    agent = fail_episode(toy)
    agent.critic = critic_json(IDLE, GOOD)
    suggest.suggest_version(toy.engine, 1, suggest.Critic(), 3, suggest.Verify(n=3))
    at = open_editor(toy, monkeypatch, 1)
    order = _drawn(at)
    good = "#1 · step 2 · insert thought before · candidate 2"
    idle = "#2 · step 1 · rewrite thought · candidate 1"
    assert order.index(idle) == order.index("Step 1") + 1  # right under step 1, before step 2
    assert order.index(good) == order.index("Step 2") + 1  # right under step 2, before step 3
    assert order.count(good) == 1 and order.count(idle) == 1  # not again in the panel
    assert at.get("vega_lite_chart")  # with its what-if bars


def test_experiments_page_starts_suggest_for_the_failures(scripted_llm, tmp_path, monkeypatch):
    from sessions import jobs
    from sessions.store import Store

    db_ = _experiment_with_failures(scripted_llm, tmp_path, monkeypatch)

    class Toy:  # what open_editor needs
        db = tmp_path / "x.db"

    at = open_editor(Toy, monkeypatch, 1)
    at.switch_page("app_pages/experiments.py")
    ok(at.run())
    assert not [d for d in at.dataframe if "best candidate" in d.value.columns]  # nothing suggested yet
    at.number_input(key="sg_x_n").set_value(4)
    at.number_input(key="sg_x_limit").set_value(1)  # --limit 1
    ok(at.button(key="sg_x_run_btn").click().run())
    job = at.session_state["sg_x_run"]
    assert job.finished.wait(60) and job.error is None
    ok(at.run())
    (df,) = [d for d in at.dataframe if "best candidate" in d.value.columns]
    assert len(df.value) == 1 and df.value.iloc[0]["verdict"].startswith("proven: +100 points")
    store = Store(db_)
    row = jobs.get(store, job.id)  # a job like the others: `react-editor jobs` lists it
    assert row.kind == "suggest" and row.state == "done" and row.experiment_id is not None
    store.close()


def test_stop_halts_the_experiments_suggest_job_and_starting_again_continues(scripted_llm, tmp_path, monkeypatch):
    from dataclasses import replace

    from react_editor.main import main
    from sessions import jobs
    from sessions.store import Store
    from tests.scripted_server import as_reply
    from tests.suggest_agents import MAGIC, hotpot_fixer

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    fix = {"step": 1, "kind": "rewrite_thought", "text": MAGIC, "rationale": "read it again"}
    agent = hotpot_fixer([fix])
    scripted_llm.set_responder(agent)
    db_ = str(tmp_path / "x.db")
    assert (
        main(
            [
                "experiment",
                "run",
                "--env",
                "hotpotqa",
                "--limit",
                "2",
                "--name",
                "x",
                "--model",
                "m",
                "--base-url",
                scripted_llm.base_url,
                "--db",
                db_,
            ]
        )
        == 0
    )
    scripted_llm.set_responder(lambda body: replace(as_reply(agent(body)), delay_s=0.05))  # text or Reply

    class Toy:  # what open_editor needs
        db = tmp_path / "x.db"

    at = open_editor(Toy, monkeypatch, 1)
    at.switch_page("app_pages/experiments.py")
    ok(at.run())
    at.number_input(key="sg_x_n").set_value(10)
    ok(at.button(key="sg_x_run_btn").click().run())
    job = at.session_state["sg_x_run"]
    deadline = time.time() + 30
    while not job.detail and time.time() < deadline:  # some rollouts under way
        time.sleep(0.05)
    ok(at.run())
    assert any("Press Stop" in p.proto.text for p in at.get("progress"))
    ok(at.button(key="sg_x_stop").click().run())
    assert job.finished.wait(30)
    at = ok(at.run())
    store = Store(db_)
    assert jobs.get(store, job.id).state == "stopped"
    scripted_llm.set_responder(agent)
    ok(at.button(key="sg_x_run_btn").click().run())  # the form is back: the same run again continues
    again = at.session_state["sg_x_run"]
    assert again.id != job.id and again.finished.wait(120) and again.error is None
    ok(at.run())
    (df,) = [d for d in at.dataframe if "best candidate" in d.value.columns]
    assert len(df.value) == 2 and all(v.startswith("proven: +100 points") for v in df.value["verdict"])
    store.close()


def test_a_card_at_an_earlier_step_drawn_as_a_block_is_still_shown(toy, monkeypatch):
    from agent import suggest
    from tests.suggest_agents import RoomAgent, cfg
    from tests.toy_envs import ROOM_TASK

    agent = RoomAgent()
    toy.llm.set_responder(agent)
    _, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=34))  # steps 1-4 are an earlier block
    assert not toy.engine.run(v.id).success
    agent.critic = critic_json(IDLE)
    suggest.suggest_version(toy.engine, v.id, suggest.Critic(), 1, suggest.Verify(n=1))
    at = open_editor(toy, monkeypatch, 1)
    assert "Step 1" not in _drawn(at)  # not drawn in full
    assert _drawn(at).count("#1 · step 1 · rewrite thought · candidate 1") == 1


def test_accept_all_proven_into_a_new_set_built_on_the_experiments_exemplars(
    scripted_llm, tmp_path, monkeypatch, capsys
):
    """Issue 39: a new set named here starts from a base (default: the set the experiment
    ran with, here the built-in exemplars), so it drives a re-run of every task type."""
    from agent.exemplars import builtin_prompt_dict
    from react_editor.main import main
    from sessions import exemplar_sets
    from sessions.store import Store
    from tests.suggest_agents import MAGIC

    db_ = _experiment_with_failures(scripted_llm, tmp_path, monkeypatch)
    assert main(["suggest", "--experiment", "x", "--where", "failed", "--verify", "5", "--db", db_]) == 0
    capsys.readouterr()

    class Toy:  # what open_editor needs
        db = tmp_path / "x.db"

    at = open_editor(Toy, monkeypatch, 1)
    at.switch_page("app_pages/experiments.py")
    ok(at.run())
    at.text_input(key="sg_x_set").set_value("new-fixes")
    ok(at.run())
    assert at.selectbox(key="sg_x_base").value == "the built-in exemplars"
    ok(at.button(key="sg_x_accept").click().run())
    assert at.session_state["sg_x_job"].finished.wait(60)
    with closing(Store(db_)) as store:
        s = exemplar_sets.get_set(store, "new-fixes")
        assert s.base == "builtin" and s.base_note.startswith("builtin sha256:")
        env, prompts = exemplar_sets.prompt_dict(store, "new-fixes")
        assert list(prompts) == list(builtin_prompt_dict("hotpotqa")) and MAGIC in prompts["webthink_simple6"]
