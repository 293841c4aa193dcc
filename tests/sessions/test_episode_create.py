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


def test_episodes_made_together_each_name_their_own_first_version(tmp_path):
    """`create_many`: one insert for the episodes (their ids as SQLite returns them), one for
    their first versions: each episode, in the order asked, is current on its own version,
    whatever versions other episodes made before."""
    store = Store(tmp_path / "e.db")
    _, v1 = store.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "one")
    store.versions.branch(v1, at_step=None, steps=[], name="more")
    other = WIKI_TASK.model_copy(update={"id": "other", "text": "Question: another?"})
    made = store.episodes.create_many(
        [(WIKI_TASK, "a"), (other, "b"), (WIKI_TASK, "c")], AgentConfig(model="m"), {"k": 1}, version_name="react"
    )
    assert [ep.name for ep, _ in made] == ["a", "b", "c"]
    for ep, v in made:
        stored = store.episodes.get(ep.id)
        assert (stored.name, stored.current_version, stored.env_options) == (ep.name, v.id, {"k": 1})
        assert stored.task.key == ep.task.key
        assert store.versions.get(v.id) == v and v.episode_id == ep.id and v.name == "react"
        assert [x.id for x in store.versions.of_episode(ep.id)] == [v.id]
    assert [ep.task.key for ep, _ in made] == [WIKI_TASK.key, other.key, WIKI_TASK.key]
    store.close()
