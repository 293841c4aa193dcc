"""What search asks of the episodes, many at once: their version trees (`trees`), the episodes a step,
version or task belongs to (`of`), and search's filters asked of its hits' episodes (`passing`,
`flagged`, `with_outcome`). Reads only: the rows are those of `sessions.episodes` and `sessions.versions`."""

from __future__ import annotations

from typing import Any, Iterable

from sessions.connection import from_json
from sessions.episode_tree import EpisodeTree
from sessions.episodes import _OUTCOME_SQL
from sessions.store import Store
from trajectory.records import Outcome
from trajectory.signals import STEP_LIMIT

_OWNERS = {
    "step": "select id, episode_id from steps where id in ({})",
    "version": "select id, episode_id from versions where id in ({})",
    "task": "select task_id, id from episodes where task_id in ({}) order by id desc",
}


def trees(store: Store, episode_ids: Iterable[int]) -> dict[int, EpisodeTree]:
    """The version trees of many episodes in three queries: what maps a step hit to the
    versions holding it and a version to the signals it carries."""
    db = store.db
    out: dict[int, EpisodeTree] = {}
    ids = sorted(set(episode_ids))
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        q = ",".join("?" * len(chunk))
        for eid, env, typ, cur in db.execute(
            f"select e.id, t.env, t.type, e.current_version from episodes e join tasks t on t.id = e.task_id "
            f"where e.id in ({q})",
            chunk,
        ):
            out[eid] = EpisodeTree(eid, env, typ, cur)
        for vid, eid, leaf, oc in db.execute(
            f"select id, episode_id, leaf_step_id, outcome from versions where episode_id in ({q})", chunk
        ):
            out[eid].versions[vid] = (leaf, Outcome.model_validate_json(oc) if oc else Outcome())
        for sid, eid, parent, idx, sig in db.execute(
            f"select id, episode_id, parent_id, idx, signals from steps where episode_id in ({q})", chunk
        ):
            out[eid].steps[sid] = (parent, idx, from_json(sig, []))
    return out


def of(store: Store, kind: str, ids: Iterable[int]) -> dict[int, list[int]]:
    """The episode(s) each step / version / task id belongs to (a task: newest first)."""
    out: dict[int, list[int]] = {}
    ids = [*ids]
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        for key, eid in store.db.execute(_OWNERS[kind].format(",".join("?" * len(chunk))), chunk):
            out.setdefault(key, []).append(eid)
    return out


def with_outcome(store: Store, outcome: str) -> set[int]:
    """Episodes with at least one version of this outcome (success, failure, unfinished)."""
    return {r[0] for r in store.db.execute(f"select episode_id from versions where {_OUTCOME_SQL[outcome]}")}


def passing(
    store: Store,
    episode_ids: Iterable[int],
    *,
    env: str | None = None,
    outcome: str | None = None,
    signal: str | None = None,
) -> set[int]:
    """Which of `episode_ids` are of `env`, have a version of `outcome` and may carry
    `signal` (a superset, as `flagged`): search's filters, asked of its hits' episodes."""
    db, out = store.db, set()
    wanted = sorted(set(episode_ids))
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        ids = ",".join(str(int(e)) for e in chunk)
        kept = set(chunk)
        if env:
            kept &= {
                r[0]
                for r in db.execute(
                    f"select e.id from episodes e join tasks t on t.id = e.task_id where e.id in ({ids}) and t.env = ?",
                    [env],
                )
            }
        if outcome:
            kept &= {
                r[0]
                for r in db.execute(
                    f"select distinct episode_id from versions where episode_id in ({ids}) and {_OUTCOME_SQL[outcome]}"
                )
            }
        if signal:
            sql, params = _flagged_sql(signal)
            kept &= {r[0] for r in db.execute(f"{sql} and episode_id in ({ids})", params)}
        out |= kept
    return out


def _flagged_sql(signal: str) -> tuple[str, list[Any]]:
    if signal == STEP_LIMIT:
        return "select episode_id from versions where json_extract(outcome, '$.metrics.limit')", []
    return "select episode_id from steps where signals is not null and signals like ?", [f'%"{signal}"%']


def flagged(store: Store, signal: str) -> set[int]:
    """Episodes that may carry `signal` (a superset: a flagged step, or a version ended
    at its limit); `EpisodeTree.signals` decides per version."""
    sql, params = _flagged_sql(signal)
    return {r[0] for r in store.db.execute(sql, params)}
