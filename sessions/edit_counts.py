"""How many distinct edits a person made in each episode's tree, for many episodes in one
query (the Episodes list shows it per row; one query per row was the page's slowest part)."""

from __future__ import annotations

from typing import Any, Iterable

from sessions.store import Store


def edit_counts(store: Store, episode_ids: Iterable[int]) -> dict[int, int]:
    """{episode id: distinct edits over all its versions} (episodes without edits: absent)."""
    seen: dict[int, set[Any]] = {}
    for ep, edits in store.versions.recorded_edits(episode_ids):
        for e in edits:
            seen.setdefault(ep, set()).add(
                (e.get("kind"), e.get("replaced_step"), e.get("old_thought"), e.get("old_action"))
            )
    return {ep: len(s) for ep, s in seen.items()}
