"""The database a part of the Store receives (`Database`: this thread's connection and the
Store's transactions), as sqlite-utils' `Table` receives its `Database`; and what the parts
share of it: the one plain-SQL insert and the row-id cache (`RowIds`)."""

from __future__ import annotations

from typing import Any, ContextManager, Protocol, cast

from sessions.connection import sqlite_utils


class Database(Protocol):
    """The Store as its parts see it: nothing else of it is theirs to use."""

    @property
    def db(self) -> sqlite_utils.Database: ...

    def transaction(self, *, durable: bool = True) -> ContextManager[Any]:
        """A re-entrant transaction (`sessions.transactions.Transaction`)."""

    def in_transaction(self) -> bool:
        """Is this thread inside a transaction of the Store?"""


def insert_row(db: sqlite_utils.Database, table: str, row: dict[str, Any]) -> int:
    """Insert one row of plain values; its id. (sqlite-utils' `table.insert` checks the
    schema - several sqlite_master reads - on every call: too slow for a per-step row.)"""
    cols = ", ".join(f'"{c}"' for c in row)
    sql = f'insert into "{table}" ({cols}) values ({", ".join("?" * len(row))})'
    return cast(int, db.execute(sql, list(row.values())).lastrowid)  # (an insert: always set)


class RowIds:
    """Row ids by content key, for rows that are never deleted (tasks, configs, call params): only
    committed rows are kept (`ids`); what the open transaction learned waits in `new`
    until it commits (`sessions.transactions.Transaction` moves or drops it), so a rollback
    leaves no id behind that no longer exists."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.new: dict[Any, int] = {}

    def get(self, key: Any) -> int | None:
        """The row id of `key` (committed, or learned by the open transaction), or None."""
        return self.ids.get(key) or self.new.get(key)

    def learn(self, key: Any, row_id: int) -> int:
        """Note `row_id` for `key` in the open transaction (kept once it commits); returns `row_id`."""
        self.new[key] = row_id
        return row_id

    def committed(self) -> None:
        """The open transaction committed: what it learned is kept."""
        if len(self.ids) > 100_000:  # a long-lived app: bounded, refilled on use
            self.ids.clear()
        self.ids.update(self.new)
        self.new = {}

    def rolled_back(self) -> None:
        """The open transaction was undone: what it learned is dropped."""
        self.new = {}

    def mark(self) -> dict[Any, int]:
        """What the open transaction has learned so far (a savepoint's start)."""
        return dict(self.new)

    def undo_to(self, mark: dict[Any, int]) -> None:
        """The savepoint was rolled back: the rows learned since are gone."""
        self.new = mark
