"""Per-episode version labels: v1, v2, ... for the versions people and runs make, r1, r2, ...
for rollouts, each in the order the episode's versions were made.

Versions keep their global ids inside the database and in JSON (`id`); people read and type
the label (`EP:N` or `EP:vN` and `EP:rN` on the command line, "v3" / "r12" on the pages). A
rollout (a member of a resample / what-if / suggest-verification group, `sessions.rollouts`,
and the versions a frozen rollout continued from) never takes a v-number, so the versions a
person reads stay consecutive however many rollouts ran in between. Nothing is stored: the
labels are computed from the version rows and the rollout tables, which only grow, so a
version's label never changes."""

from __future__ import annotations

import re
from typing import Iterable

from sessions.store import Store, StoreError

ROLLOUT = "r"
_TYPED = re.compile(r"^(?:[vV]?(\d{1,18})|([rR])(\d{1,18}))$")


def _rollouts(store: Store, episode_id: int, parents: dict[int, int | None]) -> set[int]:
    """The episode's rollouts: group members, and the chain of versions a member continued
    from (a rollout frozen while it ran went on in a child, which took its place)."""
    rows = store.db.execute(
        "select m.version_id, g.source_version from rollout_members m join rollout_groups g on g.id = m.group_id "
        "where g.episode_id = ?",
        [episode_id],
    ).fetchall()
    out: set[int] = set()
    for vid, source in rows:
        chain: list[int] = []
        v = vid
        while v is not None and v != source and v not in out and len(chain) <= len(parents):
            chain.append(v)
            v = parents.get(v)
        out.update(chain if v is not None else chain[:1])  # a chain that misses the source: the member alone
    return out


def labels(store: Store, episode_id: int) -> dict[int, str]:
    """{global version id: "v3" or "r2"} for one episode."""
    rows = store.db.execute(
        "select id, parent_version from versions where episode_id = ? order by id", [episode_id]
    ).fetchall()
    parents = {int(r[0]): r[1] for r in rows}
    return label_map(parents, _rollouts(store, episode_id, parents))


def label_map(version_ids: Iterable[int], rollouts: set[int]) -> dict[int, str]:
    """{version id: label} of an episode's versions in id order, `rollouts` among them (pure:
    a caller that read both already, or knows there is no rollout, asks no query)."""
    out, counts = {}, {"v": 0, ROLLOUT: 0}
    for vid in version_ids:
        kind = ROLLOUT if vid in rollouts else "v"
        counts[kind] += 1
        out[vid] = f"{kind}{counts[kind]}"
    return out


def numbers(store: Store, episode_id: int) -> dict[int, int]:
    """{global version id: its number within its kind} (3 for v3, 2 for r2): JSON's `number`."""
    return {vid: int(label[1:]) for vid, label in labels(store, episode_id).items()}


def label_of(store: Store, version_id: int) -> str:
    """The label of a version (by its global id)."""
    v = store.versions.get(version_id)
    return labels(store, v.episode_id)[version_id]


def number_of(store: Store, version_id: int) -> int:
    """The number of a version within its kind (by its global id)."""
    return int(label_of(store, version_id)[1:])


def ref_part(label: str) -> str:
    """What follows `EP:` on the command line: `3` for v3 (as before rollouts had labels), `r2`."""
    return label[1:] if label.startswith("v") else label


def parse(text: str) -> int | str:
    """A version as typed after `EP:`: `3` or `v3` -> 3; `r2` -> "r2". ValueError otherwise."""
    m = _TYPED.match(str(text).strip())
    if not m:
        raise ValueError(text)
    return int(m.group(1)) if m.group(1) else f"{ROLLOUT}{int(m.group(3))}"


def id_of(store: Store, episode_id: int, number: int | str) -> int:
    """The global id of version `number` of an episode (3, "3", "v3" or "r2"); a clear error when there is none."""
    want = number if isinstance(number, int) else parse(number)
    label = f"v{want}" if isinstance(want, int) else want
    have = labels(store, episode_id)
    by_label = {lb: i for i, lb in have.items()}
    if label not in by_label:
        if not have:
            raise StoreError(f"episode {episode_id} has no versions")
        n_v = sum(1 for lb in have.values() if lb.startswith("v"))
        n_r = len(have) - n_v
        span = (f"v1..v{n_v}" if n_v else "no v-versions") + (f" and rollouts r1..r{n_r}" if n_r else "")
        raise StoreError(f"episode {episode_id} has no version {label} (it has {span})")
    return by_label[label]
