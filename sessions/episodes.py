"""The episodes part of the Store (`store.episodes`): tasks, configs and episodes (each with
the version that is current), the episode lists the faces show, the version trees search
and signals read, and the bulk read of whole episodes an export makes."""

from __future__ import annotations

import builtins
import hashlib
from itertools import groupby
from operator import itemgetter
from typing import Any, Iterable, Iterator, cast

from sessions.connection import StoreError, from_json, to_json
from sessions.database import Database, RowIds, insert_row
from sessions.row_records import (
    SCOLS,
    SJSON,
    VCOLS,
    StepJson,
    StepRow,
    insert_versions,
    maker,
    step_fields,
    version_from_row,
)
from trajectory.records import AgentConfig, Episode, Outcome, Task, Version, now

EP_SQL = (
    "select e.id, t.json, c.json, e.env_options, e.current_version, e.name, e.created_at "
    "from episodes e join tasks t on t.id = e.task_id join configs c on c.id = e.config_id "
)

_OUTCOME_SQL = {  # a version's automatic outcome, as search filters it
    "success": "coalesce(json_extract(outcome, '$.success'), 0) = 1",
    "failure": "coalesce(json_extract(outcome, '$.done'), 0) = 1 and coalesce(json_extract(outcome, '$.success'), 0) != 1",
    "unfinished": "coalesce(json_extract(outcome, '$.done'), 0) = 0",
}
# an episode a person changed: a step they wrote, or a version made by an edit
_EDITED_SQL = (
    "(exists (select 1 from steps s where s.episode_id = e.id and s.source = 'human') "
    "or exists (select 1 from versions v3 where v3.episode_id = e.id and v3.edits is not null))"
)


# a config's (JSON, key) by its fields' values (scalars: the values say the JSON), so the
# item after item of an experiment with one config do not dump and hash it again
_CONFIG_KEYS: dict[Any, tuple[str, str]] = {}


def _config_key(config: AgentConfig) -> tuple[str, str]:
    """(the config's stored JSON, its row key)."""
    values: Any = (type(config), tuple((k, type(v), v) for k, v in config.__dict__.items()))
    try:
        found = _CONFIG_KEYS.get(values)
    except TypeError:  # (a value that cannot be hashed: not remembered)
        values, found = None, None
    if found is None:
        data = to_json(config) or "{}"
        found = (data, hashlib.sha256(data.encode()).hexdigest()[:16])
        if values is not None:
            if len(_CONFIG_KEYS) > 1024:  # (bounded: an app may make many)
                _CONFIG_KEYS.clear()
            _CONFIG_KEYS[values] = found
    return found


_NEW_VERSION = frozenset(("id", "episode_id", "name"))


def _first_version(version_id: int, episode_id: int, name: str | None) -> Version:
    """An episode's first version as `Version(id=, episode_id=, name=)` makes it, every
    field given (pydantic's model_construct costs a millisecond filling defaults itself;
    validating, a tenth of that)."""
    stamp = now()
    return Version.model_construct(
        set(_NEW_VERSION),
        id=version_id,
        episode_id=episode_id,
        parent_version=None,
        leaf_step_id=None,
        draft_thought=None,
        draft_edit=None,
        edits=[],
        name=name,
        status="open",
        error=None,
        outcome=Outcome(),
        created_at=stamp,
        updated_at=stamp,
    )


class Episodes:
    """Tasks, configs, episodes. Writes only those tables (and an episode's first version,
    made with it); reads may join the versions and steps below them."""

    def __init__(self, database: Database):
        self._database = database
        self.row_ids = (RowIds(), RowIds())  # tasks, configs (committed rows; the Store's transactions keep them)

    # ------------------------------------------------------------------ tasks / configs
    def task_row(self, task: Task) -> int:
        """The task's row id (inserted the first time it is seen; a new task costs one
        statement, a known one none)."""
        db, ids = self._database.db, self.row_ids[0]
        key, data = task.key, cast(str, to_json(task))  # (a record: never None)
        cached = ids.get((key, data))
        if cached is not None:
            return cached
        row = db.execute(
            "insert into tasks (key, env, type, json) values (?,?,?,?) on conflict (key) do nothing returning id",
            [key, task.env, task.type, data],
        ).fetchall()  # (all: the statement ends)
        if row:
            return ids.learn((task.key, data), row[0][0])
        return self._stored_task(task, data)

    def _stored_task(self, task: Task, data: str) -> int:
        """The row id of a task whose key is taken (its insert did nothing): that row when
        it holds this content, else the row kept under a key of its content."""
        db, ids, key = self._database.db, self.row_ids[0], task.key
        row = db.execute("select id, json from tasks where key = ?", [key]).fetchone()
        if row[1] != data:  # same id, new content (e.g. a regenerated game): keep both
            key = f"{key}#{hashlib.sha256(data.encode()).hexdigest()[:8]}"
            row2 = db.execute("select id from tasks where key = ?", [key]).fetchone()
            row = row2 or (insert_row(db, "tasks", {"key": key, "env": task.env, "type": task.type, "json": data}),)
        return ids.learn((task.key, data), row[0])

    def config_row(self, config: AgentConfig) -> int:
        """The config's row id (configs are kept once by their content)."""
        db = self._database.db
        data, key = _config_key(config)
        cached = self.row_ids[1].get(key)
        if cached is not None:
            return cached
        row = db.execute("select id from configs where key = ?", [key]).fetchone()
        return self.row_ids[1].learn(key, row[0] if row else insert_row(db, "configs", {"key": key, "json": data}))

    def config_id(self, episode_id: int) -> int:
        """The episode's default config row (a new version without one pins it).
        Raises StoreError for an unknown episode."""
        row = self._database.db.execute("select config_id from episodes where id = ?", [episode_id]).fetchone()
        if row is None:
            raise StoreError(f"unknown episode {episode_id}")
        config_id: int = row[0]
        return config_id

    # ------------------------------------------------------------------ episodes
    def create(
        self,
        task: Task,
        config: AgentConfig,
        env_options: dict[str, Any] | None = None,
        name: str | None = None,
        *,
        created_at: str | None = None,
        version_name: str | None = None,
        exemplar_rev: int | None = None,
    ) -> tuple[Episode, Version]:
        """A new episode with its first (empty) version, which becomes current.
        `created_at`: an import keeps the original time. `exemplar_rev`: the exemplar revision
        the first version's prompts pin (None: pinned at its first step)."""
        return self.create_many(
            [(task, name)],
            config,
            env_options,
            version_name=version_name,
            created_at=created_at,
            exemplar_rev=exemplar_rev,
        )[0]

    def create_many(
        self,
        specs: list[tuple[Task, str | None]],
        config: AgentConfig,
        env_options: dict[str, Any] | None = None,
        *,
        version_name: str | None = None,
        created_at: str | None = None,
        exemplar_rev: int | None = None,
    ) -> list[tuple[Episode, Version]]:
        """`create` for several (task, episode name) at once, in a few statements for all
        (a runner starting its next items): the new tasks in one insert, the episodes in
        one, their first versions in one. Each episode names its first version as current
        as it is inserted: the id SQLite would give that version (max + n: this
        transaction holds the write lock), so no update follows."""
        stamp, options = created_at or now(), to_json(env_options or {})
        with self._database.transaction():
            db = self._database.db
            task_ids = self._task_rows([t for t, _ in specs])
            config_id = self.config_row(config)
            rows = db.execute(
                "insert into episodes (task_id, config_id, env_options, name, created_at, current_version) values "
                + ",".join(["(?,?,?,?,?, (select coalesce(max(id), 0) from versions) + ?)"] * len(specs))
                + " returning current_version, id",
                [
                    x
                    for n, ((_, name), tid) in enumerate(zip(specs, task_ids), 1)
                    for x in (tid, config_id, options, name, stamp, n)
                ],
            ).fetchall()
            rows.sort()  # (RETURNING promises no order: the first versions' ids follow the specs' order)
            made = [
                (
                    Episode(
                        id=ep_id,
                        task=task,
                        config=config,
                        current_version=v_id,
                        name=name,
                        env_options=from_json(options, {}),
                        created_at=stamp,
                    ),
                    _first_version(v_id, ep_id, version_name),
                )
                for (v_id, ep_id), (task, name) in zip(rows, specs)
            ]
            insert_versions(db, [v for _, v in made], config_id, exemplar_rev)
        return made

    def _task_rows(self, tasks: list[Task]) -> list[int]:
        """Inside the caller's transaction: each task's row id, the new ones inserted in one
        statement (one whose key is taken by other content: as `task_row` keeps it)."""
        ids = self.row_ids[0]
        datas = [cast(str, to_json(t)) for t in tasks]  # (records: never None)
        new = {t.key: (t, d) for t, d in zip(tasks, datas) if ids.get((t.key, d)) is None}
        if new:
            rows = self._database.db.execute(
                "insert into tasks (key, env, type, json) values "
                + ",".join(["(?,?,?,?)"] * len(new))
                + " on conflict (key) do nothing returning id, key",
                [x for t, d in new.values() for x in (t.key, t.env, t.type, d)],
            ).fetchall()
            for row_id, key in rows:
                ids.learn((key, new[key][1]), row_id)
        return [ids.get((t.key, d)) or self._stored_task(t, d) for t, d in zip(tasks, datas)]

    def point_current(self, episode_id: int, version_id: int) -> None:
        """Inside the caller's transaction: the episode's current version becomes this one."""
        self._database.db.execute("update episodes set current_version = ? where id = ?", [version_id, episode_id])

    def point_config(self, episode_id: int, config_id: int) -> None:
        """Inside the caller's transaction: the episode's default config becomes this row."""
        self._database.db.execute("update episodes set config_id = ? where id = ?", [config_id, episode_id])

    def get(self, episode_id: int) -> Episode:
        """The episode. Raises StoreError for an unknown id."""
        row = self._database.db.execute(EP_SQL + "where e.id = ?", [episode_id]).fetchone()
        if row is None:
            raise StoreError(f"unknown episode {episode_id}")
        return episode_from_row(row)

    def pinned(self, episode_id: int, version_id: int) -> tuple[Episode, int | None]:
        """The episode with the config the version pinned (its own, else the episode's), and
        the version's exemplar revision (None: not pinned yet, or the built-in exemplars), in one read.
        Raises StoreError for a version not of the episode."""
        row = self._database.db.execute(
            "select e.id, t.json, c.json, e.env_options, e.current_version, e.name, e.created_at, v.exemplar_rev "
            "from episodes e "
            "join tasks t on t.id = e.task_id join versions v on v.id = ? and v.episode_id = e.id "
            "join configs c on c.id = coalesce(v.config_id, e.config_id) where e.id = ?",
            [version_id, episode_id],
        ).fetchone()
        if row is None:
            raise StoreError(f"unknown version {version_id} of episode {episode_id}")
        return episode_from_row(row), row[7]

    def env_options(self, episode_id: int) -> dict[str, Any]:
        """The episode's environment options alone: the one part of an episode that a
        confirm or re-point changes (a step reads it fresh; the task never changes).
        Raises StoreError for an unknown episode."""
        row = self._database.db.execute("select env_options from episodes where id = ?", [episode_id]).fetchone()
        if row is None:
            raise StoreError(f"unknown episode {episode_id}")
        options: dict[str, Any] = from_json(row[0], {})
        return options

    def set_config(self, episode_id: int, config: AgentConfig) -> None:
        """The episode's default config (what a version without a pinned one uses, and what
        the episode lists show). Existing versions keep the config they pinned."""
        self.get(episode_id)
        with self._database.transaction():
            self.point_config(episode_id, self.config_row(config))

    def set_env_options(self, episode_id: int, options: dict[str, Any]) -> None:
        """Re-point or confirm what the episode's environment opens (wiki backend, ...)."""
        self.get(episode_id)
        with self._database.transaction():
            self._database.db.execute(
                "update episodes set env_options = ? where id = ?", [to_json(options), episode_id]
            )

    def rename(self, episode_id: int, name: str | None) -> None:
        """Set (or with None clear) the episode's name. Raises StoreError for an unknown id."""
        self.get(episode_id)
        with self._database.transaction():
            self._database.db.execute("update episodes set name = ? where id = ?", [name, episode_id])

    def by_option(self, key: str, values: list[str]) -> dict[str, int]:
        """value -> episode id for the episodes whose env_options[key] is one of `values`."""
        out: dict[str, int] = {}
        for i in range(0, len(values), 500):
            chunk = values[i : i + 500]
            rows = self._database.db.execute(
                f"select json_extract(env_options, ?), id from episodes where json_extract(env_options, ?) "
                f"in ({','.join('?' * len(chunk))})",
                [f"$.{key}", f"$.{key}", *chunk],
            )
            out.update({v: eid for v, eid in rows})
        return out

    def ids(self, *, env: str | None = None, task_type: str | None = None) -> list[int]:
        """Episode ids in order, optionally of one environment and task type (a type matches
        itself or as a prefix, as ALFWorld's `pick_and_place` matches `pick_and_place_simple`)."""
        where, params = [], []
        if env:
            where.append("t.env = ?")
            params.append(env)
        if task_type:
            where.append("(t.type = ? or t.type like ?)")
            params += [task_type, task_type + "%"]
        sql = "select e.id from episodes e join tasks t on t.id = e.task_id"
        if where:
            sql += " where " + " and ".join(where)
        return [r[0] for r in self._database.db.execute(sql + " order by e.id", params)]

    def list(
        self,
        *,
        env: str | None = None,
        task_type: str | None = None,
        outcome: str | None = None,
        edited: bool | None = None,
        limit: int | None = None,
        offset: int = 0,
        among: Iterable[int] | None = None,
    ) -> list[dict[str, Any]]:
        """Summaries for the Episodes page / `react-editor episodes`, newest first: one dict per
        episode with its current version's outcome and the episode's edit count. `outcome`:
        "success" | "failure" | "unfinished"; `among`: only these episode ids. Every filter and
        the page (`limit`, `offset`) are applied in SQL, so a page costs the same however many
        episodes the store holds; `count` gives the total for the same filters."""
        where, params = self._list_filters(env, task_type, outcome, edited, among)
        page = "select e.id from episodes e join tasks t on t.id = e.task_id left join versions v on v.id = e.current_version"
        if where:
            page += " where " + " and ".join(where)
        page += " order by e.id desc limit ? offset ?"
        params += [-1 if limit is None else limit, max(0, offset)]
        sql = (
            "select e.id, t.env, t.type, json_extract(t.json, '$.id'), json_extract(t.json, '$.text'), "
            "e.name, e.created_at, e.current_version, v.status, v.outcome, "
            "(select count(*) from versions v2 where v2.episode_id = e.id), "
            "(select count(*) from steps s where s.episode_id = e.id and s.source = 'human'), "
            "(select count(*) from versions v3 where v3.episode_id = e.id and v3.edits is not null), "
            "json_extract(c.json, '$.model') "
            "from episodes e join tasks t on t.id = e.task_id join configs c on c.id = e.config_id "
            f"left join versions v on v.id = e.current_version where e.id in ({page}) order by e.id desc"
        )
        return [_episode_summary(r) for r in self._database.db.execute(sql, params)]

    def empty(self) -> bool:
        """True when the store holds no episode (one row read, whatever its size)."""
        return self._database.db.execute("select 1 from episodes limit 1").fetchone() is None

    def count(
        self,
        *,
        env: str | None = None,
        task_type: str | None = None,
        outcome: str | None = None,
        edited: bool | None = None,
        among: Iterable[int] | None = None,
    ) -> int:
        """How many episodes `list` would give with these filters and no page."""
        where, params = self._list_filters(env, task_type, outcome, edited, among)
        sql = "select count(*) from episodes e join tasks t on t.id = e.task_id left join versions v on v.id = e.current_version"
        if where:
            sql += " where " + " and ".join(where)
        n: int = self._database.db.execute(sql, params).fetchone()[0]
        return n

    @staticmethod
    def _list_filters(
        env: str | None, task_type: str | None, outcome: str | None, edited: bool | None, among: Iterable[int] | None
    ) -> tuple[builtins.list[str], builtins.list[Any]]:
        """`list`'s filters as SQL conditions on e (episodes), t (tasks), v (current version)."""
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if env:
            where.append("t.env = ?")
            params.append(env)
        if task_type:
            where.append("t.type = ?")
            params.append(task_type)
        if outcome is not None:
            if outcome not in _OUTCOME_SQL:
                raise StoreError(f"unknown outcome {outcome!r} (one of: {', '.join(_OUTCOME_SQL)})")
            where.append("(" + _OUTCOME_SQL[outcome].replace("outcome", "v.outcome") + ")")
        if edited is not None:
            where.append(("" if edited else "not ") + _EDITED_SQL)
        if among is not None:
            where.append("e.id in (select value from json_each(?))")
            params.append(to_json(sorted(set(among))))
        return where, params

    # ------------------------------------------------------------------ bulk reads (export)
    # A pydantic record per row costs more than the whole read; bulk reads of our own rows
    # give plain rows with the records' field names (StepRow) instead.
    def read(
        self, episode_ids: Iterable[int], chunk: int = 200, *, raw: bool = False
    ) -> Iterator[tuple[Episode, builtins.list[Version], dict[int, StepRow]]]:
        """Episodes (in the given order) with all their versions and steps, a chunk of
        episodes at a time: three set-based queries per chunk, never one per version. Rows
        come by `fetchall` (the cursor checks every fetch call; one call per query, not per row).
        `raw`: steps as `StepJson` (what the jsonl export encodes, nothing converted per row)."""
        db = self._database.db
        ids = [*episode_ids]
        infos: dict[
            str, dict[str, Any]
        ] = {}  # the same info text (e.g. {"won":false}) is parsed once, shared read-only
        configs: dict[str, AgentConfig] = {}  # likewise a config (most episodes share a few): one record each
        for i in range(0, len(ids), chunk):
            part = ids[i : i + chunk]
            q = ",".join("?" * len(part))
            rows = db.execute(EP_SQL + f"where e.id in ({q})", part).fetchall()
            eps = {r[0]: episode_from_row(r, configs) for r in rows}
            versions: dict[int, builtins.list[Version]] = {}
            for r in db.execute(f"select {VCOLS} from versions where episode_id in ({q}) order by id", part).fetchall():
                versions.setdefault(r[1], []).append(version_from_row(r))
            steps: dict[int, dict[int, StepRow]] = {}
            if raw:
                make = maker(StepJson)
                found = db.execute(f"select {SJSON} from steps where episode_id in ({q}) order by episode_id", part)
                steps = {e: {r[0]: make(r) for r in group} for e, group in groupby(found.fetchall(), itemgetter(1))}
            else:
                make, values = maker(StepRow), step_fields  # bound once: called per row
                for r in db.execute(f"select {SCOLS} from steps where episode_id in ({q})", part).fetchall():
                    steps.setdefault(r[1], {})[r[0]] = make(values(r, infos))
            for e in part:
                if e in eps:
                    yield eps[e], versions.get(e, []), steps.get(e, {})


def episode_from_row(row: Any, configs: dict[str, AgentConfig] | None = None) -> Episode:
    """An `EP_SQL` row as its record (`configs`: records already made, by their JSON text)."""
    config = configs.get(row[2]) if configs is not None else None
    if config is None:
        config = AgentConfig.model_validate_json(row[2])
        if configs is not None:
            configs[row[2]] = config
    return Episode(
        id=row[0],
        task=Task.model_validate_json(row[1]),
        config=config,
        env_options=from_json(row[3], {}),
        current_version=row[4],
        name=row[5],
        created_at=row[6],
    )


def _episode_summary(r: Any) -> dict[str, Any]:
    """One row of `list`'s query as the dict the faces show."""
    oc = Outcome.model_validate_json(r[9]) if r[9] else Outcome()
    return {
        "episode": r[0],
        "env": r[1],
        "type": r[2],
        "task": r[3],
        "text": r[4],
        "name": r[5],
        "created_at": r[6],
        "current_version": r[7],
        "status": r[8],
        "done": oc.done,
        "success": oc.success,
        "versions": r[10],
        "edited": bool(r[11] or r[12]),
        "model": r[13] or "",
    }
