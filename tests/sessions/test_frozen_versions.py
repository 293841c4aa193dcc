"""Issue 26 item 5: frozenness is the store's rule, and a rollout frozen while it runs stays
a rollout. A version that is annotated, in an exemplar set or branched from refuses new
steps and a new status/outcome whoever writes (its name may still change); a rollout
annotated mid-run goes on in a child that takes its place in the group and never becomes
the episode's current version."""

from __future__ import annotations

from contextlib import closing

import pytest

import sessions.rollouts
from agent import rollouts
from sessions import annotations
from sessions.store import Store, VersionFrozen
from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig, Outcome, Step

OPENING = " think: To solve the task, I need to find a mug, then put it in table 1. "
WINNING = (
    ("OK.\n>", " go to cabinet 1"),
    ("The cabinet 1 is closed.\n>", " open cabinet 1"),
    ("In it, you see a mug 1.\n>", " take mug 1 from cabinet 1"),
    ("from the cabinet 1.\n>", " go to table 1"),
    ("On the table 1, you see nothing.\n>", " put mug 1 in/on table 1"),
)


def winner(body: dict) -> str:
    """The toy room's winning path, whatever step the prompt is at."""
    prompt = body["prompt"]
    tail = prompt[prompt.rfind("Here is the task.") :]
    return next((action for obs, action in WINNING if tail.endswith(obs)), OPENING)


@pytest.fixture
def episode(toy):
    toy.llm.set_responder(winner)
    cfg = AgentConfig(model="scripted-model", base_url=toy.llm.base_url, max_retries=2, timeout_s=5, max_steps=8)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg)
    assert toy.engine.run(v.id).success
    return ep, v


def a_step(index: int) -> Step:
    return Step(index=index, thought=None, action="look", observation="nothing", source="model")


def test_the_store_refuses_to_change_a_frozen_version(toy, episode):
    ep, v = episode
    child, _ = toy.store.versions.branch(v, at_step=toy.store.versions.steps(v.id)[0], make_current=False)
    n = len(toy.store.versions.steps(v.id))
    for frozen in (v.id,):  # branched from
        with pytest.raises(VersionFrozen, match=f"version {v.episode_id}:1 is frozen"):  # as people read it
            toy.store.versions.append(frozen, [a_step(n + 1)])
        with pytest.raises(VersionFrozen):
            toy.store.versions.update(frozen, status="stopped")
    annotations.annotate_version(toy.store, child.id, by="ann", notes="looked")  # annotated
    for change in (
        {"status": "stopped"},
        {"outcome": Outcome(done=True, success=True, reward=1.0)},
        {"error": "late"},
        {"leaf_step_id": None},
    ):
        with pytest.raises(VersionFrozen):
            toy.store.versions.update(child.id, **change)
    with pytest.raises(VersionFrozen):
        toy.store.versions.append(child.id, [a_step(2)])
    assert len(toy.store.versions.steps(v.id)) == n and len(toy.store.versions.steps(child.id)) == 1
    assert toy.store.versions.get(child.id).status == "open"
    assert toy.store.versions.update(child.id, name="still a label").name == "still a label"


def test_a_rollout_frozen_while_it_runs_stays_in_its_group_and_never_becomes_current(toy, episode):
    ep, v = episode
    calls = {"n": 0}

    def freezing(body: dict) -> str:
        calls["n"] += 1
        if calls["n"] == 2:  # between two steps of the rollout a person annotates it
            with closing(Store(toy.db)) as s:
                (rollout,) = [x.id for x in s.versions.of_episode(ep.id) if x.id != v.id]
                annotations.annotate_version(s, rollout, by="ann", notes="looked at it mid-run")
        return winner(body)

    toy.llm.set_responder(freezing)
    run = rollouts.resample(toy.engine, rollouts.Request(v.id, 2, 1, temperature=0.7), concurrency=1)
    assert not run.errors
    (group,) = sessions.rollouts.groups(toy.store, ep.id)
    (member,) = sessions.rollouts.members(toy.store, group.id).values()
    versions = {x.id: x for x in toy.store.versions.of_episode(ep.id)}
    assert len(versions) == 3 and member not in (v.id, 2)  # the continuation took the rollout's place
    assert versions[member].parent_version == 2 and versions[member].outcome.success
    assert toy.store.episodes.get(ep.id).current_version == v.id  # a rollout never becomes current
    assert sessions.rollouts.group_of_versions(toy.store, ep.id) == {member: group.id}
    assert run.stats[0].n == 1 and run.stats[0].success == 1 and run.stats[0].versions == [member]
