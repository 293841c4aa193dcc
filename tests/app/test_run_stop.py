"""Stop on an Editor run: the version reads "stopped" once the run is over, even when Stop
lands after the step in flight passed its last stop check (it then records its step just
after the run's job was closed "stopped"; the version's newer updated_at used to hide that
stop, and the version read "open").

No timing: the environment holds the step's action until the test has pressed Stop."""

from __future__ import annotations

import threading

import streamlit as st

from app_pages import stepjobs
from app_pages.editor_run import close_run
from sessions import jobs
from tests.scripted_server import Reply
from trajectory.records import AgentConfig

WAIT_S = 30.0  # only a bound on a wait that an event ends: it times nothing


def _held_env(env, entered: threading.Event, release: threading.Event) -> None:
    """The live environment blocks in its next action - after the engine's stop check,
    before the step is recorded - until `release`."""
    step = env.step

    def held(action):
        entered.set()
        assert release.wait(WAIT_S)
        return step(action)

    env.step = held


def _status(store, vid: int) -> str:
    """The version's one status word, as the Editor's selector computes it."""
    v = store.versions.get(vid)
    states = jobs.version_states(store, [vid], {vid: v.updated_at})
    return jobs.status_word(v.outcome.done, v.outcome.success, states.get(vid, v.status))


def test_stop_during_the_step_being_recorded_leaves_the_version_stopped(toy):
    _, v = toy.engine.start_episode(toy.envs.ROOM_TASK, AgentConfig(base_url=toy.llm.base_url, model="m"))
    entered, release = threading.Event(), threading.Event()
    _held_env(toy.made[-1], entered, release)
    toy.llm.push(Reply("go to cabinet 1"))
    run = jobs.create(toy.store, "run", episode_id=v.episode_id, version_id=v.id, session="tab")  # as open_run
    st.session_state["run"] = {"version": v.id, "n": None, "added": 0, "job": run.id}
    try:
        h = stepjobs.start(toy.engine, "tab", v.id, in_run=True)  # the run's next step
        assert entered.wait(WAIT_S)  # the step passed its stop check and is executing its action
        stepjobs.cancel(toy.store, "tab", v.id)  # what the Editor's Stop does
        close_run(toy.store, "stopped")
    finally:
        release.set()
        st.session_state.pop("run", None)
    assert h.finished.wait(WAIT_S)
    assert len(toy.engine.steps(toy.store.versions.get(v.id))) == 1  # the step was recorded after all
    assert jobs.get(toy.store, run.id).state == "stopped"
    assert _status(toy.store, v.id) == "stopped"
