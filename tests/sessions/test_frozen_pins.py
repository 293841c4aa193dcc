"""Issue 39 item 11: a frozen version's exemplar revision never changes (the store's trigger
covers `exemplar_rev`), and the trigger's refusal is told by its result code and exact
marker, never by a message that merely contains its words."""

from __future__ import annotations

from contextlib import closing

import pytest

from sessions import exemplar_sets
from sessions.connection import FROZEN_MARK, DatabaseFailure, is_frozen_refusal
from sessions.store import Store, VersionFrozen
from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig


def _frozen_version(store: Store):
    ep, v = store.episodes.create(ROOM_TASK, AgentConfig(model="m"), {})
    store.versions.branch(v, at_step=None, make_current=False)  # branched from: frozen
    exemplar_sets.create_set(store, "s", ROOM_TASK.env)
    exemplar_sets.add_raw(store, "s", "react_put_0", "> look\nNothing.\n")
    return v, exemplar_sets.current_revision(store, "s")


def test_the_exemplar_revision_of_a_frozen_version_cannot_be_pinned(tmp_path):
    with closing(Store(tmp_path / "f.db")) as store:
        v, rev = _frozen_version(store)
        with pytest.raises(VersionFrozen, match=f"version {v.episode_id}:1 is frozen"):
            store.versions.pin_exemplar_revision(v.id, rev)
        assert store.versions.exemplar_revision(v.id) is None


def test_a_refusal_that_only_reads_like_the_trigger_is_not_frozen(tmp_path):
    """Another trigger whose message says "frozen version" is its own error, not VersionFrozen."""
    with closing(Store(tmp_path / "f.db")) as store:
        ep, v = store.episodes.create(ROOM_TASK, AgentConfig(model="m"), {})
        with store.transaction():
            store.db.execute(
                "create trigger other_rule before update of status on versions "
                "begin select raise(abort, 'no frozen version may be stopped here'); end"
            )
        with pytest.raises(DatabaseFailure) as got:
            store.versions.update(v.id, status="stopped")
        assert not isinstance(got.value, VersionFrozen) and not is_frozen_refusal(got.value)
        sql = store.db.execute("select sql from sqlite_master where name = 'versions_frozen'").fetchone()[0]
        assert FROZEN_MARK in sql and "exemplar_rev" in sql
