"""Rollouts under jobs: a resample killed with -9 never moves the current version, and running it
again continues it; a rollout version and its group membership are written in one transaction.
Each test failed before the change it names."""

from __future__ import annotations

import json
import signal
import time
from contextlib import closing

import pytest

from sessions import rollouts
from sessions.store import Store
from tests.cli_helpers import cli
from tests.experiment_agents import wiki_agent
from tests.job_processes import HOTPOT, _env, _episode, _spawn, _wait
from tests.scripted_server import Reply


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


# ---------------------------------------------------------------------- 4 and 19.9: rollouts


def test_kill_9_during_resample_never_moves_the_current_version_and_again_continues(tmp_path, scripted_llm, capsys):
    db, ep, vid = _episode(tmp_path, scripted_llm, capsys)
    agent = wiki_agent({r["question"]: r["answer"] for r in HOTPOT}, react_steps=2)
    scripted_llm.set_responder(lambda body: Reply(text=agent(body).text, delay_s=0.4))
    args = [
        "resample",
        ep,
        "--step",
        "2",
        "--n",
        "6",
        "--concurrency",
        "1",
        "--temperature",
        "0.7",
        "--db",
        db,
        "--json",
    ]
    proc = _spawn(args, _env(tmp_path))

    def one_member() -> bool:
        with closing(Store(db)) as store:
            return any(g.members for g in rollouts.groups(store, ep))

    _wait(one_member)
    time.sleep(0.2)  # mid-rollout
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    scripted_llm.set_responder(agent)  # the delay was for the kill only
    with closing(Store(db)) as store:
        assert store.episodes.get(ep).current_version == vid
        (g,) = rollouts.groups(store, ep)
        killed = dict(g.members)
    code, out, err = cli(capsys, *map(str, args))  # again, here
    assert code == 0, err
    with closing(Store(db)) as store:
        (g2,) = rollouts.groups(store, ep)  # the same group, continued
        assert g2.id == g.id and all(g2.members[p] == m for p, m in killed.items()) and len(g2.members) == 6
        assert all(store.versions.get(m).outcome.done for m in g2.members.values())
        assert store.episodes.get(ep).current_version == vid
    assert json.loads(out.strip().splitlines()[-1])["n"] == 6


def test_a_rollout_version_and_its_membership_are_one_transaction(toy, monkeypatch):
    from agent.rollouts import Request, resample
    from tests.engine_scripts import cfg
    from tests.toy_envs import ROOM_TASK

    toy.llm.set_default(" go to shelf 1")
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=3))
    toy.engine.run(v.id)
    before = len(toy.store.versions.of_episode(ep.id))

    def killed(*a, **k):
        raise RuntimeError("killed")  # a kill between the version and its membership

    monkeypatch.setattr(rollouts, "add_member", killed)
    run = resample(toy.engine, Request(v.id, 2, 2, 0.5), concurrency=1)
    assert run.errors and all("killed" in e for e in run.errors)
    assert len(toy.store.versions.of_episode(ep.id)) == before  # no orphan branch
    assert toy.store.episodes.get(ep.id).current_version == v.id
