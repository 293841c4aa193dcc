"""The SQLite store: an append-only tree of steps per episode, versions as leaf pointers.
`Store` is the one entry point; its parts: `sessions.versions` (versions, steps,
branches), `sessions.calls` (model calls, the response cache, blobs, settings),
`sessions.connection` (errors, transactions) and `sessions.rows` (bulk-read rows).

Invariants kept here (design.md): nothing is lost (every write is one transaction, WAL
mode, steps are never updated or deleted), an edit never copies the shared prefix (a step
row points at its parent; a version is a pointer to a leaf), the schema is migrated, never
rebuilt. Records in and out are the pydantic models of `trajectory.records`.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from sessions.connection import sqlite_utils  # (without pandas: a light start-up)

from sessions import schema
from sessions.calls import Calls
from sessions.connection import (LOCK_TIMEOUT_S, DatabaseFailure, StoreError, VersionChanged, _Connection, _Tx, to_json,
                                 from_json, describe_db_error)
from sessions.connection import VersionFrozen
from sessions.rows import CallRow, EpisodeTree, StepRow, UsageRow
from sessions.versions import Versions
from trajectory.records import AgentConfig, Episode, Outcome, Task, Version, now

__all__ = ["LOCK_TIMEOUT_S", "CallRow", "DatabaseFailure", "EpisodeTree", "StepRow", "Store", "StoreError", "UsageRow",
           "VersionChanged", "VersionFrozen", "default_db_path", "describe_db_error"]


def default_db_path() -> str:
    """The project database when none is named: $REACT_EDITOR_DB, else ./react_editor.db.
    The one place this is decided (the CLI and the app both ask here)."""
    return os.environ.get("REACT_EDITOR_DB") or str(Path.cwd() / "react_editor.db")


class Store(Versions, Calls):
    """One project database. Cheap to open; one Store may serve many threads: each thread
    reads and writes through its own connection (never shared), so a read sees only
    committed rows, never another thread's open transaction. (":memory:" is one connection.)"""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, readonly: bool = False):
        """`readonly`: for reading commands - nothing is created, migrated or written, so a
        database in a read-only folder (or on read-only media) can still be read."""
        self.file = str(path)
        self._params_ids: dict[str, int] = {}  # committed rows only
        self._params_new: dict[str, int] = {}  # inserted by the open transaction
        self._blob_keys: set[str] = set()  # blobs known to be committed (bounded)
        self._blobs_new: dict[str, bytes] = {}  # written by the open transaction
        self._lock = threading.RLock()  # one write transaction of this Store at a time
        self._local = threading.local()
        self._conn_lock = threading.Lock()
        self._busy_s: float | None = None  # set_busy_timeout; else LOCK_TIMEOUT_S as it is at connect time
        self._conns: dict[int, tuple[threading.Thread, sqlite3.Connection]] = {}
        self._shared: sqlite_utils.Database | None = None
        self._mode: tuple[bool, bool] = (readonly, False)
        if self.file != ":memory:":
            p = Path(self.file)
            if not p.exists() and (readonly or not create):
                raise StoreError(f"no database at {self.file}")
            if p.exists() and p.is_dir():
                raise StoreError(f"{self.file} is a directory, not a database file")
            if p.exists() and not p.is_file():  # a FIFO or device: opening it would block
                raise StoreError(f"{self.file} is not a regular file, not a database file")
            if not readonly and p.parent and not p.parent.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
        try:
            try:
                self._connect(readonly)
            except (sqlite3.OperationalError, DatabaseFailure) as exc:
                if not readonly or not any(w in str(exc) for w in ("unable to open", "readonly")):
                    raise
                # a WAL database in a folder we cannot write (no -shm file can be made)
                self._connect(readonly, immutable=True)
                self._mode = (readonly, True)
        except sqlite3.DatabaseError as exc:
            raise StoreError(describe_db_error(self.file, exc)) from None
        except schema.SchemaError as exc:
            raise StoreError(f"{self.file}: {exc}") from None

    def _open(self, readonly: bool, immutable: bool) -> sqlite3.Connection:
        target, uri = self.file, False
        if readonly:
            flags = "mode=ro&immutable=1" if immutable else "mode=ro"
            target, uri = f"{Path(self.file).resolve().as_uri()}?{flags}", True
        # check_same_thread=False only so close() may close every thread's connection
        timeout = self._busy_s if self._busy_s is not None else LOCK_TIMEOUT_S
        return sqlite3.connect(target, timeout=timeout, check_same_thread=False, isolation_level=None, uri=uri,
                               factory=_Connection)

    def set_busy_timeout(self, seconds: float) -> None:
        """How long a write waits for another writer before "database is locked" (LOCK_TIMEOUT_S)."""
        self._busy_s = seconds
        with self._conn_lock:
            conns = [c for _, c in self._conns.values()] + ([self._shared.conn] if self._shared else [])
        for conn in conns:
            conn.execute(f"pragma busy_timeout = {int(seconds * 1000)}")

    def _connect(self, readonly: bool, immutable: bool = False) -> None:
        """The first connection: checks the database and migrates it."""
        conn = self._open(readonly, immutable)
        try:
            db = sqlite_utils.Database(conn)
            schema.open_or_migrate(db, readonly=readonly)
        except BaseException:
            conn.close()
            raise
        self._adopt(db)

    def _adopt(self, db: sqlite_utils.Database) -> None:
        if self.file == ":memory:":
            self._shared = db
            return
        me = threading.current_thread()
        with self._conn_lock:
            for ident, (thread, conn) in list(self._conns.items()):  # threads that ended
                if not thread.is_alive():
                    del self._conns[ident]
                    conn.close()
            self._conns[me.ident] = (me, db.conn)
        self._local.db = db

    @property
    def db(self) -> sqlite_utils.Database:
        """This thread's connection (opened on its first use)."""
        db = self._shared or getattr(self._local, "db", None)
        if db is None:
            conn = self._open(*self._mode)
            conn.execute("pragma synchronous = full")
            conn.execute("pragma foreign_keys = on")
            db = sqlite_utils.Database(conn)
            self._adopt(db)
        return db

    # ------------------------------------------------------------------ transactions
    def transaction(self, *, durable: bool = True):
        """`with store.transaction():` - all-or-nothing, as invariant 1 asks. Serialised
        by a lock, so one Store may serve several threads (Streamlit sessions).
        `durable=False`: no fsync at the commit, for writes a power cut may lose because
        they are re-done or re-derived (claims, leases, progress; see `_Tx`)."""
        return _Tx(self, durable)

    def close(self) -> None:
        """Close every thread's connection."""
        if self._shared is not None:
            self._shared.conn.close()
            return
        with self._conn_lock:
            conns, self._conns = self._conns, {}
        for _, conn in conns.values():
            conn.close()
        self._local = threading.local()

    # ------------------------------------------------------------------ tasks / configs
    def _task_row(self, task: Task) -> int:
        key = task.key
        row = self.db.execute("select id, json from tasks where key = ?", [key]).fetchone()
        data = to_json(task)
        if row:
            if row[1] != data:  # same id, new content (e.g. a regenerated game): keep both
                key = f"{key}#{hashlib.sha256(data.encode()).hexdigest()[:8]}"
                row2 = self.db.execute("select id from tasks where key = ?", [key]).fetchone()
                if row2:
                    return row2[0]
            else:
                return row[0]
        return self._insert("tasks", {"key": key, "env": task.env, "type": task.type, "json": data})

    def _insert(self, table: str, row: dict[str, Any]) -> int:
        """Insert one row of plain values; its id. (sqlite-utils' `table.insert` checks the
        schema - several sqlite_master reads - on every call: too slow for a per-step row.)"""
        cols = ", ".join(f'"{c}"' for c in row)
        sql = f'insert into "{table}" ({cols}) values ({", ".join("?" * len(row))})'
        return self.db.execute(sql, list(row.values())).lastrowid

    def _config_row(self, config: AgentConfig) -> int:
        data = to_json(config) or "{}"
        key = hashlib.sha256(data.encode()).hexdigest()[:16]
        row = self.db.execute("select id from configs where key = ?", [key]).fetchone()
        if row:
            return row[0]
        return self._insert("configs", {"key": key, "json": data})

    # ------------------------------------------------------------------ episodes
    def create_episode(
        self,
        task: Task,
        config: AgentConfig,
        env_options: dict | None = None,
        name: str | None = None,
        *,
        created_at: str | None = None,  # an import keeps the original time
        version_name: str | None = None,
    ) -> tuple[Episode, Version]:
        """A new episode with its first (empty) version, which becomes current."""
        stamp, options = created_at or now(), to_json(env_options or {})
        with self.transaction():
            task_id = self._task_row(task)
            config_id = self._config_row(config)
            ep_id = self.db.execute(
                "insert into episodes (task_id, config_id, env_options, name, created_at) values (?,?,?,?,?)",
                [task_id, config_id, options, name, stamp],
            ).lastrowid
            version = self._insert_version(Version(episode_id=ep_id, name=version_name), config_id=config_id)
            self.db.execute("update episodes set current_version = ? where id = ?", [version.id, ep_id])
        # the row just written, without reading the task and config back (their own JSON)
        return Episode(id=ep_id, task=task, config=config, env_options=from_json(options, {}),
                       current_version=version.id, name=name, created_at=stamp), version

    _EP_SQL = (
        "select e.id, t.json, c.json, e.env_options, e.current_version, e.name, e.created_at "
        "from episodes e join tasks t on t.id = e.task_id join configs c on c.id = e.config_id "
    )

    def episode(self, episode_id: int) -> Episode:
        row = self.db.execute(self._EP_SQL + "where e.id = ?", [episode_id]).fetchone()
        if row is None:
            raise StoreError(f"unknown episode {episode_id}")
        return self._episode_from_row(row)

    def env_options(self, episode_id: int) -> dict[str, Any]:
        """The episode's environment options alone: the one part of an episode that a
        confirm or re-point changes (a step reads it fresh; the task never changes)."""
        row = self.db.execute("select env_options from episodes where id = ?", [episode_id]).fetchone()
        if row is None:
            raise StoreError(f"unknown episode {episode_id}")
        return from_json(row[0], {})

    @staticmethod
    def _episode_from_row(row) -> Episode:
        return Episode(
            id=row[0],
            task=Task.model_validate_json(row[1]),
            config=AgentConfig.model_validate_json(row[2]),
            env_options=from_json(row[3], {}),
            current_version=row[4],
            name=row[5],
            created_at=row[6],
        )

    def set_episode_config(self, episode_id: int, config: AgentConfig) -> None:
        """The episode's default config (what a version without a pinned one uses, and what
        the episode lists show). Existing versions keep the config they pinned."""
        self.episode(episode_id)
        with self.transaction():
            cid = self._config_row(config)
            self.db.execute("update episodes set config_id = ? where id = ?", [cid, episode_id])

    def set_env_options(self, episode_id: int, options: dict[str, Any]) -> None:
        """Re-point or confirm what the episode's environment opens (wiki backend, ...)."""
        self.episode(episode_id)
        with self.transaction():
            self.db.execute("update episodes set env_options = ? where id = ?", [to_json(options), episode_id])

    def rename_episode(self, episode_id: int, name: str | None) -> None:
        self.episode(episode_id)
        with self.transaction():
            self.db.execute("update episodes set name = ? where id = ?", [name, episode_id])

    def episodes_by_option(self, key: str, values: list[str]) -> dict[str, int]:
        """value -> episode id for the episodes whose env_options[key] is one of `values`."""
        out: dict[str, int] = {}
        for i in range(0, len(values), 500):
            chunk = values[i : i + 500]
            rows = self.db.execute(
                f"select json_extract(env_options, ?), id from episodes where json_extract(env_options, ?) "
                f"in ({','.join('?' * len(chunk))})", [f"$.{key}", f"$.{key}", *chunk])
            out.update({v: eid for v, eid in rows})
        return out

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
            item = _episode_summary(r)
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


def _episode_summary(r) -> dict[str, Any]:
    """One row of `list_episodes`' query as the dict the faces show."""
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
