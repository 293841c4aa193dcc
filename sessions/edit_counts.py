"""How many distinct edits a person made in each episode's tree, for many episodes in one
query (the Episodes list shows it per row; one query per row was the page's slowest part)."""

from __future__ import annotations

import json
from typing import Iterable

from sessions.store import Store


def edit_counts(store: Store, episode_ids: Iterable[int]) -> dict[int, int]:
    """{episode id: distinct edits over all its versions} (episodes without edits: absent)."""
    ids = [int(i) for i in episode_ids]
    seen: dict[int, set] = {}
    for i in range(0, len(ids), 900):
        chunk = ids[i:i + 900]
        rows = store.db.execute(
            "select episode_id, edits from versions where edits is not null and edits not in ('', '[]') "
            f"and episode_id in ({','.join('?' * len(chunk))})", chunk).fetchall()
        for ep, edits in rows:
            for e in json.loads(edits) or []:
                seen.setdefault(int(ep), set()).add(
                    (e.get("kind"), e.get("replaced_step"), e.get("old_thought"), e.get("old_action")))
    return {ep: len(s) for ep, s in seen.items()}
