"""Issue 26 item 7: a long-running app does not grow. After hundreds of step jobs of as many
tabs that closed without collecting their results, this process keeps no handle of an ended
job, no per-episode lock, and no entry of a closed tab (each table must be empty: one entry
left behind by any job fails, so more jobs would add time, not coverage)."""

from __future__ import annotations

import pytest

from agent import jobs
from app_pages import stepjobs
from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig, Outcome

JOBS = 200  # ten per episode
EPISODES = 20


@pytest.fixture(autouse=True)
def _fresh_tables(monkeypatch):
    """This process's tables as a fresh app has them (other tests' tabs and jobs left out)."""
    monkeypatch.setattr(jobs, "_handles", {})
    monkeypatch.setattr(stepjobs, "_mine", {})
    monkeypatch.setattr(stepjobs, "_seen", {}, raising=False)


def test_hundreds_of_jobs_leave_no_handles_locks_or_tab_entries(toy, monkeypatch):
    cfg = AgentConfig(model="scripted-model", base_url=toy.llm.base_url, max_retries=0, timeout_s=5)
    versions = []
    for _ in range(EPISODES):  # finished versions: a step job on one ends at once, without a model call
        ep, v = toy.store.episodes.create(ROOM_TASK, cfg)
        toy.store.versions.update(v.id, status="done", outcome=Outcome(done=True, success=False, reward=0.0))
        versions.append(v.id)
    clock = {"now": 0.0}
    monkeypatch.setattr(stepjobs, "_clock", lambda: clock["now"], raising=False)
    ended = []
    for n in range(JOBS):
        h = stepjobs.start(toy.engine, f"tab-{n}", versions[n % EPISODES])
        assert h.finished.wait(30)
        ended.append(h)
    assert all(h.state == "failed" and "is finished" in str(h.error) for h in ended)  # each ran, on its episode's lock
    assert len(jobs._handles) == 0  # an ended job's handle stays only with the face that started it
    assert len(toy.engine._locks) == 0  # an episode's lock lives while it is held
    clock["now"] = stepjobs.IDLE_S + 1  # the tabs closed long ago; one tab is still open
    assert stepjobs.current(toy.store, "open-tab", versions[0]) is None
    assert len(stepjobs._mine) == 0 and set(stepjobs._seen) == {"open-tab"}


def test_a_live_tab_keeps_its_finished_step_until_it_collects_it(toy, monkeypatch):
    cfg = AgentConfig(model="scripted-model", base_url=toy.llm.base_url, max_retries=0, timeout_s=5)
    ep, v = toy.store.episodes.create(ROOM_TASK, cfg)
    toy.store.versions.update(v.id, status="done", outcome=Outcome(done=True, success=False, reward=0.0))
    clock = {"now": 0.0}
    monkeypatch.setattr(stepjobs, "_clock", lambda: clock["now"], raising=False)
    h = stepjobs.start(toy.engine, "tab", v.id)
    assert h.finished.wait(30)
    for tick in range(1, 5):  # the tab asks at every rerun: never idle
        clock["now"] = tick * stepjobs.IDLE_S * 0.9
        assert stepjobs.current(toy.store, "tab", v.id) is h
    stepjobs.collect(h)
    assert stepjobs.current(toy.store, "tab", v.id) is None
