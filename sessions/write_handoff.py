"""A write handed to the store's writer (`sessions.writer`): `_Write`, the closure with its answer
once its group ran; `WriterFailed`, the one-line error of a writer thread that stopped; `_Redo`, a group
member's failure only undoing the whole group undoes; `_tell_on_error`, how a write nobody waits for hears
of its failure."""

from __future__ import annotations

import sys
from typing import Any, Callable

from sessions.store import StoreError

WATCH_S = 1.0  # a caller waiting for its group checks this often that the writer thread lives (no added syscall)


class WriterFailed(StoreError):
    """The store's writer thread stopped on an error: the writes it had not committed were
    not written (one line; a resume takes them again)."""


class _Write:
    """One write and, once its group ran, its outcome. A queued write's caller waits on
    `done` (a lock held until then: the cheapest wait there is); a write run in its
    caller's thread needs none (no Future, no Condition per write)."""

    __slots__ = ("fn", "durable", "blobs", "outcome", "done", "on_error", "writer")

    def __init__(
        self,
        fn: Callable[[], Any],
        durable: bool,
        blobs: dict[str, bytes],
        on_error: Callable[[BaseException], Any] | None = None,
        writer: Any = None,  # the `sessions.writer.Writer` (not imported: it imports this module)
    ):
        self.fn, self.durable = fn, durable
        self.blobs = blobs  # the caller's deferred pages (they commit with it)
        self.outcome: tuple[bool, Any] | None = None  # (ok, result or error)
        self.done: Any = None
        self.on_error = on_error  # a write nobody waits for: who hears of its failure
        self.writer = writer  # the writer whose thread answers a queued write

    def answer(self) -> Any:
        """The write's result once its group committed (its error raised). A queued write
        whose writer thread ended without answering it (it cannot: `Writer._failed` answers
        every queued write; this is the last guard) raises WriterFailed within WATCH_S."""
        if self.done is not None:
            while not self.done.acquire(timeout=WATCH_S):  # (the same one wait as without a timeout)
                w = self.writer
                if w is not None and not w._thread.is_alive():
                    if self.done.acquire(timeout=WATCH_S):  # (answered as the thread ended)
                        break
                    raise w.failure or WriterFailed(
                        "the store's writer stopped without answering a write; it was not written"
                    )
        ok, value = self.outcome  # type: ignore[misc]
        if ok:
            return value
        raise value


class _Redo(Exception):
    """A member of a group run without savepoints failed in a way only undoing the whole group undoes."""


def _tell_on_error(w: _Write, exc: BaseException) -> None:
    """A write nobody waited for failed: its `on_error` hears of it (its own failure to say
    so is said on stderr, never the group's)."""
    try:
        w.on_error(exc)  # type: ignore[misc]
    except Exception as again:
        print(f"a deferred write failed: {exc}; and so did saying so: {again}", file=sys.stderr, flush=True)
