"""Per-episode version numbers: v1, v2, ... in the order an episode's versions were made.

Versions keep their global ids inside the database and in JSON (`id`); people read and
type the per-episode number (`EP:N` on the command line, "v3" on the pages)."""

from __future__ import annotations

from sessions.store import Store, StoreError


def numbers(store: Store, episode_id: int) -> dict[int, int]:
    """{global version id: per-episode number} for one episode."""
    return {vid: n for n, vid in enumerate(store.versions.ids(episode_id), start=1)}


def number_of(store: Store, version_id: int) -> int:
    """The per-episode number of a version (by its global id)."""
    v = store.versions.get(version_id)
    return numbers(store, v.episode_id)[version_id]


def id_of(store: Store, episode_id: int, number: int) -> int:
    """The global id of version `number` of an episode; a clear error when there is none."""
    by_number = {n: i for i, n in numbers(store, episode_id).items()}
    if number not in by_number:
        raise StoreError(f"episode {episode_id} has no version v{number} (it has v1..v{len(by_number)})"
                         if by_number else f"episode {episode_id} has no versions")
    return by_number[number]
