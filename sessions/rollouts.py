"""Rollout groups: N versions sampled from one step K of one version, either as they were
(`resample`, or the `control` of a what-if) or after an edit at K (`treatment`).

A group is identified by what it samples (episode, source version, K, kind, edit, and the
agent config the rollouts run with), so running the same command again finds the same
group and continues it. Members are ordinary versions; this module owns only the two
tables that say which versions belong to which group.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, cast

from pydantic import Field

from sessions.store import Store, StoreError
from trajectory.records import AgentConfig, EditKind, Record, now

GroupKind = Literal["resample", "control", "treatment"]
GROUP_KINDS: tuple[str, ...] = ("resample", "control", "treatment")


class RolloutEdit(Record):
    """The edit a treatment applies at step K (as `Engine.edit` takes it)."""

    kind: EditKind = Field(description="The edit kind, as Engine.edit takes it.")
    text: str | None = Field(None, description="The edit's new text; None for a deletion.")


class RolloutGroup(Record):
    id: int | None = Field(None, description="Row id in this database; None until stored.")
    episode_id: int = Field(description="The episode sampled.")
    source_version: int = Field(description="The version the rollouts start from.")
    step: int = Field(description="K: the first step the rollouts write (or the step the edit is made at).")
    kind: GroupKind = Field(description="resample, control (a what-if's unedited arm) or treatment (its edited arm).")
    edit: RolloutEdit | None = Field(None, description="The edit a treatment applies at step K; None otherwise.")
    n: int = Field(description="How many rollouts were asked for (the latest request).")
    config: AgentConfig = Field(description="What the rollouts run with (temperature, step limit, ...).")
    members: dict[int, int] = Field(default_factory=dict, description="Position in the group -> version id.")
    created_at: str = Field(default_factory=now, description="When it was made (UTC, ISO 8601).")
    updated_at: str = Field(default_factory=now, description="When it last changed (UTC, ISO 8601).")

    @property
    def label(self) -> str:
        return f"{self.kind} @{self.step}"


def _key(
    episode_id: int, source_version: int, step: int, kind: str, edit: RolloutEdit | None, config: AgentConfig
) -> str:
    blob = json.dumps(
        [episode_id, source_version, step, kind, edit.model_dump() if edit else None, config.model_dump()],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()


_COLS = "id, episode_id, source_version, step, kind, edit, n, config, created_at, updated_at"


def _from_row(store: Store, r: Any) -> RolloutGroup:
    return RolloutGroup(
        id=r[0],
        episode_id=r[1],
        source_version=r[2],
        step=r[3],
        kind=r[4],
        edit=RolloutEdit.model_validate_json(r[5]) if r[5] else None,
        n=r[6],
        config=AgentConfig.model_validate_json(r[7]),
        members=members(store, r[0]),
        created_at=r[8],
        updated_at=r[9],
    )


def find_group(
    store: Store,
    *,
    episode_id: int,
    source_version: int,
    step: int,
    kind: str,
    config: AgentConfig,
    edit: RolloutEdit | None = None,
) -> RolloutGroup | None:
    """The group that samples exactly this, if one was made."""
    key = _key(episode_id, source_version, step, kind, edit, config)
    r = store.db.execute(f"select {_COLS} from rollout_groups where key = ?", [key]).fetchone()
    return _from_row(store, r) if r else None


def open_group(
    store: Store,
    *,
    episode_id: int,
    source_version: int,
    step: int,
    kind: str,
    n: int,
    config: AgentConfig,
    edit: RolloutEdit | None = None,
) -> RolloutGroup:
    """The group sampling exactly this, created if new; asking again with another N only
    moves its target (members already made are kept).
    Raises StoreError for an unknown kind, or an edit given to a resample or control
    group (or none to a treatment group)."""
    if kind not in GROUP_KINDS:
        raise StoreError(f"unknown rollout group kind {kind!r}")
    if (edit is None) != (kind != "treatment"):
        raise StoreError("a treatment group has an edit; resample and control groups have none")
    store.versions.get(source_version, episode_id)
    key = _key(episode_id, source_version, step, kind, edit, config)
    with store.transaction():
        row = store.db.execute("select id, n from rollout_groups where key = ?", [key]).fetchone()
        if row is None:
            stamp = now()
            gid = store.db.execute(
                "insert into rollout_groups (key, episode_id, source_version, step, kind, edit, n, config, "
                "created_at, updated_at) values (?,?,?,?,?,?,?,?,?,?)",
                [
                    key,
                    episode_id,
                    source_version,
                    step,
                    kind,
                    edit.model_dump_json() if edit else None,
                    n,
                    config.model_dump_json(),
                    stamp,
                    stamp,
                ],
            ).lastrowid
        else:
            gid = row[0]
            if row[1] != n:
                store.db.execute("update rollout_groups set n = ?, updated_at = ? where id = ?", [n, now(), gid])
    return group(store, cast(int, gid))  # (an insert's row id, or the row found)


def group(store: Store, group_id: int) -> RolloutGroup:
    """The rollout group. Raises StoreError for an unknown id."""
    r = store.db.execute(f"select {_COLS} from rollout_groups where id = ?", [group_id]).fetchone()
    if r is None:
        raise StoreError(f"unknown rollout group {group_id}")
    return _from_row(store, r)


def groups(store: Store, episode_id: int) -> list[RolloutGroup]:
    """The episode's groups, oldest first."""
    rows = store.db.execute(f"select {_COLS} from rollout_groups where episode_id = ? order by id", [episode_id])
    return [_from_row(store, r) for r in rows.fetchall()]


def members(store: Store, group_id: int) -> dict[int, int]:
    """{position: version id} of the group's rollouts; {} for an unknown group."""
    rows = store.db.execute("select pos, version_id from rollout_members where group_id = ? order by pos", [group_id])
    return {r[0]: r[1] for r in rows}


def add_member(store: Store, group_id: int, pos: int, version_id: int) -> None:
    """Record that `version_id` is the group's rollout number `pos` (one transaction with
    the caller's, when it holds one: the version and its membership appear together)."""
    with store.transaction():
        store.db.execute(
            "insert into rollout_members (group_id, pos, version_id) values (?,?,?)", [group_id, pos, version_id]
        )
        store.db.execute("update rollout_groups set updated_at = ? where id = ?", [now(), group_id])


def follow_member(store: Store, version_id: int, continuation: int) -> bool:
    """A rollout frozen while it ran goes on in `continuation`, which takes its place in
    its group (same position): True when `version_id` was a rollout."""
    with store.transaction():
        moved = store.db.execute(
            "update rollout_members set version_id = ? where version_id = ?", [continuation, version_id]
        ).rowcount
        if moved:
            store.db.execute(
                "update rollout_groups set updated_at = ? where id in (select group_id from "
                "rollout_members where version_id = ?)",
                [now(), continuation],
            )
    return bool(moved)


def group_of_versions(store: Store, episode_id: int) -> dict[int, int]:
    """version id -> group id, for every grouped version of the episode."""
    rows = store.db.execute(
        "select m.version_id, m.group_id from rollout_members m join rollout_groups g on g.id = m.group_id "
        "where g.episode_id = ?",
        [episode_id],
    )
    return {r[0]: r[1] for r in rows}


def finished_counts(store: Store, episode_id: int) -> dict[int, tuple[int, int]]:
    """group id -> (its finished rollouts among its first N, how many of them succeeded), for
    every group of the episode: stored with the group and kept by the store's triggers
    (migration 18), so what a group's node and row show costs one row per group, never a read
    of its members (an episode may hold thousands)."""
    rows = store.db.execute("select id, finished, successes from rollout_groups where episode_id = ?", [episode_id])
    return {r[0]: (r[1], r[2]) for r in rows}
