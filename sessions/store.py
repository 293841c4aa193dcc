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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple

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
from trajectory.signals import STEP_LIMIT, PathState, version_signals
from sessions import schema



def default_db_path() -> str:
    """The project database when none is named: $REACT_EDITOR_DB, else ./react_editor.db.
    The one place this is decided (the CLI and the app both ask here)."""
    return os.environ.get("REACT_EDITOR_DB") or str(Path.cwd() / "react_editor.db")


class StoreError(Exception):
    """A one-line, user-facing problem: unknown id, foreign or newer database, ..."""


class VersionChanged(StoreError):
    """Another writer moved the version's leaf between our read and our write."""


LOCK_TIMEOUT_S = 30.0  # how long a writer waits for another's write lock


class DatabaseFailure(StoreError, sqlite3.DatabaseError):
    """SQLite said no (locked, constraint, disk full, corrupt page): one line, never a traceback."""


_HINTS = (
    ("locked", "another program is writing to the database; try again"),
    ("full", "free some disk space and try again"),
    ("constraint", "the write was refused and nothing was changed"),
    ("malformed", "the database file is damaged"),
    ("readonly", "the database file or its folder is read-only: reading works, writing needs write access"),
)


def _failure(exc: sqlite3.Error) -> DatabaseFailure:
    msg = (str(exc).splitlines() or [type(exc).__name__])[0]
    hint = next((h for word, h in _HINTS if word in msg.lower()), None)
    return DatabaseFailure(f"database error: {msg}" + (f" ({hint})" if hint else ""))


def _mapped(method):
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            if isinstance(exc, DatabaseFailure):
                raise
            raise _failure(exc) from None

    call.__name__ = method.__name__
    return call


class _Cursor(sqlite3.Cursor):
    """Every statement and every fetch of the store's connection raises StoreError, so no
    caller (CLI, app, engine, the modules that own other tables) sees a sqlite3 traceback."""

    execute = _mapped(sqlite3.Cursor.execute)
    executemany = _mapped(sqlite3.Cursor.executemany)
    executescript = _mapped(sqlite3.Cursor.executescript)
    fetchone = _mapped(sqlite3.Cursor.fetchone)
    fetchmany = _mapped(sqlite3.Cursor.fetchmany)
    fetchall = _mapped(sqlite3.Cursor.fetchall)
    __next__ = _mapped(sqlite3.Cursor.__next__)


class _Connection(sqlite3.Connection):
    def cursor(self, factory=_Cursor):  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql, parameters=(), /):  # type: ignore[override]
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql, parameters, /):  # type: ignore[override]
        return self.cursor().executemany(sql, parameters)

    def executescript(self, script, /):  # type: ignore[override]
        return self.cursor().executescript(script)
def describe_db_error(path: str, exc: BaseException) -> str:
    """One line naming what is wrong with the database file: read-only, truncated,
    damaged, or not a database at all (sqlite's own words in brackets)."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = msg.lower()
    folder = os.path.dirname(os.path.abspath(path))
    writable = os.access(path, os.W_OK) and os.access(folder, os.W_OK)
    if "readonly" in low or "read-only" in low or ("unable to open" in low and not writable):
        return (f"{path} is read-only ({msg}): reading commands (show, versions, episodes, export) work; "
                "writing needs write access to the file and its folder")
    short = _truncated(path)
    if short:
        return f"{path} is truncated ({short[0]:,} of {short[1]:,} bytes; {msg}); restore it from a backup"
    if "malformed" in low or "corrupt" in low:
        return f"{path} is damaged ({msg}); restore it from a backup, or try `sqlite3 {path} .recover`"
    if "not a database" in low:
        return f"{path} is not a ReAct Editor database (not an SQLite file: {msg})"
    return f"{path}: database error ({msg})"


def _truncated(path: str) -> tuple[int, int] | None:
    """(actual, expected) bytes when the file is shorter than its SQLite header says."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
        actual = os.path.getsize(path)
    except OSError:
        return None
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        return None
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] != head[92:96] or not pages:  # the header's page count is not current
        return None
    expected = page * pages
    return (actual, expected) if actual < expected else None


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


def _ids(text: str | None) -> list[int]:
    """A stored id list ("[3,4]", as `_j` writes it) without the JSON parser (bulk reads)."""
    if not text:
        return []
    try:
        return [int(x) for x in text[1:-1].split(",")]
    except ValueError:
        return json.loads(text)


class Store:
    """One project database. Cheap to open; one Store may serve many threads: each thread
    reads and writes through its own connection (never shared), so a read sees only
    committed rows, never another thread's open transaction. (":memory:" is one connection.)"""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, readonly: bool = False):
        """`readonly`: for reading commands - nothing is created, migrated or written, so a
        database in a read-only folder (or on read-only media) can still be read."""
        self.file = str(path)
        self._params_ids: dict[str, int] = {}  # committed rows only
        self._params_new: dict[str, int] = {}  # inserted by the open transaction
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
    def transaction(self):
        """`with store.transaction():` - all-or-nothing, as invariant 1 asks. Serialised
        by a lock, so one Store may serve several threads (Streamlit sessions)."""
        return _Tx(self)

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
        data = _j(task)
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
        data = _j(config) or "{}"
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
    ) -> tuple[Episode, Version]:
        """A new episode with its first (empty) version, which becomes current."""
        with self.transaction():
            task_id = self._task_row(task)
            config_id = self._config_row(config)
            ep_id = self.db.execute(
                "insert into episodes (task_id, config_id, env_options, name, created_at) values (?,?,?,?,?)",
                [task_id, config_id, _j(env_options or {}), name, created_at or now()],
            ).lastrowid
            version = self._insert_version(Version(episode_id=ep_id), config_id=config_id)
            self.db.execute("update episodes set current_version = ? where id = ?", [version.id, ep_id])
        return self.episode(ep_id), version

    _EP_SQL = (
        "select e.id, t.json, c.json, e.env_options, e.current_version, e.name, e.created_at "
        "from episodes e join tasks t on t.id = e.task_id join configs c on c.id = e.config_id "
    )

    def episode(self, episode_id: int) -> Episode:
        row = self.db.execute(self._EP_SQL + "where e.id = ?", [episode_id]).fetchone()
        if row is None:
            raise StoreError(f"unknown episode {episode_id}")
        return self._episode_from_row(row)

    @staticmethod
    def _episode_from_row(row) -> Episode:
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
            self.db.execute("update episodes set env_options = ? where id = ?", [_j(options), episode_id])

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
    def _insert_version(self, v: Version, *, config_id: int | None = None, exemplar_rev: int | None = None,
                        pin_from: int | None = None) -> Version:
        """A version pins the config (and exemplar-set revision) it runs with: given ones,
        else those of `pin_from` (the version it continues), else the episode's config."""
        if config_id is None and pin_from is not None:
            row = self.db.execute("select config_id, exemplar_rev from versions where id = ?", [pin_from]).fetchone()
            config_id, exemplar_rev = row or (None, None)
        if config_id is None:
            row = self.db.execute("select config_id from episodes where id = ?", [v.episode_id]).fetchone()
            if row is None:
                raise StoreError(f"unknown episode {v.episode_id}")
            config_id = row[0]
        row = {
            "episode_id": v.episode_id,
            "parent_version": v.parent_version,
            "leaf_step_id": v.leaf_step_id,
            "draft_thought": v.draft_thought,
            "draft_edit": _j(v.draft_edit),
            "edits": _j([e.model_dump(exclude_defaults=True) for e in v.edits]) if v.edits else None,
            "name": v.name,
            "status": v.status,
            "error": v.error,
            "outcome": _j(v.outcome),
            "created_at": v.created_at,
            "updated_at": v.updated_at,
            "config_id": config_id,
            "exemplar_rev": exemplar_rev,
        }
        vid = self._insert("versions", row)
        return v.model_copy(update={"id": vid})

    def create_version(self, v: Version, *, make_current: bool = True) -> Version:
        with self.transaction():
            out = self._insert_version(v, pin_from=v.parent_version)
            if make_current:
                self.db.execute("update episodes set current_version = ? where id = ?", [out.id, v.episode_id])
        return out

    def version_config(self, version_id: int) -> AgentConfig:
        """The agent config a version runs with (pinned when it was created)."""
        r = self.db.execute(
            "select c.json from versions v join configs c on c.id = coalesce(v.config_id, "
            "(select e.config_id from episodes e where e.id = v.episode_id)) where v.id = ?",
            [version_id],
        ).fetchone()
        if r is None:
            raise StoreError(f"unknown version {version_id}")
        return AgentConfig.model_validate_json(r[0])

    def exemplar_revision(self, version_id: int) -> int | None:
        """The exemplar-set revision a version's prompts use (None: not pinned yet / built-in)."""
        r = self.db.execute("select exemplar_rev from versions where id = ?", [version_id]).fetchone()
        if r is None:
            raise StoreError(f"unknown version {version_id}")
        return r[0]

    def pin_exemplar_revision(self, version_id: int, revision_id: int) -> None:
        """Pin a version's exemplars the first time they are used (never changed after)."""
        with self.transaction():
            self.db.execute("update versions set exemplar_rev = ? where id = ? and exemplar_rev is null",
                            [revision_id, version_id])

    def has_child_version(self, version_id: int) -> bool:
        return self.db.execute("select 1 from versions where parent_version = ? limit 1", [version_id]).fetchone() is not None

    _VCOLS = (
        "id, episode_id, parent_version, leaf_step_id, draft_thought, draft_edit, edits, name, status, "
        "error, outcome, created_at, updated_at"
    )

    def _version_from_row(self, r) -> Version:
        # A row this store wrote is trusted: construct without re-validating (hot: every step reads one).
        return Version.model_construct(
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
        "edit, call_ids, snapshot, created_at, signals"
    )

    @staticmethod
    def _step_fields(r, infos: dict[str, dict] | None = None) -> tuple:
        """A steps row (`_SCOLS`) as the values of `StepRow`'s fields, in order."""
        sid, eid, parent, idx, thought, action, obs, done, reward, info, source, edit, calls, snap, at, sig = r
        if infos is None or info is None:
            info = _uj(info, {})
        else:
            info = infos[info] if info in infos else infos.setdefault(info, json.loads(info))
        return (sid, eid, parent, idx, thought, action, obs, bool(done), reward or 0.0, info, source,
                EditInfo.model_validate_json(edit) if edit else None, _ids(calls),
                json.loads(snap) if snap else None, at, json.loads(sig) if sig else [])

    def _step_from_row(self, r) -> Step:
        return Step(**dict(zip(StepRow._fields, self._step_fields(r))))

    def _insert_step(self, s: Step) -> Step:
        # steps and calls are the hot path of every step: plain statements (sqlite-utils'
        # insert costs ~50 us a row); the rarer rows go through its table API
        sid = self.db.execute(
            "insert into steps (episode_id, parent_id, idx, thought, action, observation, done, reward, info, "
            "source, edit, call_ids, snapshot, created_at, signals) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                _j(s.signals) if s.signals else None,
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
        expected_leaf: int | None = ...,  # type: ignore[assignment]
    ) -> tuple[list[Step], Version]:
        """Record new steps at the end of a version, with the model calls that produced
        them, and move the version's leaf - all in one transaction. Steps' `call_ids` may
        hold negative placeholders -1, -2, ... meaning "the 1st, 2nd call in `calls`".

        Compare-and-set: with `expected_leaf` (the leaf the steps were computed from), a
        version whose leaf moved meanwhile raises VersionChanged and nothing is written."""
        out: list[Step] = []
        with self.transaction():
            v = self.version(version_id)
            parent = v.leaf_step_id
            if expected_leaf is not ... and parent != expected_leaf:
                raise _changed(version_id)
            steps = self._signed(v.episode_id, parent, steps)
            call_ids = [self._insert_call(c, v.episode_id) for c in calls]
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
            cur = self.db.execute(f"update versions set {', '.join(sets)} where id = ? and leaf_step_id is ?",
                                  params + [version_id, v.leaf_step_id])
            if cur.rowcount != 1:
                raise _changed(version_id)
        # The row just written, without reading it back: the same fields the update set.
        upd: dict[str, Any] = {"leaf_step_id": parent, "updated_at": params[1]}
        if status is not None:
            upd["status"] = status
        if outcome is not None:
            upd["outcome"] = Outcome.model_validate_json(_j(outcome))
        if error is not ...:
            upd["error"] = error
        if clear_draft:
            upd.update(draft_thought=None, draft_edit=None)
        return out, v.model_copy(update=upd)

    def branch(self, parent: Version, *, at_step: Step | None, steps: Iterable[Step] = (),
               config: AgentConfig | None = None, exemplar_rev: int | None = None, set_default: bool = True,
               make_current: bool = True, **fields: Any) -> tuple[Version, list[Step]]:
        """A new version whose path is root..`at_step` (shared, not copied) followed by
        `steps` (new rows). It becomes the episode's current version (unless
        `make_current` is False: rollouts never move the current version). It runs with the
        parent's config and exemplars unless `config` (and `exemplar_rev`) say otherwise;
        `set_default` makes that config the episode's default too (not for rollouts)."""
        steps = self._signed(parent.episode_id, at_step.id if at_step else None, steps)
        out: list[Step] = []
        with self.transaction():
            prev = at_step.id if at_step else None
            for s in steps:
                row = self._insert_step(s.model_copy(update={"episode_id": parent.episode_id, "parent_id": prev}))
                out.append(row)
                prev = row.id
            pin: dict[str, Any] = {"pin_from": parent.id}
            if config is not None:
                pin = {"config_id": self._config_row(config), "exemplar_rev": exemplar_rev}
                if set_default:
                    self.db.execute("update episodes set config_id = ? where id = ?", [pin["config_id"], parent.episode_id])
            v = self._insert_version(
                Version(episode_id=parent.episode_id, parent_version=parent.id, leaf_step_id=prev, **fields), **pin
            )
            if make_current:
                self.db.execute("update episodes set current_version = ? where id = ?", [v.id, parent.episode_id])
        return v, out

    def _signed(self, episode_id: int, parent_id: int | None, steps: Iterable[Step]) -> list[Step]:
        """The steps with their signals: those the caller did not compute (imports, thought
        edits; the engine computes its own, it knows the admissible commands) are computed
        here from the path before them."""
        steps = list(steps)
        if all(s.signals is not None for s in steps):
            return steps
        task = self.episode(episode_id).task
        state = PathState.start(task.env, task.text)
        for s in self.path(parent_id):
            state = state.then(s)
        out = []
        for s in steps:
            if s.signals is None:
                s = s.model_copy(update={"signals": state.signals(s)})
            out.append(s)
            state = state.then(s)
        return out

    # ------------------------------------------------------------------ trees (search, signals)
    def episode_trees(self, episode_ids: Iterable[int]) -> dict[int, "EpisodeTree"]:
        """The version trees of many episodes in three queries: what maps a step hit to the
        versions holding it and a version to the signals it carries."""
        out: dict[int, EpisodeTree] = {}
        ids = sorted(set(episode_ids))
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = ",".join("?" * len(chunk))
            for eid, env, typ, cur in self.db.execute(
                f"select e.id, t.env, t.type, e.current_version from episodes e join tasks t on t.id = e.task_id "
                f"where e.id in ({q})", chunk):
                out[eid] = EpisodeTree(eid, env, typ, cur)
            for vid, eid, leaf, oc in self.db.execute(
                f"select id, episode_id, leaf_step_id, outcome from versions where episode_id in ({q})", chunk):
                out[eid].versions[vid] = (leaf, Outcome.model_validate_json(oc) if oc else Outcome())
            for sid, eid, parent, idx, sig in self.db.execute(
                f"select id, episode_id, parent_id, idx, signals from steps where episode_id in ({q})", chunk):
                out[eid].steps[sid] = (parent, idx, _uj(sig, []))
        return out

    _OWNERS = {
        "step": "select id, episode_id from steps where id in ({})",
        "version": "select id, episode_id from versions where id in ({})",
        "task": "select task_id, id from episodes where task_id in ({}) order by id desc",
    }

    def episodes_of(self, kind: str, ids: Iterable[int]) -> dict[int, list[int]]:
        """The episode(s) each step / version / task id belongs to (a task: newest first)."""
        out: dict[int, list[int]] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            for key, eid in self.db.execute(self._OWNERS[kind].format(",".join("?" * len(chunk))), chunk):
                out.setdefault(key, []).append(eid)
        return out

    _OUTCOME_SQL = {  # a version's automatic outcome, as search filters it
        "success": "coalesce(json_extract(outcome, '$.success'), 0) = 1",
        "failure": "coalesce(json_extract(outcome, '$.done'), 0) = 1 and coalesce(json_extract(outcome, '$.success'), 0) != 1",
        "unfinished": "coalesce(json_extract(outcome, '$.done'), 0) = 0",
    }

    def episodes_with_outcome(self, outcome: str) -> set[int]:
        """Episodes with at least one version of this outcome (success, failure, unfinished)."""
        return {r[0] for r in self.db.execute(f"select episode_id from versions where {self._OUTCOME_SQL[outcome]}")}

    def episodes_flagged(self, signal: str) -> set[int]:
        """Episodes that may carry `signal` (a superset: a flagged step, or a version ended
        at its limit); `EpisodeTree.signals` decides per version."""
        if signal == STEP_LIMIT:
            sql, params = "select episode_id from versions where json_extract(outcome, '$.metrics.limit')", []
        else:
            sql, params = "select episode_id from steps where signals is not null and signals like ?", [f'%"{signal}"%']
        return {r[0] for r in self.db.execute(sql, params)}

    # ------------------------------------------------------------------ model calls
    # A call row holds what differs per call; what repeats (model, style, decoding params,
    # endpoint) sits once in call_params. The call log is also the response cache: a
    # successful call's `cache_key` answers identical temperature-0 requests later.
    def _params_row(self, c: ModelCall) -> int:
        data = json.dumps([c.model, c.api_style, c.params], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        key = hashlib.sha256(data.encode()).hexdigest()[:24]
        cached = self._params_ids.get(key) or self._params_new.get(key)
        if cached is None:
            row = self.db.execute("select id from call_params where key = ?", [key]).fetchone()
            cached = row[0] if row else self.db["call_params"].insert(
                {"key": key, "model": c.model, "api_style": c.api_style, "params": _j(c.params)}
            ).last_pk
            self._params_new[key] = cached
        return cached

    def _insert_call(self, c: ModelCall, episode_id: int) -> int:
        u = c.usage or Usage()
        return self.db.execute(
            "insert into model_calls (episode_id, created_at, params_id, purpose, prompt_hash, prompt_chars, "
            "completion, prompt_tokens, completion_tokens, cached_tokens, latency_ms, attempts, cached, error, "
            "cache_key, cut_from) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                c.cut_from,
            ],
        ).lastrowid

    def record_calls(self, episode_id: int, calls: Iterable[ModelCall]) -> list[int]:
        """Record calls that produced no step (failed ones): nothing about a call is lost."""
        with self.transaction():
            return [self._insert_call(c, episode_id) for c in calls]

    # A paid answer the database could not take (its write lock held past LOCK_TIMEOUT_S) is
    # kept in a file beside it and recorded by the next writer: the next attempt is answered
    # from the call log (the response cache) instead of paying again.
    @property
    def _pending_file(self) -> Path | None:
        return None if self.file == ":memory:" else Path(f"{self.file}.pending-calls.jsonl")

    def keep_pending_calls(self, episode_id: int, calls: Iterable[ModelCall]) -> bool:
        """Append calls the database refused to the pending file; False if it cannot be written."""
        path = self._pending_file
        lines = "".join(json.dumps({"episode": episode_id, "call": c.model_dump(mode="json")}) + "\n" for c in calls)
        if path is None or not lines:
            return False
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(lines)
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError:
            return False

    def record_pending_calls(self) -> int:
        """Record the calls kept in the pending file (then remove it); how many."""
        path = self._pending_file
        if path is None or not path.exists():
            return 0
        taken = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}")
        try:
            os.replace(path, taken)  # one drainer takes the file; later answers start a new one
        except OSError:
            return 0
        rows = []
        for line in taken.read_text(encoding="utf-8").splitlines():
            try:
                d = json.loads(line)
                rows.append((int(d["episode"]), ModelCall.model_validate({**d["call"], "id": None})))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash: the rest still count
        try:
            with self.transaction():
                for eid, call in rows:
                    self._insert_call(call, eid)
        except StoreError:
            if not path.exists():  # still blocked: keep them for later
                os.replace(taken, path)
            raise
        taken.unlink(missing_ok=True)
        return len(rows)

    _CALL_SQL = (
        "select c.id, c.episode_id, c.created_at, p.model, p.api_style, c.purpose, p.params, c.prompt_hash, "
        "c.prompt_chars, c.completion, c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.latency_ms, "
        "c.attempts, c.cached, c.error, c.cache_key, c.cut_from "
        "from model_calls c left join call_params p on p.id = c.params_id "
    )

    def calls(self, ids: Iterable[int] | None = None, *, episode_id: int | None = None) -> list[ModelCall]:
        if ids is not None:
            ids = list(ids)
            if not ids:
                return []
            rows = self.db.execute(self._CALL_SQL + f"where c.id in ({','.join('?' * len(ids))}) order by c.id", ids)
        else:
            rows = self.db.execute(self._CALL_SQL + "where c.episode_id = ? order by c.id", [episode_id])
        return [ModelCall(**dict(zip(CallRow._fields, self._call_fields(r, _uj(r[6], {}), Usage)))) for r in rows]

    @staticmethod
    def _call_fields(r, params: dict, usage: type) -> tuple:
        """A `_CALL_SQL` row as the values of `CallRow`'s fields, in order."""
        return (r[0], r[1], r[2], r[3] or "", r[4] or "completions", r[5], params,
                r[7].hex() if r[7] is not None else "", r[8] or 0, r[9],
                usage(prompt_tokens=r[10], completion_tokens=r[11], cached_prompt_tokens=r[12]),
                r[13], r[14], bool(r[15]), r[16], r[17].hex() if r[17] is not None else None, r[18])

    # ------------------------------------------------------------------ bulk reads (export)
    # A pydantic record per row costs more than the whole read; bulk reads of our own rows
    # give plain rows with the records' field names (StepRow, CallRow) instead.
    def read_episodes(self, episode_ids: Iterable[int], chunk: int = 200) -> Iterator[
            tuple[Episode, list[Version], dict[int, "StepRow"]]]:
        """Episodes (in the given order) with all their versions and steps, a chunk of
        episodes at a time: three set-based queries per chunk, never one per version. Rows
        come by `fetchall` (the cursor checks every fetch call; one call per query, not per row)."""
        ids = list(episode_ids)
        infos: dict[str, dict] = {}  # the same info text (e.g. {"won":false}) is parsed once, shared read-only
        for i in range(0, len(ids), chunk):
            part = ids[i : i + chunk]
            q = ",".join("?" * len(part))
            rows = self.db.execute(self._EP_SQL + f"where e.id in ({q})", part).fetchall()
            eps = {r[0]: self._episode_from_row(r) for r in rows}
            versions: dict[int, list[Version]] = {}
            rows = self.db.execute(f"select {self._VCOLS} from versions where episode_id in ({q}) order by id", part)
            for r in rows.fetchall():
                versions.setdefault(r[1], []).append(self._version_from_row(r))
            steps: dict[int, dict[int, StepRow]] = {}
            make, values = StepRow._make, self._step_fields  # bound once: called per row
            for r in self.db.execute(f"select {self._SCOLS} from steps where episode_id in ({q})", part).fetchall():
                steps.setdefault(r[1], {})[r[0]] = make(values(r, infos))
            for e in part:
                if e in eps:
                    yield eps[e], versions.get(e, []), steps.get(e, {})

    def episode_call_rows(self, episode_ids: Iterable[int]) -> dict[int, "CallRow"]:
        """The model calls recorded for these episodes, by id (one query per 500 episodes)."""
        out: dict[int, CallRow] = {}
        params: dict[str | None, dict] = {}
        make, values = CallRow._make, self._call_fields  # bound once: called per row
        ids = list(episode_ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.db.execute(self._CALL_SQL + f"where c.episode_id in ({','.join('?' * len(part))})", part)
            for r in rows.fetchall():
                if r[6] not in params:
                    params[r[6]] = _uj(r[6], {})
                out[r[0]] = make(values(r, params[r[6]], UsageRow))
        return out

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
            # plain SQL: sqlite-utils looks the row up by rowid afterwards, which a
            # WITHOUT ROWID table does not have (a page fetched twice would fail)
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
            self.db["settings"].upsert({"key": key, "value": json.dumps(value)}, pk="key")

    def integrity_check(self) -> str:
        return self.db.execute("pragma integrity_check").fetchone()[0]


def _changed(version_id: int) -> VersionChanged:
    return VersionChanged(f"version {version_id} changed meanwhile (another writer added steps); reload it and try again")


class StepRow(NamedTuple):
    """A stored step as plain attributes: `trajectory.records.Step`'s fields, for bulk reads."""

    id: int
    episode_id: int
    parent_id: int | None
    index: int
    thought: str | None
    action: str | None
    observation: str | None
    done: bool
    reward: float
    info: dict
    source: str
    edit: EditInfo | None
    call_ids: list
    snapshot: dict | None
    created_at: str
    signals: list

    def model_copy(self, *, update: dict[str, Any]) -> "StepRow":
        """As `Step.model_copy` (the prompt writers copy a step to drop its observation)."""
        return self._replace(**update)


class UsageRow(NamedTuple):
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_prompt_tokens: int | None


class CallRow(NamedTuple):
    """A recorded model call as plain attributes: `ModelCall`'s fields, for bulk reads."""

    id: int
    episode_id: int | None
    created_at: str
    model: str
    api_style: str
    purpose: str
    params: dict
    prompt_hash: str
    prompt_chars: int
    completion: str | None
    usage: UsageRow
    latency_ms: float | None
    attempts: int | None
    cached: bool
    error: str | None
    cache_key: str | None
    cut_from: int | None


@dataclass
class EpisodeTree:
    """One episode's version tree as search needs it: versions (id -> leaf step, outcome)
    and steps (id -> parent, index, signals)."""

    id: int
    env: str
    type: str | None
    current: int | None
    versions: dict[int, tuple[int | None, Outcome]] = field(default_factory=dict)
    steps: dict[int, tuple[int | None, int, list[str]]] = field(default_factory=dict)

    def path(self, version_id: int) -> list[int]:
        """Step ids of a version, leaf first."""
        out, sid = [], self.versions[version_id][0]
        while sid is not None:
            out.append(sid)
            sid = self.steps[sid][0]
        return out

    def preferred(self, version_ids: Iterable[int]) -> list[int]:
        """The current version first, then the newest first."""
        return sorted(version_ids, key=lambda v: (v != self.current, -v))

    def holding(self, step_id: int) -> list[int]:
        """The versions whose path holds the step, preferred first."""
        return self.preferred(v for v in self.versions if step_id in self.path(v))

    def signals(self, version_id: int) -> set[str]:
        return version_signals((self.steps[s][2] for s in self.path(version_id)), self.versions[version_id][1])


class _Tx:
    """Re-entrant transaction: the outermost `with` commits or rolls back. Caches learn
    the rows a transaction inserted only once it committed (a rollback must not leave ids
    behind that no longer exist)."""

    def __init__(self, store: Store):
        self.store, self.conn, self.lock = store, store.db.conn, store._lock

    def __enter__(self):
        self.lock.acquire()
        self.outer = not self.conn.in_transaction
        if self.outer:
            try:
                self.conn.execute("begin immediate")
            except BaseException:
                self.lock.release()
                raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if self.outer:
                new, self.store._params_new = self.store._params_new, {}
                if exc_type is None:
                    try:
                        self.conn.execute("commit")
                    except BaseException:
                        if self.conn.in_transaction:
                            self.conn.execute("rollback")
                        raise
                    self.store._params_ids.update(new)
                elif self.conn.in_transaction:
                    self.conn.execute("rollback")
        finally:
            self.lock.release()
        return False
