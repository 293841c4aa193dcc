"""The engine's per-episode locks (`EpisodeLocks`), each kept only while a thread holds or waits
for it."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator


class _Held:
    """`EpisodeLocks.hold(eid)`: the context manager (a plain object: a step takes it two or
    three times)."""

    __slots__ = ("locks", "eid", "entry")

    def __init__(self, locks: "EpisodeLocks", eid: int):
        self.locks, self.eid = locks, eid

    def __enter__(self) -> threading.RLock:
        entry = self.entry = self.locks._enter(self.eid)
        try:
            entry[0].acquire()
        except BaseException:
            self.locks._leave(self.eid, entry)
            raise
        return entry[0]

    def __exit__(self, *exc: Any) -> bool:
        try:
            self.entry[0].release()
        finally:
            self.locks._leave(self.eid, self.entry)
        return False


class EpisodeLocks:
    """The engine's per-episode locks, each kept only while a thread holds or waits for it:
    a long-running app that touches thousands of episodes keeps none of them afterwards.
    `hold(eid)` is a context manager (re-entrant in a thread, as an RLock)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._table: dict[int, list] = {}  # episode id -> [RLock, threads holding or waiting]

    def __len__(self) -> int:
        return len(self._table)

    def _enter(self, eid: int) -> list:
        with self._guard:
            entry = self._table.get(eid)
            if entry is None:  # (not setdefault: that would make and drop an RLock at every hold)
                entry = self._table[eid] = [threading.RLock(), 0]
            entry[1] += 1
        return entry

    def _leave(self, eid: int, entry: list) -> None:
        with self._guard:
            entry[1] -= 1
            if entry[1] == 0 and self._table.get(eid) is entry:
                del self._table[eid]

    def hold(self, eid: int) -> "_Held":
        """The episode's lock, held inside the `with` (a plain object, not a generator:
        a step takes it three times)."""
        return _Held(self, eid)

    @contextlib.contextmanager
    def try_hold(self, eid: int) -> Iterator[bool]:
        """Without waiting: True inside when the episode was free (now held), else False."""
        entry = self._enter(eid)
        got = entry[0].acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                entry[0].release()
            self._leave(eid, entry)
