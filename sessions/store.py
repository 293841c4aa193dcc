"""The SQLite store: an append-only tree of steps per episode, versions as leaf pointers.
`Store` is the one entry point: it holds the connections (one per thread) and the
transactions, and hands out its parts, as sqlite-utils' `Database` hands out tables:
`store.episodes` (tasks, configs, episodes; `sessions.episodes`), `store.versions`
(versions, steps, branches, paths; `sessions.versions`), `store.calls` (model calls, the
response cache, pending answers; `sessions.calls`), `store.blobs` (`sessions.blobs`),
`store.settings` (`sessions.settings`) and `store.judgments` (a person's pairwise preferences
between two versions; `sessions.judgments`). `sessions.connection`: errors, transactions;
`sessions.row_records`: plain rows of bulk reads.

Invariants kept here (design.md): nothing is lost (every write is one transaction, WAL
mode, steps are never updated or deleted), an edit never copies the shared prefix (a step
row points at its parent; a version is a pointer to a leaf), the schema is migrated, never
rebuilt. Records in and out are the pydantic models of `trajectory.records`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

from sessions import schema, search_index
from sessions.blobs import Blobs
from sessions.calls import Calls
from sessions.connection import (
    LOCK_TIMEOUT_S,
    DatabaseFailure,
    StoreError,
    VersionChanged,
    VersionFrozen,
    describe_db_error,
    sqlite_utils,  # (without pandas: a light start-up)
)
from sessions.episode_tree import EpisodeTree
from sessions.episodes import Episodes
from sessions.judgments import Judgments
from sessions.row_records import CallRow, StepRow, UsageRow
from sessions.settings import Settings
from sessions.transactions import Transaction, _Connection, connection_state
from sessions.versions import Versions

__all__ = [
    "LOCK_TIMEOUT_S",
    "CallRow",
    "DatabaseFailure",
    "EpisodeTree",
    "StepRow",
    "Store",
    "StoreError",
    "UsageRow",
    "VersionChanged",
    "VersionFrozen",
    "default_db_path",
    "describe_db_error",
]


def default_db_path() -> str:
    """The project database when none is named: $REACT_EDITOR_DB, else ./react_editor.db.
    The one place this is decided (the CLI and the app both ask here)."""
    return os.environ.get("REACT_EDITOR_DB") or str(Path.cwd() / "react_editor.db")


class Store:
    """One project database. Cheap to open; one Store may serve many threads: each thread
    reads and writes through its own connection (never shared), so a read sees only
    committed rows, never another thread's open transaction. (":memory:" is one connection.)"""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        readonly: bool = False,
        tracer: Callable[[str, Any], None] | None = None,
    ):
        """`readonly`: for reading commands - nothing is created, migrated or written, so a
        database in a read-only folder (or on read-only media) can still be read.
        `tracer`: `fn(sql, params)`, as sqlite-utils' `Database(tracer=...)`, called for
        every statement SQLite runs on every connection this Store opens (any thread's,
        the migration's too; the statements of triggers as `-- TRIGGER name`); SQLite
        gives each statement with its parameters bound into it, so `params` is None."""
        self.file = str(path)
        self._tracer = tracer
        self.episodes = Episodes(self)
        self.calls = Calls(self, self.file)
        self.versions = Versions(self, self.episodes, self.calls)
        self.blobs = Blobs(self)
        self.settings = Settings(self)
        self.judgments = Judgments(self)
        self.row_ids = (*self.episodes.row_ids, self.calls.params)  # the caches its transactions keep
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
        conn = sqlite3.connect(
            target, timeout=timeout, check_same_thread=False, isolation_level=None, uri=uri, factory=_Connection
        )
        if self._tracer is not None:
            tracer = self._tracer
            conn.set_trace_callback(lambda sql: tracer(sql, None))
        return conn

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
            self._conns[threading.get_ident()] = (me, db.conn)  # (me.ident: the same, typed Optional)
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

    def in_transaction(self) -> bool:
        """Is this thread inside a transaction of this Store? Asked without opening a
        connection for a thread that has none (a worker whose writes all go to the Store's
        writer thread needs none: each opening reads the schema, a millisecond)."""
        db = self._shared or getattr(self._local, "db", None)
        return db is not None and db.conn.in_transaction

    # ------------------------------------------------------------------ transactions
    def transaction(self, *, durable: bool = True) -> Transaction:
        """`with store.transaction():` - all-or-nothing, as invariant 1 asks. Serialised
        by a lock, so one Store may serve several threads (Streamlit sessions).
        `durable=False`: no fsync at the commit, for writes a power cut may lose because
        they are re-done or re-derived (claims, leases, progress; see `Transaction`)."""
        return Transaction(self, durable)

    def set_level_per_transaction(self) -> None:
        """This thread's connection runs only transactions (the store's writer, a job's
        heartbeat): each sets the durability level it needs, and a light one does not put the
        connection back at `synchronous = full` (a run of light ones costs no statements)."""
        connection_state(self.db.conn).restore_full_after_light = False

    def _index_noted(self) -> None:
        """Inside this thread's transaction: index the rows it noted for search (`Transaction`)."""
        search_index.flush(self.db)

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

    def integrity_check(self) -> str:
        """SQLite's `pragma integrity_check`: "ok", or its first finding."""
        result: str = self.db.execute("pragma integrity_check").fetchone()[0]
        return result
