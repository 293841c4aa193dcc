"""The blobs part of the Store (`store.blobs`): content-addressed bytes (pages an
environment fetched, long snapshot parts), written with the step that refers to them."""

from __future__ import annotations

import hashlib
import threading
from typing import Literal

from sessions.database import Database

MAX_KNOWN_BLOBS = 100_000  # blob keys a Store remembers as written (then it asks the database again)


class Blobs:
    """The blobs table; also the `envs.base.BlobStore` an environment is given."""

    def __init__(self, database: Database):
        self._database = database
        self._local = threading.local()  # this thread's deferred blobs (`deferred`)
        self.known: set[str] = set()  # blobs known to be committed (bounded)
        self.new: dict[str, bytes] = {}  # written by the open transaction (its `Transaction` keeps them)

    def put(self, data: bytes) -> str:
        """Store content-addressed bytes (pages, long snapshot parts); their key. Inside
        `deferred_blobs()` the write waits for this thread's next transaction (a step's
        record), so an environment step costs no commit of its own."""
        key = hashlib.sha256(data).hexdigest()[:32]
        if key in self.known:  # committed already (blobs are never deleted)
            return key
        pending = getattr(self._local, "blobs", None)
        if pending is not None and not self._database.in_transaction():
            pending[key] = data
            return key
        with self._database.transaction():
            self.write({key: data})
        return key

    def deferred(self) -> "_Deferred":
        """Blobs stored on this thread meanwhile are written by its next transaction
        (the one that records the step referring to them); any left at the end are
        written then, in one transaction. (A context manager; entered twice per step.)"""
        return _Deferred(self)

    def write(self, blobs: dict[str, bytes]) -> None:
        # plain SQL: sqlite-utils looks the row up by rowid afterwards, which a
        # WITHOUT ROWID table does not have (a page fetched twice would fail)
        """Write pages inside the caller's transaction (a key already stored is kept as it is);
        they are remembered once it commits."""
        self.new.update(blobs)  # first: a failed write gives them back (`requeue`)
        self._database.db.conn.executemany("insert or ignore into blobs (key, data) values (?, ?)", list(blobs.items()))

    def remember(self, blobs: dict[str, bytes]) -> None:
        """Note committed pages as stored (`put` then writes them no more; bounded)."""
        if len(self.known) > MAX_KNOWN_BLOBS:
            self.known.clear()
        self.known.update(blobs)

    def requeue(self, blobs: dict[str, bytes]) -> None:
        """A rolled-back transaction's deferred blobs wait for the next one (an
        environment may already refer to them)."""
        if not blobs:
            return
        pending = getattr(self._local, "blobs", None)
        if pending is not None:
            pending.update(blobs)
            return
        try:  # no scope to wait in (it ended inside the transaction that rolled back): now, on their own
            with self._database.transaction():
                self.write(blobs)
        except Exception:  # the transaction's own error is the one the caller hears of
            pass

    def take_deferred(self) -> None:
        """At the start of a transaction: this thread's deferred blobs go in with it."""
        pending = getattr(self._local, "blobs", None)
        if pending:
            self._local.blobs = {}
            self.write(pending)

    def take_pending(self) -> dict[str, bytes]:
        """This thread's deferred blobs, handed over (the writer commits them with its write)."""
        pending = getattr(self._local, "blobs", None)
        out = dict(pending) if pending else {}
        if pending:
            pending.clear()
        return out

    def add_pending(self, blobs: dict[str, bytes]) -> None:
        """Blobs handed back (a write rolled back): they wait for this thread's next write."""
        pending = getattr(self._local, "blobs", None)
        if blobs and pending is not None:
            pending.update(blobs)

    def get(self, key: str) -> bytes | None:
        """The stored bytes of `key`, or None when no page has that key."""
        r = self._database.db.execute("select data from blobs where key = ?", [key]).fetchone()
        return None if r is None else bytes(r[0])

    put_blob, get_blob = put, get  # the BlobStore protocol of envs.base


class _Deferred:
    """`Blobs.deferred()`: a plain context manager (a generator-based one costs more, and
    every step enters two); nested in another, the outer one writes what is left."""

    __slots__ = ("blobs", "outer")

    def __init__(self, blobs: Blobs):
        self.blobs = blobs

    def __enter__(self) -> None:
        local = self.blobs._local
        self.outer = getattr(local, "blobs", None) is None
        if self.outer:
            local.blobs = {}

    def __exit__(self, *exc: object) -> Literal[False]:
        if self.outer:
            local = self.blobs._local
            left, local.blobs = local.blobs, None
            if left:
                with self.blobs._database.transaction():
                    self.blobs.write(left)
        return False
