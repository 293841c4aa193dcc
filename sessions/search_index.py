"""The full-text index (SQLite FTS5): owns the `*_fts` tables. sqlite-utils creates them
as external-content tables over the rows they index (no text is copied) and installs the
triggers that keep them in sync on every insert, update and delete.

Indexed: task text and task ids (`hp-002`, as the Editor's header shows them), steps'
thoughts, actions and observations, version names, and version
notes and step notes. A step row is shared by every version whose path holds it, so it is
indexed once; `sessions.search` maps a step hit to its versions.
"""

from __future__ import annotations

import sqlite3
from sessions.connection import sqlite_utils  # (without pandas: a light start-up)

# content table -> (indexed columns, the field each column is reported as)
SOURCES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tasks": (("text", "ident"), ("task", "task id")),
    "steps": (("thought", "action", "observation"), ("thought", "action", "observation")),
    "versions": (("name",), ("name",)),
    "version_annotations": (("notes",), ("notes",)),
    "step_annotations": (("note",), ("note",)),
}
MARK_START, MARK_END = "\x01", "\x02"  # snippet markers: control characters text does not hold
SNIPPET_TOKENS = 16


class SearchSyntaxError(ValueError):
    """The query is not valid FTS5 syntax (one line)."""


def install(db: sqlite_utils.Database) -> None:
    """Create the index over what the database already holds (a migration) and the triggers
    that keep it current. The task text lives in the task's JSON: a generated column names it.
    (The index as schema 9 made it: task ids came later, `index_task_ids`.)"""
    db.execute("alter table tasks add column text text generated always as (json_extract(json, '$.text')) virtual")
    for table, (columns, _) in SOURCES.items():
        db[table].enable_fts(["text"] if table == "tasks" else list(columns), create_triggers=True)


def index_task_ids(db: sqlite_utils.Database) -> None:
    """Index each task's id beside its text (a migration): an id copied from the Editor's
    header finds its episodes. The id lives in the task's JSON: a generated column names it."""
    db.execute("alter table tasks add column ident text generated always as (json_extract(json, '$.id')) virtual")
    db["tasks"].disable_fts()
    db["tasks"].enable_fts(list(SOURCES["tasks"][0]), create_triggers=True)
    update_on_change(db)


# the stored columns an indexed column is computed from (a generated column has no UPDATE OF)
_STORED = {("tasks", "text"): "json", ("tasks", "ident"): "json"}


def update_on_change(db: sqlite_utils.Database) -> None:
    """Make each update trigger fire only when an indexed column changes: a version's row
    is updated at every step (its leaf), and re-indexing its unchanged name each time
    was most of the index's cost on a run."""
    for table in SOURCES:
        columns = [c.name for c in db[f"{table}_fts"].columns]  # as indexed now (older schemas: fewer)
        cols = ", ".join(sorted({f'"{_STORED.get((table, c), c)}"' for c in columns}))
        old = ", ".join(f'old."{c}"' for c in columns)
        new = ", ".join(f'new."{c}"' for c in columns)
        names = ", ".join(f'"{c}"' for c in columns)
        db.execute(f'drop trigger if exists "{table}_au"')
        db.execute(
            f'create trigger "{table}_au" after update of {cols} on "{table}" begin\n'
            f'  insert into "{table}_fts" ("{table}_fts", rowid, {names}) values (\'delete\', old.rowid, {old});\n'
            f'  insert into "{table}_fts" (rowid, {names}) values (new.rowid, {new});\n'
            f'end'
        )


def matches(db: sqlite_utils.Database, table: str, query: str, cap: int) -> list[tuple[float, int]]:
    """(rank, rowid) of up to `cap` matching rows, best first. Ranking every match of a very
    common word costs a B-tree lookup per row; past `cap` matches only the newest `cap`
    rows are ranked, which keeps a search on a large database fast."""
    try:
        rows = db.execute(
            f"select rank, rowid from [{table}_fts] where [{table}_fts] match ? order by rowid desc limit ?", [query, cap]
        ).fetchall()
    except sqlite3.DatabaseError as exc:  # the store's connection words SQLite's errors as "database error: ..."
        if "interrupted" in str(exc):  # the caller's time budget, not the query
            raise
        why = str(exc).removeprefix("database error: ").removeprefix("fts5: ")
        raise SearchSyntaxError(f"bad search query {query!r}: {why}") from None
    return sorted(rows)


def snippets(db: sqlite_utils.Database, table: str, query: str, rowid: int) -> list[tuple[str, str]]:
    """(field, snippet) for each column of one row that holds a match; a snippet's matches
    are wrapped in MARK_START / MARK_END."""
    columns, fields = SOURCES[table]
    parts = ", ".join(
        f"snippet([{table}_fts], {i}, '{MARK_START}', '{MARK_END}', '…', {SNIPPET_TOKENS})" for i in range(len(columns))
    )
    row = db.execute(f"select {parts} from [{table}_fts] where [{table}_fts] match ? and rowid = ?", [query, rowid]).fetchone()
    return [(f, text) for f, text in zip(fields, row or ()) if text and MARK_START in text]


def split_marks(snippet: str) -> tuple[str, list[tuple[int, int]]]:
    """A marked snippet as (plain text, [(start, end) of each match])."""
    out: list[str] = []
    marks: list[tuple[int, int]] = []
    pos, start = 0, None
    for ch in snippet:
        if ch == MARK_START:
            start = pos
        elif ch == MARK_END:
            if start is not None:
                marks.append((start, pos))
            start = None
        else:
            out.append(ch)
            pos += 1
    return "".join(out), marks
