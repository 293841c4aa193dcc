"""The SQLite store: an append-only tree of steps per episode, versions as leaf pointers.

Invariants kept here (design.md): nothing is lost (every write is one transaction, WAL
mode, steps are never updated or deleted), an edit never copies the shared prefix (a step
row points at its parent; a version is a pointer to a leaf), the schema is migrated, never
rebuilt. Records in and out are the pydantic models of `trajectory.records`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

import sqlite_utils

from trajectory.records import (
    AgentConfig,
    EditInfo,
    Episode,
    ModelCall,
    Outcome,
    Step,
    Task,
    Usage,
    Version,
    now,
)
from sessions import schema



def default_db_path() -> str:
    """The project database when none is named: $REACT_EDITOR_DB, else ./react_editor.db.
    The one place this is decided (the CLI and the app both ask here)."""
    return os.environ.get("REACT_EDITOR_DB") or str(Path.cwd() / "react_editor.db")


class StoreError(Exception):
    """A one-line, user-facing problem: unknown id, foreign or newer database, ..."""


def _j(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_defaults=True)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _hex_blob(h: str | None) -> bytes | None:
    """sha256 hex digests are kept as raw bytes: half the size on disk."""
    if not h:
        return None
    try:
        return bytes.fromhex(h)
    except ValueError:
        return h.encode()


def _uj(text: str | None, default: Any = None) -> Any:
    return default if text is None else json.loads(text)


class Store:
    """One project database. Cheap to open; safe to share across threads of one process
    only through separate Store instances (sqlite3 connections are per-thread)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True):
        self.file = str(path)
        self._params_ids: dict[str, int] = {}
        self._lock = threading.RLock()
        if self.file != ":memory:":
            p = Path(self.file)
            if not p.exists() and not create:
                raise StoreError(f"no database at {self.file}")
            if p.exists() and p.is_dir():
                raise StoreError(f"{self.file} is a directory, not a database file")
            if p.parent and not p.parent.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.file, timeout=30, check_same_thread=False, isolation_level=None)
            self.db = sqlite_utils.Database(conn)
            schema.open_or_migrate(self.db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.file} is not a ReAct Editor database ({exc})") from None
        except schema.SchemaError as exc:
            raise StoreError(f"{self.file}: {exc}") from None

    # ------------------------------------------------------------------ transactions
    def transaction(self):
        """`with store.transaction():` - all-or-nothing, as invariant 1 asks. Serialised
        by a lock, so one Store may serve several threads (Streamlit sessions)."""
        return _Tx(self.db.conn, self._lock)

    def close(self) -> None:
        self.db.conn.close()

    # ------------------------------------------------------------------ tasks / configs
    def _task_row(self, task: Task) -> int:
        key = task.key
        row = self.db.execute("select id, json from tasks where key = ?", [key]).fetchone()
        data = _j(task)
        if row:
            if row[1] != data:  # same id, new content (e.g. a regenerated game): keep both
                key = f"{key}#{hashlib.sha256(data.encode()).hexdigest()[:8]}"
                row2 = self.db.execute("select id from tasks where key = ?", [key]).fetchone()
                if row2:
                    return row2[0]
            else:
                return row[0]
        cur = self.db.execute(
            "insert into tasks (key, env, type, json) values (?, ?, ?, ?)",
            [key, task.env, task.type, data],
        )
        return cur.lastrowid

    def _config_row(self, config: AgentConfig) -> int:
        data = _j(config) or "{}"
        key = hashlib.sha256(data.encode()).hexdigest()[:16]
        row = self.db.execute("select id from configs where key = ?", [key]).fetchone()
        if row:
            return row[0]
        return self.db.execute("insert into configs (key, json) values (?, ?)", [key, data]).lastrowid

    # ------------------------------------------------------------------ episodes
    def create_episode(
        self,
        task: Task,
        config: AgentConfig,
        env_options: dict | None = None,
        name: str | None = None,
        *,
        created_at: str | None = None,  # an import keeps the original time
    ) -> tuple[Episode, Version]:
        """A new episode with its first (empty) version, which becomes current."""
        with self.transaction():
            task_id = self._task_row(task)
            config_id = self._config_row(config)
            ep_id = self.db.execute(
                "insert into episodes (task_id, config_id, env_options, name, created_at) values (?,?,?,?,?)",
                [task_id, config_id, _j(env_options or {}), name, created_at or now()],
            ).lastrowid
            version = self._insert_version(Version(episode_id=ep_id))
            self.db.execute("update episodes set current_version = ? where id = ?", [version.id, ep_id])
        return self.episode(ep_id), version

    def episode(self, episode_id: int) -> Episode:
        row = self.db.execute(
            "select e.id, t.json, c.json, e.env_options, e.current_version, e.name, e.created_at "
            "from episodes e join tasks t on t.id = e.task_id join configs c on c.id = e.config_id "
            "where e.id = ?",
            [episode_id],
        ).fetchone()
        if row is None:
            raise StoreError(f"unknown episode {episode_id}")
        return Episode(
            id=row[0],
            task=Task.model_validate_json(row[1]),
            config=AgentConfig.model_validate_json(row[2]),
            env_options=_uj(row[3], {}),
            current_version=row[4],
            name=row[5],
            created_at=row[6],
        )

    def set_episode_config(self, episode_id: int, config: AgentConfig) -> None:
        """Switch the agent config used for further steps (model, endpoint, ...)."""
        self.episode(episode_id)
        with self.transaction():
            cid = self._config_row(config)
            self.db.execute("update episodes set config_id = ? where id = ?", [cid, episode_id])

    def rename_episode(self, episode_id: int, name: str | None) -> None:
        self.episode(episode_id)
        with self.transaction():
            self.db.execute("update episodes set name = ? where id = ?", [name, episode_id])

    def episode_ids(self, *, env: str | None = None, task_type: str | None = None) -> list[int]:
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
        return [r[0] for r in self.db.execute(sql + " order by e.id", params)]

    def list_episodes(
        self,
        *,
        env: str | None = None,
        task_type: str | None = None,
        outcome: str | None = None,  # "success" | "failure" | "unfinished"
        edited: bool | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Summaries for the Episodes page / `react-editor episodes`: one dict per episode
        with its current version's outcome and the episode's edit count."""
        where, params = [], []
        if env:
            where.append("t.env = ?")
            params.append(env)
        if task_type:
            where.append("t.type = ?")
            params.append(task_type)
        sql = (
            "select e.id, t.env, t.type, json_extract(t.json, '$.id'), json_extract(t.json, '$.text'), "
            "e.name, e.created_at, e.current_version, v.status, v.outcome, "
            "(select count(*) from versions v2 where v2.episode_id = e.id), "
            "(select count(*) from steps s where s.episode_id = e.id and s.source = 'human'), "
            "(select count(*) from versions v3 where v3.episode_id = e.id and v3.edits is not null), "
            "json_extract(c.json, '$.model') "
            "from episodes e join tasks t on t.id = e.task_id join configs c on c.id = e.config_id "
            "left join versions v on v.id = e.current_version"
        )
        if where:
            sql += " where " + " and ".join(where)
        sql += " order by e.id desc"
        out = []
        for r in self.db.execute(sql, params):
            oc = Outcome.model_validate_json(r[9]) if r[9] else Outcome()
            item = {
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
            if edited is not None and item["edited"] != edited:
                continue
            if outcome == "success" and item["success"] is not True:
                continue
            if outcome == "failure" and not (item["done"] and item["success"] is not True):
                continue
            if outcome == "unfinished" and item["done"]:
                continue
            out.append(item)
            if limit and len(out) >= limit:
                break
        return out

    # ------------------------------------------------------------------ versions
    def _insert_version(self, v: Version) -> Version:
        vid = self.db.execute(
            "insert into versions (episode_id, parent_version, leaf_step_id, draft_thought, draft_edit, "
            "edits, name, status, error, outcome, created_at, updated_at) values (?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                v.episode_id,
                v.parent_version,
                v.leaf_step_id,
                v.draft_thought,
                _j(v.draft_edit),
                _j([e.model_dump(exclude_defaults=True) for e in v.edits]) if v.edits else None,
                v.name,
                v.status,
                v.error,
                _j(v.outcome),
                v.created_at,
                v.updated_at,
            ],
        ).lastrowid
        return v.model_copy(update={"id": vid})

    def create_version(self, v: Version, *, make_current: bool = True) -> Version:
        with self.transaction():
            out = self._insert_version(v)
            if make_current:
                self.db.execute("update episodes set current_version = ? where id = ?", [out.id, v.episode_id])
        return out

    _VCOLS = (
        "id, episode_id, parent_version, leaf_step_id, draft_thought, draft_edit, edits, name, status, "
        "error, outcome, created_at, updated_at"
    )

    def _version_from_row(self, r) -> Version:
        return Version(
            id=r[0],
            episode_id=r[1],
            parent_version=r[2],
            leaf_step_id=r[3],
            draft_thought=r[4],
            draft_edit=EditInfo.model_validate_json(r[5]) if r[5] else None,
            edits=[EditInfo.model_validate(e) for e in _uj(r[6], [])],
            name=r[7],
            status=r[8],
            error=r[9],
            outcome=Outcome.model_validate_json(r[10]) if r[10] else Outcome(),
            created_at=r[11],
            updated_at=r[12],
        )

    def version(self, version_id: int, episode_id: int | None = None) -> Version:
        r = self.db.execute(f"select {self._VCOLS} from versions where id = ?", [version_id]).fetchone()
        if r is None or (episode_id is not None and r[1] != episode_id):
            where = f" of episode {episode_id}" if episode_id is not None else ""
            raise StoreError(f"unknown version {version_id}{where}")
        return self._version_from_row(r)

    def versions(self, episode_id: int) -> list[Version]:
        self.episode(episode_id)
        return [
            self._version_from_row(r)
            for r in self.db.execute(f"select {self._VCOLS} from versions where episode_id = ? order by id", [episode_id])
        ]

    def update_version(self, version_id: int, **fields: Any) -> Version:
        """Move a version's pointer or record its status/outcome/name (a version is a
        pointer; the steps it points at never change). An import may also set its lineage
        and timestamps; otherwise `updated_at` becomes now."""
        allowed = {"leaf_step_id", "draft_thought", "draft_edit", "name", "status", "error", "outcome",
                   "parent_version", "edits", "created_at", "updated_at"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update {sorted(bad)}")
        self.version(version_id)
        fields.setdefault("updated_at", now())
        sets, params = [], []
        for k, v in fields.items():
            sets.append(f"{k} = ?")
            if k in ("draft_edit", "outcome"):
                v = _j(v)
            elif k == "edits":
                v = _j([e.model_dump(exclude_defaults=True) for e in v]) if v else None
            params.append(v)
        with self.transaction():
            self.db.execute(f"update versions set {', '.join(sets)} where id = ?", params + [version_id])
        return self.version(version_id)

    def set_current_version(self, episode_id: int, version_id: int) -> None:
        self.version(version_id, episode_id)
        with self.transaction():
            self.db.execute("update episodes set current_version = ? where id = ?", [version_id, episode_id])

    # ------------------------------------------------------------------ steps
    _SCOLS = (
        "id, episode_id, parent_id, idx, thought, action, observation, done, reward, info, source, "
        "edit, call_ids, snapshot, created_at"
    )

    def _step_from_row(self, r) -> Step:
        return Step(
            id=r[0],
            episode_id=r[1],
            parent_id=r[2],
            index=r[3],
            thought=r[4],
            action=r[5],
            observation=r[6],
            done=bool(r[7]),
            reward=r[8] or 0.0,
            info=_uj(r[9], {}),
            source=r[10],
            edit=EditInfo.model_validate_json(r[11]) if r[11] else None,
            call_ids=_uj(r[12], []),
            snapshot=_uj(r[13]),
            created_at=r[14],
        )

    def _insert_step(self, s: Step) -> Step:
        sid = self.db.execute(
            "insert into steps (episode_id, parent_id, idx, thought, action, observation, done, reward, info, "
            "source, edit, call_ids, snapshot, created_at) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                s.episode_id,
                s.parent_id,
                s.index,
                s.thought,
                s.action,
                s.observation,
                int(s.done),
                s.reward or None,
                _j(s.info) if s.info else None,
                s.source,
                _j(s.edit),
                _j(s.call_ids) if s.call_ids else None,
                _j(s.snapshot),
                s.created_at,
            ],
        ).lastrowid
        return s.model_copy(update={"id": sid})

    def step(self, step_id: int) -> Step:
        r = self.db.execute(f"select {self._SCOLS} from steps where id = ?", [step_id]).fetchone()
        if r is None:
            raise StoreError(f"unknown step {step_id}")
        return self._step_from_row(r)

    def path(self, leaf_step_id: int | None) -> list[Step]:
        """Root -> leaf, following parent pointers (one recursive query)."""
        if leaf_step_id is None:
            return []
        rows = self.db.execute(
            "with recursive p(id, depth) as (select ?, 0 union all "
            "select s.parent_id, p.depth + 1 from steps s join p on s.id = p.id where s.parent_id is not null) "
            f"select {', '.join('s.' + c.strip() for c in self._SCOLS.split(','))} "
            "from p join steps s on s.id = p.id order by p.depth desc",
            [leaf_step_id],
        ).fetchall()
        return [self._step_from_row(r) for r in rows]

    def version_steps(self, version_id: int) -> list[Step]:
        return self.path(self.version(version_id).leaf_step_id)

    def children(self, step_id: int | None, episode_id: int) -> list[Step]:
        if step_id is None:
            rows = self.db.execute(
                f"select {self._SCOLS} from steps where episode_id = ? and parent_id is null order by id", [episode_id]
            )
        else:
            rows = self.db.execute(f"select {self._SCOLS} from steps where parent_id = ? order by id", [step_id])
        return [self._step_from_row(r) for r in rows]

    def append_steps(
        self,
        version_id: int,
        steps: Iterable[Step],
        calls: Iterable[ModelCall] = (),
        *,
        status: str | None = None,
        outcome: Outcome | None = None,
        error: str | None = ...,  # type: ignore[assignment]
        clear_draft: bool = False,
    ) -> tuple[list[Step], Version]:
        """Record new steps at the end of a version, with the model calls that produced
        them, and move the version's leaf - all in one transaction. Steps' `call_ids` may
        hold negative placeholders -1, -2, ... meaning "the 1st, 2nd call in `calls`"."""
        v = self.version(version_id)
        out: list[Step] = []
        with self.transaction():
            call_ids = [self._insert_call(c, v.episode_id) for c in calls]
            parent = v.leaf_step_id
            for s in steps:
                ids = [call_ids[-c - 1] if c < 0 else c for c in s.call_ids]
                row = self._insert_step(
                    s.model_copy(update={"episode_id": v.episode_id, "parent_id": parent, "call_ids": ids})
                )
                out.append(row)
                parent = row.id
            sets = ["leaf_step_id = ?", "updated_at = ?"]
            params: list[Any] = [parent, now()]
            if status is not None:
                sets.append("status = ?")
                params.append(status)
            if outcome is not None:
                sets.append("outcome = ?")
                params.append(_j(outcome))
            if error is not ...:
                sets.append("error = ?")
                params.append(error)
            if clear_draft:
                sets.append("draft_thought = null, draft_edit = null")
            self.db.execute(f"update versions set {', '.join(sets)} where id = ?", params + [version_id])
        return out, self.version(version_id)

    def branch(self, parent: Version, *, at_step: Step | None, steps: Iterable[Step] = (), **fields: Any) -> tuple[Version, list[Step]]:
        """A new version whose path is root..`at_step` (shared, not copied) followed by
        `steps` (new rows). It becomes the episode's current version."""
        out: list[Step] = []
        with self.transaction():
            prev = at_step.id if at_step else None
            for s in steps:
                row = self._insert_step(s.model_copy(update={"episode_id": parent.episode_id, "parent_id": prev}))
                out.append(row)
                prev = row.id
            v = self._insert_version(
                Version(episode_id=parent.episode_id, parent_version=parent.id, leaf_step_id=prev, **fields)
            )
            self.db.execute("update episodes set current_version = ? where id = ?", [v.id, parent.episode_id])
        return v, out

    # ------------------------------------------------------------------ model calls
    # A call row holds what differs per call; what repeats (model, style, decoding params,
    # endpoint) sits once in call_params. The call log is also the response cache: a
    # successful call's `cache_key` answers identical temperature-0 requests later.
    def _params_row(self, c: ModelCall) -> int:
        data = json.dumps([c.model, c.api_style, c.params], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        key = hashlib.sha256(data.encode()).hexdigest()[:24]
        cached = self._params_ids.get(key)
        if cached is None:
            row = self.db.execute("select id from call_params where key = ?", [key]).fetchone()
            cached = row[0] if row else self.db.execute(
                "insert into call_params (key, model, api_style, params) values (?,?,?,?)",
                [key, c.model, c.api_style, _j(c.params)],
            ).lastrowid
            self._params_ids[key] = cached
        return cached

    def _insert_call(self, c: ModelCall, episode_id: int) -> int:
        u = c.usage or Usage()
        return self.db.execute(
            "insert into model_calls (episode_id, created_at, params_id, purpose, prompt_hash, prompt_chars, "
            "completion, prompt_tokens, completion_tokens, cached_tokens, latency_ms, attempts, cached, error, "
            "cache_key) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                c.episode_id or episode_id,
                c.created_at,
                self._params_row(c),
                c.purpose,
                _hex_blob(c.prompt_hash),
                c.prompt_chars,
                c.completion,
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_prompt_tokens,
                round(c.latency_ms, 3) if c.latency_ms is not None else None,
                c.attempts,
                int(c.cached),
                c.error,
                _hex_blob(c.cache_key[:32]) if c.cache_key and c.error is None else None,
            ],
        ).lastrowid

    def record_calls(self, episode_id: int, calls: Iterable[ModelCall]) -> list[int]:
        """Record calls that produced no step (failed ones): nothing about a call is lost."""
        with self.transaction():
            return [self._insert_call(c, episode_id) for c in calls]

    _CALL_SQL = (
        "select c.id, c.episode_id, c.created_at, p.model, p.api_style, c.purpose, p.params, c.prompt_hash, "
        "c.prompt_chars, c.completion, c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.latency_ms, "
        "c.attempts, c.cached, c.error, c.cache_key from model_calls c left join call_params p on p.id = c.params_id "
    )

    def calls(self, ids: Iterable[int] | None = None, *, episode_id: int | None = None) -> list[ModelCall]:
        if ids is not None:
            ids = list(ids)
            if not ids:
                return []
            rows = self.db.execute(self._CALL_SQL + f"where c.id in ({','.join('?' * len(ids))}) order by c.id", ids)
        else:
            rows = self.db.execute(self._CALL_SQL + "where c.episode_id = ? order by c.id", [episode_id])
        return [
            ModelCall(
                id=r[0],
                episode_id=r[1],
                created_at=r[2],
                model=r[3] or "",
                api_style=r[4] or "completions",
                purpose=r[5],
                params=_uj(r[6], {}),
                prompt_hash=bytes(r[7]).hex() if r[7] is not None else "",
                prompt_chars=r[8] or 0,
                completion=r[9],
                usage=Usage(prompt_tokens=r[10], completion_tokens=r[11], cached_prompt_tokens=r[12]),
                latency_ms=r[13],
                attempts=r[14],
                cached=bool(r[15]),
                error=r[16],
                cache_key=bytes(r[17]).hex() if r[17] is not None else None,
            )
            for r in rows
        ]

    # ------------------------------------------------------------------ response cache
    def cache_get(self, key: str) -> tuple[str, Usage] | None:
        r = self.db.execute(
            "select completion, prompt_tokens, completion_tokens, cached_tokens from model_calls "
            "where cache_key = ? and error is null limit 1",
            [_hex_blob(key[:32])],
        ).fetchone()
        if r is None:
            return None
        return r[0] or "", Usage(prompt_tokens=r[1], completion_tokens=r[2], cached_prompt_tokens=r[3])

    def cache_clear(self) -> int:
        """Turn every recorded response back into history only (nothing is deleted)."""
        with self.transaction():
            return self.db.execute("update model_calls set cache_key = null where cache_key is not null").rowcount

    get = cache_get  # the ResponseCache protocol of agent.client (recording a call fills it)

    # ------------------------------------------------------------------ blobs
    def put_blob(self, data: bytes) -> str:
        key = hashlib.sha256(data).hexdigest()[:32]
        with self.transaction():
            self.db.execute("insert or ignore into blobs (key, data) values (?, ?)", [key, data])
        return key

    def get_blob(self, key: str) -> bytes | None:
        r = self.db.execute("select data from blobs where key = ?", [key]).fetchone()
        return None if r is None else bytes(r[0])

    # ------------------------------------------------------------------ settings
    def get_setting(self, key: str, default: Any = None) -> Any:
        r = self.db.execute("select value from settings where key = ?", [key]).fetchone()
        return default if r is None else json.loads(r[0])

    def set_setting(self, key: str, value: Any) -> None:
        if "key" in key.lower() and "api" in key.lower():
            raise StoreError("API keys are never stored in the database")
        with self.transaction():
            self.db.execute("insert or replace into settings (key, value) values (?, ?)", [key, json.dumps(value)])

    def integrity_check(self) -> str:
        return self.db.execute("pragma integrity_check").fetchone()[0]


class _Tx:
    """Re-entrant transaction: the outermost `with` commits or rolls back."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock):
        self.conn, self.lock = conn, lock

    def __enter__(self):
        self.lock.acquire()
        self.outer = not self.conn.in_transaction
        if self.outer:
            self.conn.execute("begin immediate")
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if self.outer:
                self.conn.execute("commit" if exc_type is None else "rollback")
        finally:
            self.lock.release()
        return False
