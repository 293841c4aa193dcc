"""The store's connection class and its transactions: `_Connection` (its statements raise
StoreError; it carries a `ConnectionState`, the typed record of what the store knows of it) and
`Transaction`, what `store.transaction()` returns (re-entrant: savepoints inside, durability
levels, the group commit's transactions without savepoints, the caches kept in step)."""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from sessions.connection import LOCK_TIMEOUT_S, DatabaseFailure, _Cursor


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
    """The state of a connection the Store opened (every one is a `_Connection`). Raises
    TypeError for any other connection."""
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
            raise DatabaseFailure(
                "database error: database is locked (another thread of this program is writing; try again)"
            )
        self.outer = not self.conn.in_transaction
        self.inside_no_savepoints = not self.outer and self.state.without_savepoints
        if self.inside_no_savepoints:  # part of a transaction without savepoints: its failure is the whole one's
            self.changes_at_start = self.conn.total_changes
        elif not self.outer:  # nested: a savepoint, so a failed inner block leaves none of its writes behind
            self._open_savepoint()
        else:
            self._begin()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> Literal[False]:
        try:
            if self.inside_no_savepoints:  # failed after writing: only undoing the whole undoes it (the writer's cue)
                if exc_type is not None and self.conn.total_changes != self.changes_at_start:
                    self.state.inner_failed_after_writing = True
            elif not self.outer:
                savepoints = self.state.savepoints
                if savepoints and savepoints[-1] is self:
                    savepoints.pop()
                self._end_savepoint(exc_type is None)
            else:
                self._end(exc_type is None)
        finally:
            self.lock.release()
        return False

    def _open_savepoint(self) -> None:
        """Nested: note what the caches hold, then a savepoint (or the enclosing one's, when
        nothing was written since it). The lock is released if the savepoint fails."""
        state = self.state
        self.kept_blobs = set(self.store.blobs.new)
        self.kept_rows = [r.mark() for r in self.store.row_ids]
        enclosing = state.savepoints[-1] if state.savepoints else None
        self.shares_enclosing = enclosing is not None and enclosing.changes_at_start == self.conn.total_changes
        if enclosing is not None and self.shares_enclosing:  # nothing written since it: undoing to it undoes this
            self.savepoint = enclosing.savepoint
        else:
            self.savepoint = f"tx_{id(self):x}"
            try:
                self.conn.execute(f"savepoint {self.savepoint}")
            except BaseException:
                self.lock.release()
                raise
        self.changes_at_start = self.conn.total_changes
        state.savepoints.append(self)

    def _begin(self) -> None:
        """Outermost: the durability level, `begin immediate`, then the blobs deferred to this
        transaction written in it. The lock is released (and the transaction undone) if any
        of it fails."""
        conn, state = self.conn, self.state
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

    def _end(self, ok: bool) -> None:
        """Outermost: commit (the search index written first when it is due) and let the
        caches keep what it learned, or roll back and let them forget it."""
        conn, store, state = self.conn, self.store, self.state
        state.savepoints.clear()
        state.without_savepoints = False
        blobs = store.blobs.new
        if blobs:
            store.blobs.new = {}
        if not ok:
            self._rolled_back(blobs)
            return
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
