"""Experiments: a named batch with a fixed agent config, method and task list, and one item
per task linking it to its episode. Owns the `experiments` and `experiment_items` tables.

An item's episode is created and linked in one transaction, and (experiment, task) is
unique, so a crash or `kill -9` at any moment leaves either no episode or a linked one:
resume continues it in place and never makes a second episode for a task.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Literal, cast

from pydantic import Field

from sessions.connection import compact_json as _dumps
from sessions.item_claims import _CLAIM_SQL, _RETURNING, _claim_params, _fenced, claim
from sessions.row_records import replaced
from sessions.store import DatabaseFailure, Store, StoreError
from sessions.transactions import Transaction
from trajectory.records import AgentConfig, Episode, Record, Task, Version, now

ExperimentStatus = Literal["created", "running", "stopped", "aborted", "incomplete", "done"]
ItemStatus = Literal["pending", "running", "done", "error"]
MAX_NAME = 200


class Experiment(Record):
    id: int = Field(description="Row id in this database.")
    name: str = Field(description="Its unique name.")
    env: str = Field(description="The environment family's kind.")
    method: str = Field(description="How each task is run (agent.methods).")
    config: AgentConfig = Field(description="The agent config every item runs with.")
    env_options: dict[str, Any] = Field(default_factory=dict, description="The environment's options for every item.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Task selection, samples and the method's other settings."
    )
    status: ExperimentStatus = Field("created", description="created, running, stopped, aborted, incomplete or done.")
    wall_s: float = Field(0.0, description="Seconds spent running, summed over runs.")
    created_at: str = Field(description="When it was made (UTC, ISO 8601).")
    updated_at: str = Field(description="When it last changed (UTC, ISO 8601).")


class Item(Record):
    id: int = Field(description="Row id in this database.")
    experiment_id: int = Field(description="The experiment it belongs to.")
    pos: int = Field(description="Its position in the experiment's task list.")
    task: Task = Field(description="The task it runs.")
    episode_id: int | None = Field(None, description="The episode made for it; None until it starts.")
    version_id: int | None = Field(None, description="The version that scores it.")
    status: ItemStatus = Field("pending", description="pending, running, done or error.")
    success: bool | None = Field(None, description="Whether it succeeded; None until scored.")
    metrics: dict[str, Any] = Field(
        default_factory=dict, description="The environment's scores and the method's details (phases, ...)."
    )
    error: str | None = Field(None, description="Why it failed, in one line.")

    @property
    def finished(self) -> bool:
        """Scored: an unfinished item (pending, running, error) is not a failure."""
        return self.status == "done"

    @property
    def phases(self) -> dict[str, int]:
        """{phase: version id}: which version ran each phase of the item's method."""
        return {str(k): int(v) for k, v in (self.metrics.get(PHASES_KEY) or {}).items()}


PHASES_KEY = "phases"
_ECOLS = "id, name, env, method, config, env_options, params, status, wall_s, created_at, updated_at"
_ICOLS = "id, experiment_id, pos, task, episode_id, version_id, status, success, metrics, error"


def _experiment(r: Any) -> Experiment:
    return Experiment(
        id=r[0],
        name=r[1],
        env=r[2],
        method=r[3],
        config=AgentConfig.model_validate_json(r[4]),
        env_options=json.loads(r[5] or "{}"),
        params=json.loads(r[6] or "{}"),
        status=r[7],
        wall_s=r[8] or 0.0,
        created_at=r[9],
        updated_at=r[10],
    )


def _item(r: Any) -> Item:
    return Item(
        id=r[0],
        experiment_id=r[1],
        pos=r[2],
        task=Task.model_validate_json(r[3]),
        episode_id=r[4],
        version_id=r[5],
        status=r[6],
        success=None if r[7] is None else bool(r[7]),
        metrics=json.loads(r[8] or "{}"),
        error=r[9],
    )


def create(
    store: Store,
    *,
    name: str,
    env: str,
    method: str,
    config: AgentConfig,
    tasks: list[Task],
    env_options: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Experiment:
    """A new experiment with its task list fixed (one pending item per task).
    Raises StoreError for a name that is empty, too long, a number or taken, an empty
    task list or a task listed twice."""
    name = " ".join((name or "").split())
    if not name:
        raise StoreError("an experiment needs a name")
    if len(name) > MAX_NAME:
        raise StoreError(f"the experiment name is too long ({len(name)} characters; the limit is {MAX_NAME})")
    if name.isdigit():
        raise StoreError("an experiment name cannot be a number (numbers are experiment ids)")
    if not tasks:
        raise StoreError("the task selection is empty")
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise StoreError(f"task {dup.split(':', 1)[1]!r} is listed twice")
    stamp = now()
    taken = StoreError(f"an experiment named {name!r} already exists")
    try:
        with store.transaction():
            if store.db.execute("select 1 from experiments where name = ?", [name]).fetchone():
                raise taken
            eid = store.db.execute(
                "insert into experiments (name, env, method, config, env_options, params, status, created_at, updated_at) "
                "values (?,?,?,?,?,?,?,?,?)",
                [
                    name,
                    env,
                    method,
                    config.model_dump_json(),
                    _dumps(env_options or {}),
                    _dumps(params or {}),
                    "created",
                    stamp,
                    stamp,
                ],
            ).lastrowid
            store.db.conn.executemany(
                "insert into experiment_items (experiment_id, pos, task_key, task) values (?,?,?,?)",
                [(eid, n, t.key, t.model_dump_json()) for n, t in enumerate(tasks)],
            )
    except (sqlite3.IntegrityError, DatabaseFailure) as exc:  # the store words SQLite's errors
        if "unique" in str(exc).lower():
            raise taken from None
        raise
    return get(store, cast(int, eid))  # (an insert's row id)


def get(store: Store, ref: int | str) -> Experiment:
    """By id (a number) or by name.
    Raises StoreError when no experiment has that id or name."""
    text = str(ref).strip()
    if text.isascii() and text.isdigit() and len(text) <= 18:  # not `²`; SQLite stops at 2**63-1
        r = store.db.execute(f"select {_ECOLS} from experiments where id = ?", [int(text)]).fetchone()
    else:
        r = store.db.execute(f"select {_ECOLS} from experiments where name = ?", [text]).fetchone()
    if r is None:
        raise StoreError(f"unknown experiment {text[:60]!r}")
    return _experiment(r)


def list_all(store: Store) -> list[Experiment]:
    """Every experiment, oldest first."""
    return [_experiment(r) for r in store.db.execute(f"select {_ECOLS} from experiments order by id")]


def items(store: Store, experiment_id: int) -> list[Item]:
    """The experiment's items in their order; [] for an unknown id."""
    rows = store.db.execute(
        f"select {_ICOLS} from experiment_items where experiment_id = ? order by pos", [experiment_id]
    )
    return [_item(r) for r in rows]


def item(store: Store, item_id: int) -> Item:
    """The item. Raises StoreError for an unknown id."""
    r = store.db.execute(f"select {_ICOLS} from experiment_items where id = ?", [item_id]).fetchone()
    if r is None:
        raise StoreError(f"unknown experiment item {item_id}")
    return _item(r)


def changes(store: Store) -> dict[int, tuple[Any, ...]]:
    """{experiment id: what changes whenever the experiment or one of its items does}, in one
    query: pages cache an experiment's summary under it."""
    rows = store.db.execute(
        "select e.id, e.updated_at, e.status, count(i.id), max(i.updated_at), sum(i.status = 'done') "
        "from experiments e left join experiment_items i on i.experiment_id = e.id group by e.id"
    ).fetchall()
    return {int(r[0]): tuple(r[1:]) for r in rows}


def counts(store: Store, experiment_id: int) -> dict[str, int]:
    """{status: n} of the items, for progress bars."""
    rows = store.db.execute(
        "select status, count(*) from experiment_items where experiment_id = ? group by status", [experiment_id]
    )
    return {r[0]: r[1] for r in rows}


def ensure_episode(
    store: Store,
    item_id: int,
    config: AgentConfig,
    env_options: dict[str, Any],
    name: str | None,
    first_phase: str | None = None,
) -> tuple[int, bool]:
    """(episode id, created?) of an item: the linked one, or a new episode created and
    linked in the same transaction (so a crash can never leave an unlinked duplicate).
    `first_phase` names the new episode's first version after the method's first phase and
    records it as that phase's version, in the same transaction too.
    Raises StoreError for an unknown item."""
    linked = store.db.execute("select episode_id from experiment_items where id = ?", [item_id]).fetchone()
    if linked is not None and linked[0] is not None:  # once linked, never changed: no write transaction needed
        return linked[0], False
    with store.transaction():
        r = store.db.execute(
            "select episode_id, task, metrics from experiment_items where id = ?", [item_id]
        ).fetchone()
        if r is None:
            raise StoreError(f"unknown experiment item {item_id}")
        if r[0] is not None:
            return r[0], False
        ep_id, _, _, _ = _link_episode(
            store,
            item_id,
            Task.model_validate_json(r[1]),
            json.loads(r[2] or "{}"),
            config,
            env_options,
            name,
            first_phase,
        )
    return ep_id, True


def _link_episode(
    store: Store,
    item_id: int,
    task: Task,
    metrics: dict[str, Any],
    config: AgentConfig,
    env_options: dict[str, Any],
    name: str | None,
    first_phase: str | None,
    exemplar_rev: int | None = None,
) -> tuple[int, int, dict[str, Any], tuple[Episode, Version]]:
    """Inside the caller's transaction: the item's new episode, linked; (episode id, its
    first version's id, the item's metrics, the episode and version rows as written)."""
    ep, v = store.episodes.create(task, config, env_options, name, version_name=first_phase, exemplar_rev=exemplar_rev)
    assert ep.id is not None and v.id is not None  # (rows just written)
    metrics = dict(metrics)
    if first_phase is not None:
        _with_phase(metrics, first_phase, v.id)
    store.db.execute(
        "update experiment_items set episode_id = ?, version_id = ?, status = 'running', metrics = ?, "
        "updated_at = ? where id = ?",
        [ep.id, v.id, _dumps(metrics), now(), item_id],
    )
    return ep.id, v.id, metrics, (ep, v)


def claim_and_start(
    store: Store,
    item_id: int,
    job_id: int,
    lease_s: float,
    config: AgentConfig,
    env_options: dict[str, Any],
    name: str,
    first_phase: str | None,
    exemplar_rev: int | None = None,
) -> tuple[int, Item, tuple[Episode, Version] | None] | None:
    """`claim`, then the item (its episode created and linked when it has none), in one
    light transaction (a power cut that loses it leaves the item to a resume): (token,
    item, the new episode and version rows as written or None), or None when the item is
    done or another runner holds it. `name`: the new episode's, `{pos}` standing for the
    item's position from 1. `exemplar_rev`: the exemplar revision a new first version pins."""
    token: int | None
    with Transaction(store, durable=False, without_savepoints=True):  # (nothing in it catches an error: no savepoints)
        if _RETURNING:  # the claim returns the item's row: one statement
            row = store.db.execute(
                _CLAIM_SQL + f" returning claim_token, {_ICOLS}", _claim_params(item_id, job_id, lease_s)
            ).fetchone()
            if row is None:
                return None
            token, it = int(row[0]), _item(row[1:])
        else:
            token = claim(store, item_id, job_id, lease_s)
            if token is None:
                return None
            it = item(store, item_id)
        made = None
        if it.episode_id is None:
            ep_id, v_id, metrics, made = _link_episode(
                store,
                item_id,
                it.task,
                it.metrics,
                config,
                env_options,
                name.format(pos=it.pos + 1),
                first_phase,
                exemplar_rev,
            )
            it = it.model_copy(
                update={"episode_id": ep_id, "version_id": v_id, "status": "running", "metrics": metrics}
            )
    return token, it, made


def claim_and_start_many(
    store: Store,
    item_ids: list[int],
    job_id: int,
    lease_s: float,
    config: AgentConfig,
    env_options: dict[str, Any],
    name: str,
    first_phase: str | None,
    exemplar_rev: int | None = None,
) -> dict[int, tuple[int, Item, tuple[Episode, Version] | None]]:
    """`claim_and_start` for several items in one light transaction and one claim
    statement (a runner takes its next few items at once: a commit and a claim for a few
    items, not for each): {item id: (token, item, new rows or None)} of the items claimed;
    one done or held by another runner is left out. The claims are the job's like any
    other: its heartbeat renews them, and a runner that dies before it runs them leaves
    them to the next once its lease runs out. Needs `update ... returning` (SQLite 3.35):
    else one `claim_and_start` per item."""
    if not _RETURNING:
        started = {}
        for item_id in item_ids:
            one = claim_and_start(store, item_id, job_id, lease_s, config, env_options, name, first_phase, exemplar_rev)
            if one is not None:
                started[item_id] = one
        return started
    marks = ",".join("?" * len(item_ids))
    params = _claim_params(0, job_id, lease_s)
    with Transaction(store, durable=False, without_savepoints=True):  # (nothing in it catches an error: no savepoints)
        rows = store.db.execute(
            _CLAIM_SQL.replace("where id = ?", f"where id in ({marks})") + f" returning claim_token, {_ICOLS}",
            params[:2] + list(item_ids) + params[3:],
        ).fetchall()
        claimed = [(int(row[0]), _item(row[1:])) for row in sorted(rows, key=lambda r: r[3])]  # (by position)
        fresh = [it for _, it in claimed if it.episode_id is None]
        made = dict(
            zip(
                (it.id for it in fresh),
                _link_episodes(store, fresh, config, env_options, name, first_phase, exemplar_rev),
            )
        )
    started = {}
    for token, it in claimed:
        new = made.get(it.id)
        if new is not None:
            (ep, v), metrics = new
            it = replaced(it, {"episode_id": ep.id, "version_id": v.id, "status": "running", "metrics": metrics})
        started[it.id] = (token, it, new[0] if new is not None else None)
    return started


def _link_episodes(
    store: Store,
    fresh: list[Item],
    config: AgentConfig,
    env_options: dict[str, Any],
    name: str,
    first_phase: str | None,
    exemplar_rev: int | None = None,
) -> list[tuple[tuple[Episode, Version], dict[str, Any]]]:
    """Inside the caller's transaction: `_link_episode` for several items, in one statement
    for their links: [((episode, version) as written, the item's metrics)]."""
    if not fresh:
        return []
    made = store.episodes.create_many(
        [(it.task, name.format(pos=it.pos + 1)) for it in fresh],
        config,
        env_options,
        version_name=first_phase,
        exemplar_rev=exemplar_rev,
    )
    out = []
    for it, (ep, v) in zip(fresh, made):
        metrics = dict(it.metrics)
        if first_phase is not None:
            _with_phase(metrics, first_phase, v.id)
        out.append(((ep, v), metrics))
    store.db.execute(
        "update experiment_items set episode_id = l.column2, version_id = l.column3, status = 'running', "
        "metrics = l.column4, updated_at = ? from (values " + ",".join(["(?,?,?,?)"] * len(out)) + ") as l "
        "where experiment_items.id = l.column1",
        [now()] + [x for it, ((ep, v), metrics) in zip(fresh, out) for x in (it.id, ep.id, v.id, _dumps(metrics))],
    )
    return out


def _metrics(store: Store, item_id: int) -> dict[str, Any]:
    r = store.db.execute("select metrics from experiment_items where id = ?", [item_id]).fetchone()
    if r is None:
        raise StoreError(f"unknown experiment item {item_id}")
    metrics: dict[str, Any] = json.loads(r[0] or "{}")
    return metrics


def record_item(
    store: Store,
    item_id: int,
    *,
    status: ItemStatus,
    version_id: int | None = None,
    success: bool | None = None,
    metrics: dict[str, Any] | None = None,
    error: str | None = None,
    token: int | None = None,
) -> None:
    """The item's outcome; its phase record is kept (the new metrics replace the rest) and
    its claim is released in the same transaction. Not a durable commit of its own: the
    outcome is read off the item's versions, whose steps were (a power cut that loses it
    leaves the item to a resume, which records it again without a model call). `token`:
    the writer's claim (`claim`); ClaimLost, and nothing written, when it was taken over."""
    new = _dumps(metrics or {})
    with store.transaction(durable=False):  # one statement: the fence and the kept phases are in its SQL
        cur = store.db.execute(
            "update experiment_items set status = ?, version_id = coalesce(?, version_id), success = ?, "
            "metrics = case when json_extract(metrics, '$.phases') is null then ? "
            "else json_set(?, '$.phases', json(json_extract(metrics, '$.phases'))) end, "
            "error = ?, updated_at = ?, claimed_by = null, lease_until = null "
            "where id = ? and (? is null or claim_token = ?)",
            [
                status,
                version_id,
                None if success is None else int(success),
                new,
                new,
                error,
                now(),
                item_id,
                token,
                token,
            ],
        )
        if cur.rowcount != 1:
            _metrics(store, item_id)  # an unknown item says so
            _fenced(store, item_id, token)


def _with_phase(metrics: dict[str, Any], phase: str, version_id: int | None) -> None:
    metrics[PHASES_KEY] = {**(metrics.get(PHASES_KEY) or {}), phase: version_id}


def record_phase(store: Store, item_id: int, phase: str, version_id: int, *, token: int | None = None) -> None:
    """Phase `phase` of the item runs in `version_id`; the item points at it from now on
    (so a version frozen mid-run and continued in a child is followed). `token`: as for
    `record_item`."""
    with store.transaction():
        _fenced(store, item_id, token)
        metrics = _metrics(store, item_id)
        _with_phase(metrics, phase, version_id)
        store.db.execute(
            "update experiment_items set metrics = ?, version_id = ?, updated_at = ? where id = ?",
            [_dumps(metrics), version_id, now(), item_id],
        )


def set_status(store: Store, experiment_id: int, status: ExperimentStatus, *, add_wall_s: float = 0.0) -> None:
    """Set the experiment's status and add `add_wall_s` to its wall time (one durable write)."""
    with store.transaction():
        store.db.execute(
            "update experiments set status = ?, wall_s = wall_s + ?, updated_at = ? where id = ?",
            [status, add_wall_s, now(), experiment_id],
        )


def of_episode(store: Store, episode_id: int) -> Experiment | None:
    """The experiment an episode was run by, if any."""
    r = store.db.execute("select experiment_id from experiment_items where episode_id = ?", [episode_id]).fetchone()
    return get(store, r[0]) if r else None
