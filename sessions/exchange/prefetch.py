"""Read ahead on a second core: a bulk export's SQLite reads run in a reader thread while
the calling thread encodes and writes. Python's sqlite3 lets go of the GIL while SQLite
steps, so the two overlap; a bounded queue keeps memory to a few chunks. The reader stops
(and is joined) however the consumer ends, and its exception is raised in the consumer."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

# A thread that gives up the GIL for every row it steps waits a whole switch interval (5 ms)
# to get it back from a busy encoder; while a reader runs, the interval is this.
SWITCH_S = 0.0002
_END = object()
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.005


@contextlib.contextmanager
def _short_switch() -> Iterator[None]:
    """The interpreter's switch interval shortened while any reader runs (counted: exports
    in two threads restore it once, when the last one ends)."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_S, _switch_saved))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


class _Reader(threading.Thread):
    def __init__(self, items: Iterable[T], depth: int):
        super().__init__(name="export-reader", daemon=True)
        self.items, self.q, self.stop = items, queue.Queue(depth), threading.Event()

    def run(self) -> None:
        try:
            for item in self.items:
                if not self._put((item, None)):
                    return
            self._put((_END, None))
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put((_END, exc))
        finally:
            close = getattr(self.items, "close", None)
            if close is not None:
                close()  # a generator's finally blocks run here, in its thread

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False


@contextlib.contextmanager
def prefetched(items: Iterable[T], depth: int = 2) -> Iterator[Iterator[T]]:
    """`with prefetched(gen) as it:` - `gen` runs in a reader thread, at most `depth` items
    ahead of `it`. On leaving (normally or by an exception) the reader is stopped and
    joined before the block's outcome propagates."""
    reader = _Reader(items, depth)

    def consume() -> Iterator[T]:
        while True:
            item, exc = reader.q.get()
            if exc is not None:
                raise exc
            if item is _END:
                return
            yield item

    with _short_switch():
        reader.start()
        try:
            yield consume()
        finally:
            reader.stop.set()
            reader.join()
