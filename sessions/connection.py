"""The store's SQLite plumbing: one-line errors for what SQLite raises (a full disk, a
locked or damaged file; `_Cursor` words them), write fences, and the JSON/hex helpers the
store's parts share. The connection class and its transactions: `sessions.transactions`."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from typing import TYPE_CHECKING, Any, Callable


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


def describe_db_error(path: str, exc: BaseException) -> str:
    """One line naming what is wrong with the database file: read-only, truncated,
    damaged, or not a database at all (sqlite's own words in brackets)."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = msg.lower()
    folder = os.path.dirname(os.path.abspath(path))
    writable = os.access(path, os.W_OK) and os.access(folder, os.W_OK)
    if "readonly" in low or "read-only" in low or ("unable to open" in low and not writable):
        return (
            f"{path} is read-only ({msg}): reading commands (show, versions, episodes, export) work; "
            "writing needs write access to the file and its folder"
        )
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
    return VersionFrozen(
        f"version {version} is frozen (branched from, annotated, judged or used as an exemplar): "
        "it never changes again; continue it in a new version"
    )


def _changed(version: int | str) -> VersionChanged:
    """`version`: as people read it (`EP:N`)."""
    return VersionChanged(f"version {version} changed meanwhile (another writer added steps); reload it and try again")
