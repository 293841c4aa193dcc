"""One writer per database, with group commit: the runner's workers hand their writes
(a step with its model calls, an item's start and result) to one thread, which runs what
is queued inside one transaction and commits it once.

Each write is a closure over the Store's own API; the writer runs it on its thread (so
`store.db` is the writer's connection) and answers the caller once the group it was in
committed: the caller reports its step only then. There is no timer for grouping:
a write that finds the writer idle (nothing queued, no group running) and comes from the
thread that handed in the previous write (a lone worker) commits at once in the calling
thread, a group of one with no handoff to the writer thread and back (a worker at
concurrency 1 pays no thread switch); writes of several workers go to the writer's thread
(its connection's page cache stays valid across its own commits; a worker's would be read
again after each other connection's commit), and the writes queued while a group
committed form the next group. Groups never overlap, so
two writers on one version never interleave.

A group runs flat (no savepoint per write). A write that fails before writing anything
is its caller's error alone and the group goes on; one whose writes can only be undone
with the whole (it failed after writing, or caught the failure of a block that had
written) makes the writer undo the group and run it again with a savepoint per write,
so a failing write still undoes only its own part. A write may so run twice, its first
run undone, as a retried transaction: it must change nothing but the database. A commit
that fails is every member's error.

Durability (the power-loss window): the writer commits light (WAL with synchronous =
normal: no fsync). A light commit survives a crash of the process (kill -9: the log is
in the OS), so nothing reported is lost to it; only a power cut (or an OS crash) can lose
it. A group is committed durable (synchronous = full: one fsync of the log, which covers
every commit before it) when it holds a write asked durable (`durable=True`, a step) and
the last durable point is DURABLE_S or more ago, and when the writer closes (the end of
a run or batch). An idle writer with writes asked durable committed light since the last
durable point syncs the log itself DURABLE_S after that point. So a write asked durable
is on disk at most DURABLE_S (plus one commit) after its caller heard back: a power cut
loses at most the steps reported in the last DURABLE_S. Writes asked light (claims,
results that a resume derives again) get no deadline of their own; any later durable
point covers them.

The search index (`sessions.search_index`): the rows a group inserts are only noted; a
group writes the index for what was noted once INDEX_WRITES writes ran since the last
time, so FTS5 writes one segment for many steps instead of one per commit.

Writes nobody waits for (`wait=False`: an item's result, which a resume derives again)
are kept until the next group, whoever runs it, and go first in it: at concurrency 1 an
item's result commits with the next item's start instead of on its own. The writer's
thread commits them itself once they waited DURABLE_S with no group to join (or at its
close). Their failure goes to their `on_error` (a ClaimLost said in one line); a kill
loses them as it loses any light commit's power-cut window: nothing a step reported.

Without a writer attached to the Store (the app's single steps, tests, scripts), `write`
runs the closure in the calling thread, as before (its transactions durable as asked).

A writer thread that fails (its connection cannot be opened, the log's fsync says EIO)
stops the writer for good: every write queued or handed in later gets its one-line error
(`WriterFailed`) at once, writes nobody waits for hear of it through their `on_error`,
and the end of `attached` raises it when nothing else was raised. A waiting caller also
checks, every WATCH_S, that the writer thread still lives, so no caller waits forever.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import weakref
from typing import Any, Callable, Iterator

from sessions import search_index
from sessions.store import Store
from sessions.transactions import Transaction, connection_state
from sessions.write_handoff import WriterFailed, _Redo, _tell_on_error, _Write

LOG_SYNCS = [0]  # the log synced without a commit (`Writer._sync`), all writers of the process: for the benchmark
MAX_GROUP = 64  # writes per group at most (one transaction's size stays bounded)
DURABLE_S = 0.2  # the power-loss window: a write asked durable is on disk at most this long after it was answered
INDEX_WRITES = 64  # a group writes the search index for the rows noted since, once this many writes ran


class Writer:
    """The writer of one Store: its thread, and the callers that find it idle. Counted, for
    the benchmark and tests: `groups`, `writes`, `durable_commits` (groups committed with an
    fsync) and `syncs` (the log synced by an idle or closing writer)."""

    def __init__(self, store: Store, durable_s: float | None = None, fsync: Callable[[int], None] = os.fsync):
        """`fsync`: how the log is synced (`os.fsync`; a test hands one that fails as a
        failing disk does)."""
        self.store, self.durable_s = store, DURABLE_S if durable_s is None else durable_s
        self._fsync = fsync
        self.failure: WriterFailed | None = None  # why the writer thread stopped, once it failed
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self.groups = self.writes = self.durable_commits = self.syncs = 0
        self._unindexed = 0  # writes run since a group last wrote the search index
        self._synced_at = time.monotonic()  # the last durable point (before: the callers' own durable commits)
        self._unsynced = False  # writes asked durable committed light since then
        self._mutex = threading.RLock()  # guards _busy, _closed and the counts (`with` it: no Python frame)
        self._state = threading.Condition(self._mutex)  # (its waits and notifies)
        self._busy, self._closed = 0, False  # groups running (here or in a caller's thread)
        self._unawaited: list[_Write] = []  # writes nobody waits for: the next group's first members
        self._unawaited_since = 0.0  # when the oldest of them came
        self._last: int | None = None  # the thread that handed in the last write
        self._wakes_at = 0.0  # when the waiting writer thread wakes by itself (inf: only when told; 0: not waiting)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="store-writer")
        self._thread.start()

    @property
    def on_writer(self) -> bool:
        """Is the calling thread the writer's? (The thread object, not its ident: Python
        reuses the ident of a thread that ended for the next one started.)"""
        return threading.current_thread() is self._thread

    def submit(
        self, fn: Callable[[], Any], *, durable: bool = True, blobs: dict[str, bytes] | None = None
    ) -> _Write | None:
        """The write (`answer()`: its result once its group committed); None when the writer
        has closed (the caller writes itself). A write that finds the writer idle (nothing
        queued, no group running) and comes from the thread that handed in the last one too
        (a lone worker) commits at once in the calling thread, with the writes nobody waits
        for, and no handoff to the writer thread and back; else it queues for the next group
        (several workers: the writer's thread commits for all, on its one connection, whose
        pages its own commits leave cached; a worker's connection would read them again)."""
        w = _Write(fn, durable, blobs or {}, writer=self)
        with self._mutex:
            if self.failure is not None:  # the writer failed: its error, at once
                w.outcome = (False, self.failure)
                return w
            if self._closed:
                return None
            me = threading.get_ident()
            here = not self._busy and self._queue.empty() and self._last in (None, me)
            self._last = me
            if here:
                self._busy += 1
                group, self._unawaited = self._unawaited + [w], []
            else:
                w.done = threading.Lock()
                w.done.acquire()  # (released once its group ran)
                self._queue.put(w)
                self._state.notify()
        if here:
            state = connection_state(self.store.db.conn)
            if state.restore_full_after_light:
                state.restore_full_after_light = False  # (this thread's transactions each set the level they need)
            pending = False
            try:
                pending = self._run(group)
            finally:
                with self._mutex:
                    self._busy -= 1
                    if (
                        pending
                        or not self._queue.empty()
                        or self._unawaited
                        or (self._unsynced and not self._deadline())
                    ):
                        self._state.notify()  # the writer thread has work (writes, a deadline to keep)
        return w

    def submit_unawaited(
        self, fn: Callable[[], Any], *, on_error: Callable[[BaseException], Any] | None = None
    ) -> bool:
        """A light write nobody waits for: it goes first in the next group (whoever runs
        it), or the writer's thread commits it once it waited DURABLE_S. False when the
        writer has closed (the caller writes itself)."""
        with self._mutex:
            failed = self.failure
            if failed is None and self._closed:
                return False
            if failed is None and not self._unawaited:
                self._unawaited_since = time.monotonic()
                if self._wakes_at > self._unawaited_since + self.durable_s:
                    self._state.notify()  # (else it wakes by then anyway: a lone worker's item results wake nobody)
            if failed is None:
                self._unawaited.append(_Write(fn, False, {}, on_error))
                return True
        _tell_on_error(_Write(fn, False, {}, on_error), failed)  # (the writer failed: it hears of it at once)
        return True

    def close(self) -> None:
        """Run what is queued, make it durable, then end the thread (its connection is
        the Store's to close)."""
        with self._mutex:
            self._closed = True
            self._queue.put(None)
            self._state.notify()
        self._thread.join()

    # -- the writer thread
    def _loop(self) -> None:
        group: list[_Write] = []
        try:
            self.store.set_level_per_transaction()  # only transactions write here: each sets the level it needs
            while True:
                group, end = self._take()
                if group:
                    try:
                        self._run(group, last=end)
                    finally:
                        with self._mutex:
                            self._busy -= 1
                elif not end:  # idle past the durable deadline: the log synced without a commit
                    self._sync()
                if end:
                    break
            group = []
            if self._unsynced:
                self._sync()
        except BaseException as exc:  # the writer cannot go on: every waiter hears why, now
            self._failed(exc, [w for w in group if w.outcome is None])

    def _failed(self, exc: BaseException, unanswered: list[_Write]) -> None:
        """The writer thread failed: it takes no more writes, and every write it had not
        answered (queued, or nobody waits for) gets the one-line WriterFailed."""
        first = (str(exc).splitlines() or [""])[0] or type(exc).__name__
        err = WriterFailed(f"the store's writer stopped ({first}); what it had not committed was not written")
        with self._mutex:
            self.failure, self._closed = err, True
            unawaited, self._unawaited = self._unawaited, []
            while True:
                try:
                    w = self._queue.get_nowait()
                except queue.Empty:
                    break
                if w is not None:
                    unanswered.append(w)
        for w in unanswered + unawaited:
            w.outcome = (False, err)
            if w.done is not None:
                w.done.release()
            elif w.on_error is not None:
                _tell_on_error(w, err)

    def _index_due(self, n: int) -> None:
        """Inside a group's transaction, after its writes: index the noted rows once
        INDEX_WRITES writes ran since the last time (so FTS5 writes a segment for many
        steps, not one per group; counted, not timed, so a run's statements do not depend
        on its speed). What the last groups noted waits for the next durable transaction
        (`Transaction`: the run's own end, or any later one); search finds it meanwhile
        (`search_index.matches`), and there are at most INDEX_WRITES writes of it."""
        self._unindexed += n
        if self._unindexed >= INDEX_WRITES:
            self._unindexed = 0
            search_index.flush(self.store.db)

    def _take(self) -> tuple[list[_Write], bool]:
        """Wait until writes are queued (or writes nobody waits for waited long enough) and
        no group runs (a caller's own), or the durable deadline passed with nothing running;
        then (the writes, closed?), the writer marked busy when there are writes, or
        ([], False) for the deadline."""
        with self._mutex:
            while True:
                if not self._busy:
                    unawaited_due = self._unawaited_due_in() if self._unawaited else None
                    if not self._queue.empty() or unawaited_due == 0:
                        break
                    durable = self._deadline() if self._unsynced else None
                    if durable == 0:
                        return [], False
                    waits = [x for x in (unawaited_due, durable) if x is not None]
                    self._wait(min(waits) if waits else None)
                else:
                    self._wait(None)
            group, self._unawaited = self._unawaited, []
            end = False
            while len(group) < MAX_GROUP:  # whatever queued meanwhile joins this group
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    end = True
                    break
                group.append(nxt)
            self._busy += bool(group)
            return group, end

    def _wait(self, timeout: float | None) -> None:
        """Wait to be told (or `timeout` s), noting when it wakes by itself: `submit_unawaited` tells it
        only when that is after the new write's own deadline."""
        self._wakes_at = float("inf") if timeout is None else time.monotonic() + timeout
        try:
            self._state.wait(timeout)
        finally:
            self._wakes_at = 0.0

    def _unawaited_due_in(self) -> float:
        return max(0.0, self._unawaited_since + self.durable_s - time.monotonic())

    def _deadline(self) -> float:
        return max(0.0, self._synced_at + self.durable_s - time.monotonic())

    def _sync(self) -> None:
        """Make every commit so far survive a power cut without a commit of its own: fsync
        the write-ahead log (`<database>-wal`, as SQLite names it), which is what a commit
        at synchronous = full does. No log: it was checkpointed into the database file and
        removed, and the checkpoint synced that file."""
        self._synced_at, self._unsynced = time.monotonic(), False
        try:
            fd = os.open(self.store.file + "-wal", os.O_RDONLY)
        except OSError:
            return
        try:
            self._fsync(fd)
            self.syncs += 1
            LOG_SYNCS[0] += 1
        finally:
            os.close(fd)

    def _run(self, group: list[_Write], last: bool = False) -> bool:
        """One group, one transaction: durable when it asks for durability (or something
        before it did) and the last durable point is old enough, or it is the writer's last.
        True when it left a durable deadline pending that was not before."""
        asked = self._unsynced or any(w.durable for w in group)
        durable = asked and (last or time.monotonic() - self._synced_at >= self.durable_s)
        pending = False
        try:
            with self.store.blobs.deferred():  # (a rolled-back first run's pages wait here for the second)
                results = self._run_without_savepoints(group, durable)
                if results is None:
                    results = self._run_with_savepoints(group, durable)
            committed = True
        except BaseException as exc:  # the commit failed: no member's write is there
            results, committed = [(False, exc)] * len(group), False
        with self._mutex:
            if committed and durable:
                self._synced_at, self._unsynced = time.monotonic(), False
                self.durable_commits += 1
            elif committed and asked:
                pending, self._unsynced = not self._unsynced, True
            self.groups += 1
            self.writes += len(group)
        for w, outcome in zip(group, results):
            w.outcome = outcome
            if w.done is not None:
                w.done.release()
            elif w.on_error is not None and not outcome[0]:
                _tell_on_error(w, outcome[1])
        return pending

    def _run_without_savepoints(self, group: list[_Write], durable: bool) -> list[tuple[bool, Any]] | None:
        """The group without savepoints; None (all undone) when a member's failure needs
        its own undo."""
        results: list[tuple[bool, Any]] = []
        try:
            with Transaction(self.store, durable, without_savepoints=True, index=False):
                for w in group:
                    r = self._run_member_without_savepoint(w)
                    if r is None:
                        raise _Redo
                    results.append(r)
                self._index_due(len(group))
        except _Redo:
            return None
        return results

    def _run_member_without_savepoint(self, w: _Write) -> tuple[bool, Any] | None:
        conn = self.store.db.conn
        state = connection_state(conn)
        before, state.inner_failed_after_writing = conn.total_changes, False
        try:
            if w.blobs:
                self.store.blobs.write(w.blobs)
            value = w.fn()
        except BaseException as exc:  # nothing written: its error alone, the group goes on
            clean = conn.total_changes == before and not state.inner_failed_after_writing and conn.in_transaction
            return (False, exc) if clean else None
        return None if state.inner_failed_after_writing else (True, value)

    def _run_with_savepoints(self, group: list[_Write], durable: bool) -> list[tuple[bool, Any]]:
        """The group again, each member in a savepoint of its own."""
        with Transaction(self.store, durable, index=False):
            results = [self._run_member_in_savepoint(w) for w in group]
            self._index_due(len(group))
            return results

    def _run_member_in_savepoint(self, w: _Write) -> tuple[bool, Any]:
        try:
            with self.store.transaction(durable=w.durable):  # a savepoint
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
    already attached. At the end it commits what is queued and stops.
    Raises WriterFailed at the end when the writer thread failed (and the block raised nothing)."""
    with _guard:
        known = _writers.get(store)
        if known is None:
            known = _writers[store] = Writer(store)
            mine = True
        else:
            mine = False
    ok = False
    try:
        yield known
        ok = True
    finally:
        if mine:
            with _guard:
                _writers.pop(store, None)
            known.close()
            if ok and known.failure is not None:  # (the block's own error, when it raised one, is said instead)
                raise known.failure


def writer_of(store: Store) -> Writer | None:
    """The writer attached to `store` (`attached`), or None."""
    return _writers.get(store)


def write(store: Store, fn: Callable[[], Any], *, durable: bool = True) -> Any:
    """Run `fn` (writes through `store`, each in `store.transaction()`) and return its
    result once it is committed: on the Store's writer when one is attached (in a group,
    one commit for many), else here. The calling thread's deferred blobs (pages its
    environment fetched) go with it. Called inside a transaction of this thread, `fn`
    runs here, as part of it (that transaction commits it)."""
    w = _writers.get(store)
    if w is None or w.on_writer or store.in_transaction():  # (inside the caller's transaction: part of it)
        return fn()
    blobs = store.blobs.take_pending()
    done = w.submit(fn, durable=durable, blobs=blobs)
    if done is None:  # the writer has just closed: as without one
        store.blobs.add_pending(blobs)
        return fn()
    try:
        return done.answer()
    except BaseException:
        store.blobs.add_pending(blobs)  # rolled back: they wait for the next write
        raise


def write_later(store: Store, fn: Callable[[], Any], *, on_error: Callable[[BaseException], Any]) -> None:
    """A light write whose caller does not wait for its commit (an item's result, which a
    resume derives again from the item's committed steps): with a writer attached, it goes
    first in the next group, whoever runs it (at concurrency 1: the next item's start), or
    the writer commits it once it waited DURABLE_S, or at its close; `on_error` hears of
    its failure. Without one (or inside the caller's transaction) it runs here and now, and
    its error is raised."""
    w = _writers.get(store)
    if w is None or w.on_writer or store.in_transaction() or not w.submit_unawaited(fn, on_error=on_error):
        fn()
