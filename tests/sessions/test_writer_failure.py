"""Issue 39 item 8: a writer thread that fails (EIO from the log's fsync, a connection that
cannot be opened) answers every write it had queued with one line, and every later write
too, instead of leaving the workers waiting forever; `on_writer` is not fooled by a thread
that got the dead writer thread's reused ident. Faults come in through the Writer's own
`fsync` parameter and a real unopenable database path, never a patch of `os`."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from sessions.store import Store
from sessions.write_handoff import WriterFailed
from sessions.writer import Writer, attached, write


def _eio(fd: int) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def _from_threads(w: Writer, store: Store, n: int) -> tuple[list[threading.Thread], dict[int, BaseException]]:
    """`n` threads (none of them the last writer: their writes queue for the writer's thread)."""
    errors: dict[int, BaseException] = {}

    def one(k: int) -> None:
        try:
            w.submit(lambda: store.settings.set(f"t{k}", k)).answer()  # type: ignore[union-attr]
        except BaseException as exc:
            errors[k] = exc

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    return threads, errors


def _one_line_failures(threads, errors, n: int, cause: str) -> None:
    for t in threads:
        t.join(30)  # (a hang guard: on the old writer these never return)
    assert not any(t.is_alive() for t in threads), "a worker still waits on a dead writer"
    assert sorted(errors) == list(range(n))
    for exc in errors.values():
        assert isinstance(exc, WriterFailed) and "\n" not in str(exc) and cause in str(exc), str(exc)


def test_writes_queued_when_the_log_fsync_fails_get_the_error_and_so_do_later_ones(tmp_path):
    store = Store(tmp_path / "w.db")
    syncing, go_on = threading.Event(), threading.Event()

    def failing_disk(fd: int) -> None:  # the writer's idle sync of the log: EIO, once the workers queued
        syncing.set()
        go_on.wait(30)
        _eio(fd)

    w = Writer(store, durable_s=1.0, fsync=failing_disk)
    try:
        for n in range(50):  # until a write asked durable commits light (within the window of the last durable point)
            before = w.durable_commits
            w.submit(lambda: store.settings.set("main", n)).answer()  # type: ignore[union-attr]
            if w.durable_commits == before:
                break
        assert syncing.wait(30)  # the idle writer syncs the log by itself once the window passed
        threads, errors = _from_threads(w, store, 3)
        while w._queue.qsize() < 3:  # queued behind the sync
            threading.Event().wait(0.01)
        go_on.set()
        _one_line_failures(threads, errors, 3, os.strerror(errno.EIO))
        assert all(store.settings.get(f"t{k}") is None for k in range(3))  # nothing reported was lost
        later = _from_threads(w, store, 2)  # handed in after the failure: the error at once
        _one_line_failures(*later, 2, os.strerror(errno.EIO))
        heard: list[BaseException] = []
        assert w.submit_unawaited(lambda: store.settings.set("late", 1), on_error=heard.append)
        assert len(heard) == 1 and isinstance(heard[0], WriterFailed)
    finally:
        go_on.set()
        w.close()
        store.close()


def test_a_writer_that_cannot_open_its_connection_fails_every_write(tmp_path):
    path = tmp_path / "w.db"
    store = Store(path)
    store.settings.set("before", 1)  # (this thread's connection stays open on the file)
    os.rename(path, tmp_path / "moved.db")
    os.mkdir(path)  # the writer thread's new connection opens a folder: SQLite cannot
    w = Writer(store)
    try:
        w._thread.join(30)
        assert not w._thread.is_alive()
        threads, errors = _from_threads(w, store, 3)
        _one_line_failures(threads, errors, 3, "unable to open")
    finally:
        w.close()
        store.close()


def test_the_end_of_attached_says_a_failure_nobody_heard(tmp_path):
    """The run's last sync fails as the writer closes: `attached` raises it (one line)."""
    store = Store(tmp_path / "w.db")
    try:
        with pytest.raises(WriterFailed, match="Input/output error"):
            with attached(store) as w:
                w._fsync = _eio  # (the Writer `attached` made: its fsync parameter, set after the fact)
                w.durable_s = 3600.0  # every write light: the close syncs the log
                write(store, lambda: store.settings.set("y", 1))
    finally:
        store.close()


def test_on_writer_is_not_fooled_by_a_reused_thread_ident(tmp_path):
    store = Store(tmp_path / "w.db")
    w = Writer(store)
    w.close()
    dead = w._thread.ident
    seen: list[tuple[bool, bool]] = []
    for _ in range(200):  # a new thread soon gets the ended thread's ident (its stack is reused)
        t = threading.Thread(target=lambda: seen.append((threading.get_ident() == dead, w.on_writer)))
        t.start()
        t.join()
        if seen[-1][0]:
            break
    store.close()
    if not seen[-1][0]:
        pytest.skip("no thread got the ended writer's ident here")
    assert seen[-1] == (True, False)
