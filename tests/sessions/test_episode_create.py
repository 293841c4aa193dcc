"""A new episode names its first version as current when it is inserted (the id SQLite
gives that version), whatever versions other episodes made before it."""

from __future__ import annotations

from sessions.store import Store
from tests.toy_envs import WIKI_TASK
from trajectory.records import AgentConfig


def test_a_new_episode_is_current_on_its_own_first_version(tmp_path):
    store = Store(tmp_path / "e.db")
    first, v1 = store.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "one")
    store.versions.branch(v1, at_step=None, steps=[], name="more")  # the other episode's versions come first
    store.versions.branch(v1, at_step=None, steps=[], name="again")
    ep, v = store.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "two")
    assert store.versions.get(v.id).episode_id == ep.id and v.name is None
    assert store.episodes.get(ep.id).current_version == v.id == ep.current_version
    assert [x.id for x in store.versions.of_episode(ep.id)] == [v.id]
    assert store.episodes.get(first.id).current_version != v.id
    store.close()
