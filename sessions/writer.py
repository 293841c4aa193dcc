"""One writer per database, with group commit: the runner's workers hand their writes
(a step with its model calls, an item's start and result) to one thread, which runs what
is queued inside one transaction and commits it once: one fsync for the whole group.

Each write is a closure over the Store's own API; the writer runs it on its thread (so
`store.db` is the writer's connection) and resolves the caller's Future once the group it
was in committed: the caller reports its step only then, so nothing reported is lost to a
kill -9. A closure that fails rolls back its own savepoint only (its error is its caller's);
a commit that fails is every member's error. There is no timer: a write that finds the
writer idle commits at once (concurrency 1 pays what it paid before); under load the
writes queued while the previous group committed form the next group.

Without a writer attached to the Store (the app's single steps, tests, scripts), `write`
runs the closure in the calling thread, as before.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from sessions.store import Store

MAX_GROUP = 64  # writes per group at most (one transaction's size stays bounded)


@dataclass
class _Write:
    fn: Callable[[], Any]
    durable: bool
    blobs: dict[str, bytes] = field(default_factory=dict)  # the caller's deferred pages (they commit with it)
    future: Future = field(default_factory=Future)


class Writer:
    """The writer thread of one Store. `groups`, `writes`: counted, for the benchmark."""

    def __init__(self, store: Store):
        self.store = store
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self.groups = self.writes = 0
        self._closing, self._closed = threading.Lock(), False
        self._thread = threading.Thread(target=self._loop, daemon=True, name="store-writer")
        self._thread.start()

    @property
    def on_writer(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, fn: Callable[[], Any], *, durable: bool = True,
               blobs: dict[str, bytes] | None = None) -> Future | None:
        """The write's Future; None when the writer has closed (the caller writes itself)."""
        w = _Write(fn, durable, dict(blobs or {}))
        with self._closing:
            if self._closed:
                return None
            self._queue.put(w)
        return w.future

    def close(self) -> None:
        """Run what is queued, then end the thread (its connection is the Store's to close)."""
        with self._closing:
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    # -- the writer thread
    def _loop(self) -> None:
        self.store.db.conn.keeps_level = True  # only transactions write here: each sets the level it needs
        while True:
            first = self._queue.get()
            if first is None:
                return
            group, end = [first], False
            while len(group) < MAX_GROUP:  # whatever queued meanwhile joins this group
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    end = True
                    break
                group.append(nxt)
            self._run(group)
            if end:
                return

    def _run(self, group: list[_Write]) -> None:
        """One group: one transaction (durable when any member asks for it), each member in
        a savepoint of its own; a lone write is its own transaction (no savepoint needed)."""
        self.groups += 1
        self.writes += len(group)
        results: list[tuple[bool, Any]] = []
        try:
            if len(group) == 1:
                results.append(self._member(group[0]))
            else:
                with self.store.transaction(durable=any(w.durable for w in group)):
                    results.extend(self._member(w) for w in group)
        except BaseException as exc:  # the commit failed: no member's write is there
            results = [(False, exc)] * len(group)
        for w, (ok, value) in zip(group, results):
            if ok:
                w.future.set_result(value)
            else:
                w.future.set_exception(value)

    def _member(self, w: _Write) -> tuple[bool, Any]:
        try:
            if not self.store.db.conn.in_transaction:  # alone: its own transactions, the pages in the first
                with self.store.blobs.deferred():
                    self.store.blobs.add_pending(w.blobs)
                    return True, w.fn()
            with self.store.transaction(durable=w.durable):  # in a group: a savepoint
                if w.blobs:
                    self.store.blobs.write(w.blobs)
                return True, w.fn()
        except BaseException as exc:  # its writes are undone; the group goes on
            return False, exc


_writers: "weakref.WeakKeyDictionary[Store, Writer]" = weakref.WeakKeyDictionary()
_guard = threading.Lock()


@contextlib.contextmanager
def attached(store: Store) -> Iterator[Writer]:
    """A writer for `store` while the block runs (the runner's batch); nested: the one
    already attached. At the end it commits what is queued and stops."""
    with _guard:
        known = _writers.get(store)
        if known is None:
            known = _writers[store] = Writer(store)
            mine = True
        else:
            mine = False
    try:
        yield known
    finally:
        if mine:
            with _guard:
                _writers.pop(store, None)
            known.close()


def writer_of(store: Store) -> Writer | None:
    return _writers.get(store)


def write(store: Store, fn: Callable[[], Any], *, durable: bool = True) -> Any:
    """Run `fn` (writes through `store`, each in `store.transaction()`) and return its
    result once it is committed: on the Store's writer when one is attached (in a group,
    one commit for many), else here. The calling thread's deferred blobs (pages its
    environment fetched) go with it. Called inside a transaction of this thread, `fn`
    runs here, as part of it (that transaction commits it)."""
    w = _writers.get(store)
    if w is None or w.on_writer or store.db.conn.in_transaction:  # (inside the caller's transaction: part of it)
        return fn()
    blobs = store.blobs.take_pending()
    fut = w.submit(fn, durable=durable, blobs=blobs)
    if fut is None:  # the writer has just closed: as without one
        store.blobs.add_pending(blobs)
        return fn()
    try:
        return fut.result()
    except BaseException:
        store.blobs.add_pending(blobs)  # rolled back: they wait for the next write
        raise

