"""The store's SQLite plumbing: one-line errors for what SQLite raises (a full disk, a
locked or damaged file), transactions serialised per Store, and the JSON/hex helpers the
store's parts share."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal


def _import_sqlite_utils() -> Any:
    """sqlite-utils without the pandas and numpy it imports when they are installed (only to
    type the columns of DataFrame inserts, which the store never makes): they cost every
    command over a second of start-up. Only an import made here is affected; pandas and
    numpy import as usual afterwards (the app's charts)."""
    if "sqlite_utils" in sys.modules:
        return sys.modules["sqlite_utils"]
    blocked = [name for name in ("pandas", "numpy") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # (an ImportError for this import only)
    try:
        import sqlite_utils
    finally:
        for name in blocked:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return sqlite_utils


if TYPE_CHECKING:
    import sqlite_utils as sqlite_utils  # (re-exported: the parts import it from here)
else:
    sqlite_utils = _import_sqlite_utils()


class StoreError(Exception):
    """A one-line, user-facing problem: unknown id, foreign or newer database, ..."""


class VersionChanged(StoreError):
    """Another writer moved the version's leaf between our read and our write."""


class VersionFrozen(StoreError):
    """The version is frozen (branched from, annotated, in an exemplar set): the store
    refuses to change its path or outcome; its work goes on in a new child version."""


class FenceLost(StoreError):
    """A write's fence no longer holds (a claim taken over): nothing of the write is there."""


class Fence:
    """What a write must still hold (an experiment item's claim): `sql`, a condition with
    `params`, is checked inside the write's own transaction (in the statement that moves a
    version's leaf: no statement of its own; `check` for any other write), and `lost()` is
    the error when it does not hold."""

    __slots__ = ("sql", "params", "lost")

    def __init__(self, sql: str, params: list[Any], lost: "Callable[[], FenceLost]"):
        self.sql, self.params, self.lost = sql, params, lost

    def holds(self, db: Any) -> bool:
        """Does the fence's condition hold now (read inside the caller's transaction)?"""
        return bool(db.execute(f"select {self.sql}", self.params).fetchone()[0])

    def check(self, db: Any) -> None:
        """Inside the write's transaction: raise `lost()` when the fence no longer holds."""
        if not self.holds(db):
            raise self.lost()


# How long a writer waits for another's write lock: shorter than a job's lease
# (sessions.jobs.LEASE_S, 15 s), so a heartbeat that waits and fails is retried before the
# lease runs out, and a runner never loses its claims only for having waited on the lock.
LOCK_TIMEOUT_S = 5.0


class DatabaseFailure(StoreError, sqlite3.DatabaseError):
    """SQLite said no (locked, constraint, disk full, corrupt page): one line, never a traceback.
    `sqlite_errorcode` (SQLite's extended result code) and `sqlite_message` (its own first
    line) are kept, so a caller tells one refusal from another by code, not by wording."""

    sqlite_errorcode: int | None = None  # type: ignore[assignment]  # (None: a refusal of the store, not SQLite)
    sqlite_message: str = ""


# The `versions_frozen` trigger's RAISE(ABORT, ...) message, exactly (sessions.schema writes it
# into the trigger; `is_frozen_refusal` compares it whole, with the trigger's result code)
FROZEN_MARK = "frozen version [react-editor:versions_frozen]"
SQLITE_CONSTRAINT_TRIGGER = 1811  # what SQLite reports for a trigger's RAISE(ABORT, ...)


def is_frozen_refusal(exc: BaseException) -> bool:
    """Did the store's frozen-version trigger refuse the write? Its result code and its
    exact message, never a part of some message's wording."""
    code = getattr(exc, "sqlite_errorcode", None)
    message = getattr(exc, "sqlite_message", None)
    if message is None and isinstance(exc, sqlite3.Error):
        message = (str(exc).splitlines() or [""])[0]
    return code == SQLITE_CONSTRAINT_TRIGGER and message == FROZEN_MARK


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
    failure = DatabaseFailure(f"database error: {msg}" + (f" ({hint})" if hint else ""))
    failure.sqlite_errorcode, failure.sqlite_message = getattr(exc, "sqlite_errorcode", None), msg
    return failure


def _mapped(method: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
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
    """The store's connection: its statements raise StoreError (`_Cursor`), and it carries
    its transactions' state (`state`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = ConnectionState()

    def cursor(self, factory: Any = _Cursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        cur = _Cursor(self)  # (as `cursor()` makes it, one call less: every statement comes here)
        if self.row_factory is not None:
            cur.row_factory = self.row_factory
        return cur.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return self.cursor().executemany(sql, parameters)

    def executescript(self, script: str, /) -> Any:
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


# json.dumps(value, ensure_ascii=False, separators=(",", ":")) without building an encoder per
# call (json.dumps does for non-default arguments): the same text; the store's one encoder of
# plain values (to_json, step rows, experiment rows)
compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def to_json(value: Any) -> str | None:
    """A record or plain value as the compact JSON the store keeps (defaults left out)."""
    if value is None:
        return None
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_defaults=True)
    return compact_json(value)


def _hex_blob(h: str | None) -> bytes | None:
    """sha256 hex digests are kept as raw bytes: half the size on disk."""
    if not h:
        return None
    try:
        return bytes.fromhex(h)
    except ValueError:
        return h.encode()


def from_json(text: str | None, default: Any = None) -> Any:
    """A stored JSON column back (`default` for NULL)."""
    return default if text is None else json.loads(text)


def _ids(text: str | None) -> list[int]:
    """A stored id list ("[3,4]", as `to_json` writes it) without the JSON parser (bulk reads)."""
    if not text:
        return []
    inner = text[1:-1]
    try:
        # most steps hold one call: no split, no list comprehension (export reads every step)
        return [int(inner)] if "," not in inner else [int(x) for x in inner.split(",")]
    except ValueError:
        ids: list[int] = json.loads(text)
        return ids


def _frozen(version: int | str, exc: BaseException) -> BaseException:
    """The store's frozen-version trigger refused a write: say so in one line (any other
    failure is itself). `version`: as people read it (`EP:N`)."""
    if not is_frozen_refusal(exc):
        return exc
    return VersionFrozen(f"version {version} is frozen (branched from, annotated or used as an exemplar): "
                         "it never changes again; continue it in a new version")


def _changed(version: int | str) -> VersionChanged:
    """`version`: as people read it (`EP:N`)."""
    return VersionChanged(f"version {version} changed meanwhile (another writer added steps); reload it and try again")


@dataclass(slots=True)
class ConnectionState:
    """What the store knows of one connection (its transactions, its search index), kept on
    the connection itself (`_Connection.state`; `connection_state(conn)`): typed fields,
    not attributes hung on a `sqlite3.Connection`."""

    synchronous_normal: bool = False
    """The connection is at `synchronous = normal` (a light commit's level: no fsync), not `full`."""
    restore_full_after_light: bool = True
    """After a light transaction, put the connection back at `full` (one statement). False for
    a connection that only runs transactions (the store's writer, a job's heartbeat): each
    of them sets the level it needs, so a run of light ones costs no statements."""
    without_savepoints: bool = False
    """The open outermost transaction was begun with `without_savepoints=True`: the ones
    inside it take no savepoints (any failure is the whole transaction's)."""
    inner_failed_after_writing: bool = False
    """Inside a transaction without savepoints, an inner block failed after it had written:
    only undoing the whole transaction undoes its writes (the store's writer reads it and
    runs its group again, a savepoint per write). Its reader resets it."""
    savepoints: list[Transaction] = field(default_factory=list)
    """The inner transactions open on the connection, innermost last (one that shares its
    enclosing savepoint is listed too)."""
    search_noting: bool | None = None
    """Does the database note rows for the search index (schema 15 on)? None: not asked yet
    (`sessions.search_index`)."""
    search_tails: dict[str, set[int]] = field(default_factory=dict)
    """{table: rowids} the connection's tail indexes of the search hold (the last search's)."""


def connection_state(conn: sqlite3.Connection) -> ConnectionState:
    """The transaction state of a connection the Store opened (every one is a `_Connection`)."""
    if not isinstance(conn, _Connection):
        raise TypeError(f"not a connection of the Store: {type(conn).__name__}")
    return conn.state


class Transaction:
    """Re-entrant transaction of one Store (what `store.transaction()` returns).

    The outermost `with` commits or rolls back; an inner one is a savepoint (an inner block
    that fails, even when its error is caught, leaves none of its writes behind). Caches
    learn the rows a transaction inserted only once it committed (a rollback must not leave
    ids behind that no longer exist). A `durable` commit (the default) is on disk when it
    returns (`synchronous = full`); a light one (claims, leases, progress, results that can
    be derived again) skips that fsync: a crash of the process loses nothing (the log is in
    the OS), a power cut may lose it, and the next durable commit covers it too (the log is
    one file, synced up to its end). The outermost transaction decides for all. After a
    light one the connection is put back at `full`, unless its state says otherwise
    (`ConnectionState.restore_full_after_light`).

    What it adds to sqlite-utils' `Database.atomic()` (BEGIN, then a savepoint per nested
    block), each needed by the store's writer and its many threads:
    - `begin immediate`, not a deferred `begin`: the write lock is taken at the start, and
      waited for (busy timeout), instead of a read lock whose upgrade fails at once with
      "database is locked" when another connection writes meanwhile;
    - a lock per Store, so threads sharing it (Streamlit sessions) take turns;
    - the durability level per outermost transaction (light or durable, above);
    - `without_savepoints` (the writer's group commit: a group of writes in one transaction
      without a savepoint each; a member failing after writing is noted in the connection's
      state so the writer can undo the whole and run it again with savepoints);
    - no savepoint for an inner block begun with nothing written since its enclosing one
      (undoing to that one undoes it: a statement less per nested write);
    - the caches of inserted row ids and blobs, kept, undone to a savepoint's mark or
      dropped with the transaction, and the search index written before a durable commit.
    Its savepoints are named `tx_<hex>`, apart from sqlite-utils' own.
    """

    outer: bool  # (set on entering: no transaction was open)
    inside_no_savepoints: bool  # part of an enclosing transaction without savepoints
    shares_enclosing: bool  # a nested one that needed no savepoint of its own
    savepoint: str
    changes_at_start: int  # the connection's total_changes when it began (or its savepoint did)
    kept_blobs: set[str]
    kept_rows: list[dict[Any, int]]

    def __init__(self, store: Any, durable: bool = True, without_savepoints: bool = False, index: bool = True):
        """`without_savepoints` (outermost only): the transactions inside it take no
        savepoints, for a block that never catches their errors (any failure undoes the
        whole). An inner one that fails after writing sets the connection's
        `inner_failed_after_writing`: a block that caught its error anyway (the store's
        writer runs others' writes so) knows to undo the whole.
        `index` (outermost only): a durable transaction that changed rows indexes the rows
        noted for the search index before it commits (`Store._index_noted`; a light one, a
        claim or a heartbeat, leaves them to the next durable one: search finds them
        meanwhile); the store's writer says False and indexes its groups' rows itself."""
        self.store, self.conn, self.lock, self.durable = store, store.db.conn, store._lock, durable
        self.without_savepoints, self.index = without_savepoints, index
        self.state = connection_state(self.conn)

    def __enter__(self) -> Transaction:
        if not self.lock.acquire(timeout=LOCK_TIMEOUT_S):  # another thread's transaction, as long as SQLite waits
            raise DatabaseFailure("database error: database is locked (another thread of this program is writing; "
                                  "try again)")
        state = self.state
        self.outer = not self.conn.in_transaction
        self.inside_no_savepoints = not self.outer and state.without_savepoints
        if self.inside_no_savepoints:  # part of a transaction without savepoints: its failure is the whole one's
            self.changes_at_start = self.conn.total_changes
            return self
        if not self.outer:  # nested: a savepoint, so a failed inner block leaves none of its writes behind
            self.kept_blobs = set(self.store.blobs.new)
            self.kept_rows = [r.mark() for r in self.store.row_ids]
            enclosing = state.savepoints[-1] if state.savepoints else None
            self.shares_enclosing = enclosing is not None and enclosing.changes_at_start == self.conn.total_changes
            if self.shares_enclosing:  # nothing written since the enclosing savepoint: undoing to it undoes this block
                self.savepoint = enclosing.savepoint  # type: ignore[union-attr]
            else:
                self.savepoint = f"tx_{id(self):x}"
                try:
                    self.conn.execute(f"savepoint {self.savepoint}")
                except BaseException:
                    self.lock.release()
                    raise
            self.changes_at_start = self.conn.total_changes
            state.savepoints.append(self)
            return self
        conn = self.conn
        try:
            light = state.synchronous_normal
            if not self.durable and not light:  # (sqlite takes the level only outside a transaction)
                conn.execute("pragma synchronous = normal")
                state.synchronous_normal = True
            elif self.durable and light:  # a writer's connection left light
                conn.execute("pragma synchronous = full")
                state.synchronous_normal = False
            conn.execute("begin immediate")
        except BaseException:
            self._restore_full()
            self.lock.release()
            raise
        state.without_savepoints = self.without_savepoints
        self.changes_at_start = conn.total_changes
        try:
            self.store.blobs.take_deferred()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> Literal[False]:
        state = self.state
        try:
            if self.inside_no_savepoints:  # failed after writing: only undoing the whole undoes it (the writer's cue)
                if exc_type is not None and self.conn.total_changes != self.changes_at_start:
                    state.inner_failed_after_writing = True
                return False
            if not self.outer:
                if state.savepoints and state.savepoints[-1] is self:
                    state.savepoints.pop()
                self._end_savepoint(exc_type is None)
                return False
            conn, store = self.conn, self.store
            state.savepoints.clear()
            state.without_savepoints = False
            blobs = store.blobs.new
            if blobs:
                store.blobs.new = {}
            if exc_type is None:
                try:
                    if self.index and self.durable and conn.total_changes != self.changes_at_start:
                        store._index_noted()
                    conn.execute("commit")
                except BaseException:
                    self._rolled_back(blobs)
                    raise
                for rows in store.row_ids:  # (what the transaction learned, now committed)
                    if rows.new:
                        rows.committed()
                if blobs:
                    store.blobs.remember(blobs)
                if state.synchronous_normal:
                    self._restore_full()
            else:
                self._rolled_back(blobs)
        finally:
            self.lock.release()
        return False

    def _rolled_back(self, blobs: dict[str, bytes]) -> None:
        """The outer transaction is undone: no cache may name its rows; its blobs wait for the next."""
        if self.conn.in_transaction:
            self.conn.execute("rollback")
        self._restore_full()
        self.store.blobs.requeue(blobs)
        for rows in self.store.row_ids:
            rows.rolled_back()

    def _end_savepoint(self, ok: bool) -> None:
        """An inner block's end: kept (released into the outer transaction) or undone; the
        outer transaction goes on either way and decides the commit."""
        if not self.conn.in_transaction:  # sqlite already rolled the whole transaction back
            return
        if ok:
            if not self.shares_enclosing:
                self.conn.execute(f"release {self.savepoint}")
            return
        self.conn.execute(f"rollback to {self.savepoint}")
        if not self.shares_enclosing:  # (a shared one stays open: the enclosing block goes on in it)
            self.conn.execute(f"release {self.savepoint}")
        else:
            self.state.savepoints[-1].changes_at_start = self.conn.total_changes
        blob_keys = self.kept_blobs
        for rows, mark in zip(self.store.row_ids, self.kept_rows):  # the rows it inserted are gone: no cache
            rows.undo_to(mark)  # may name them
        undone = {k: v for k, v in self.store.blobs.new.items() if k not in blob_keys}
        self.store.blobs.new = {k: v for k, v in self.store.blobs.new.items() if k in blob_keys}
        self.store.blobs.requeue(undone)  # (an environment may refer to them, as after a rollback)

    def _restore_full(self) -> None:
        """Put a connection left light back at `synchronous = full`, outside a transaction,
        unless it sets its level per transaction (the store's writer, a heartbeat)."""
        state = self.state
        if self.conn.in_transaction or not state.synchronous_normal or not state.restore_full_after_light:
            return
        self.conn.execute("pragma synchronous = full")
        state.synchronous_normal = False
