"""What a part of the Store receives: the database (this thread's connection and the
Store's transactions), as sqlite-utils' `Table` receives its `Database`; and the one
plain-SQL insert the parts share."""

from __future__ import annotations

from typing import Any, ContextManager, Protocol

from sessions.connection import sqlite_utils


class Database(Protocol):
    """The Store as its parts see it: nothing else of it is theirs to use."""

    @property
    def db(self) -> sqlite_utils.Database: ...

    def transaction(self, *, durable: bool = True) -> ContextManager[Any]: ...


def insert_row(db: sqlite_utils.Database, table: str, row: dict[str, Any]) -> int:
    """Insert one row of plain values; its id. (sqlite-utils' `table.insert` checks the
    schema - several sqlite_master reads - on every call: too slow for a per-step row.)"""
    cols = ", ".join(f'"{c}"' for c in row)
    sql = f'insert into "{table}" ({cols}) values ({", ".join("?" * len(row))})'
    return db.execute(sql, list(row.values())).lastrowid
