"""The full-text index (SQLite FTS5): owns the `*_fts` tables. sqlite-utils creates them
as external-content tables over the rows they index (no text is copied) and installs the
triggers that keep them in sync on every insert, update and delete.

Deferred (migration 15): a new task, step or version is not tokenized by its insert. Its
insert trigger notes the row in `search_pending` (one B-tree insert); `flush` indexes every
noted row in one statement per table. FTS5 writes a segment per commit that touched it,
which cost a run more than the tokenizing (three segments per task, item start and steps);
flushed in groups, it is written once for many rows. Who flushes: any durable transaction
that changed rows, before it commits (`Store`: so outside the runner's writer a step is
indexed as it commits, as before; a light one leaves its rows to the next), and a group
of the runner's writer every INDEX_WRITES writes (`sessions.writer`; what its last groups
noted waits for the next durable transaction). A search finds noted rows too (`matches`:
a small in-memory index of them, per search), so a row is searchable from its commit on,
indexed or not, even in a read-only Store or after a killed runner left rows noted.
Updates and deletes of a noted row leave the index alone (the flush reads the row as it
is then).

Indexed: task text and task ids (`hp-002`, as the Editor's header shows them), steps'
thoughts, actions and observations, version names, and version
notes and step notes. A step row is shared by every version whose path holds it, so it is
indexed once; `sessions.search` maps a step hit to its versions.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from sessions.connection import sqlite_utils  # (without pandas: a light start-up)
from sessions.transactions import connection_state

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


DEFERRED = ("tasks", "steps", "versions")  # the tables whose inserts are indexed by `flush` (a run writes them)


class SearchSyntaxError(ValueError):
    """The query is not valid FTS5 syntax (one line)."""


RECENT_STEP = 1e-9  # the rank step between two rows of a query too common to rank (`matches`)


def install(db: sqlite_utils.Database) -> None:
    """Create the index over what the database already holds (a migration) and the triggers
    that keep it current. The task text lives in the task's JSON: a generated column names it.
    (The index as schema 9 made it: task ids came later, `index_task_ids`.)"""
    db.execute("alter table tasks add column text text generated always as (json_extract(json, '$.text')) virtual")
    for table, (columns, _) in SOURCES.items():
        db.table(table).enable_fts(["text"] if table == "tasks" else list(columns), create_triggers=True)


def index_task_ids(db: sqlite_utils.Database) -> None:
    """Index each task's id beside its text (a migration): an id copied from the Editor's
    header finds its episodes. The id lives in the task's JSON: a generated column names it."""
    db.execute("alter table tasks add column ident text generated always as (json_extract(json, '$.id')) virtual")
    db.table("tasks").disable_fts()
    db.table("tasks").enable_fts(list(SOURCES["tasks"][0]), create_triggers=True)
    update_on_change(db)


# the stored columns an indexed column is computed from (a generated column has no UPDATE OF)
_STORED = {("tasks", "text"): "json", ("tasks", "ident"): "json"}


def update_on_change(db: sqlite_utils.Database) -> None:
    """Make each update trigger fire only when an indexed column changes: a version's row
    is updated at every step (its leaf), and re-indexing its unchanged name each time
    was most of the index's cost on a run."""
    for table in SOURCES:
        _update_trigger(db, table, [c.name for c in db[f"{table}_fts"].columns])  # as indexed now (older: fewer)


def _update_trigger(db: sqlite_utils.Database, table: str, columns: list[str], when: str | None = None) -> None:
    cols = ", ".join(sorted({f'"{_STORED.get((table, c), c)}"' for c in columns}))
    old = ", ".join(f'old."{c}"' for c in columns)
    new = ", ".join(f'new."{c}"' for c in columns)
    names = ", ".join(f'"{c}"' for c in columns)
    db.execute(f'drop trigger if exists "{table}_au"')
    db.execute(
        f'create trigger "{table}_au" after update of {cols} on "{table}"{f" when {when}" if when else ""} begin\n'
        f'  insert into "{table}_fts" ("{table}_fts", rowid, {names}) values (\'delete\', old.rowid, {old});\n'
        f'  insert into "{table}_fts" (rowid, {names}) values (new.rowid, {new});\n'
        f"end"
    )


def _noted(table: str, name: str) -> str:
    return f"exists (select 1 from search_pending where tbl = '{table}' and row = {name}.rowid)"


def defer(db: sqlite_utils.Database) -> None:
    """Index new rows of DEFERRED in groups (a migration): `search_pending`, and the triggers
    that note an insert instead of indexing it, and leave a noted row's index alone on an
    update or a delete (it is not in the index yet)."""
    db.execute(
        "create table search_pending (tbl text not null, row integer not null, primary key (tbl, row)) without rowid"
    )
    for table in DEFERRED:
        columns = [c.name for c in db[f"{table}_fts"].columns]
        names = ", ".join(f'"{c}"' for c in columns)
        old = ", ".join(f'old."{c}"' for c in columns)
        for kind in ("ai", "ad"):
            db.execute(f'drop trigger if exists "{table}_{kind}"')
        db.execute(
            f'create trigger "{table}_ai" after insert on "{table}" begin\n'
            f"  insert or ignore into search_pending (tbl, row) values ('{table}', new.rowid);\nend"
        )
        db.execute(
            f'create trigger "{table}_ad" after delete on "{table}" begin\n'
            f'  insert into "{table}_fts" ("{table}_fts", rowid, {names}) select \'delete\', old.rowid, {old} '
            f"where not {_noted(table, 'old')};\n"
            f"  delete from search_pending where tbl = '{table}' and row = old.rowid;\nend"
        )
        _update_trigger(db, table, columns, f"not {_noted(table, 'old')}")


def _noting(db: sqlite_utils.Database) -> bool:
    """Does the database note rows (schema 15 on)? Asked once per connection."""
    state = connection_state(db.conn)
    if state.search_noting is None:
        state.search_noting = (
            db.execute("select 1 from sqlite_master where name = 'search_pending'").fetchone() is not None
        )
    return state.search_noting


def flush(db: sqlite_utils.Database) -> None:
    """Inside the caller's transaction: index the noted rows (one statement per table that
    has some) and forget them. No noted row: one read."""
    if not _noting(db):
        return
    tables = [t for (t,) in db.execute("select distinct tbl from search_pending").fetchall()]
    for table in tables:
        columns = SOURCES[table][0]
        names = ", ".join(f'"{c}"' for c in columns)
        values = ", ".join(f't."{c}"' for c in columns)
        db.execute(
            f'insert into "{table}_fts" (rowid, {names}) select t.rowid, {values} from search_pending p '
            f'join "{table}" t on t.rowid = p.row where p.tbl = ? order by p.row',
            [table],
        )
    if tables:
        db.execute("delete from search_pending")


def _tail(db: sqlite_utils.Database, table: str) -> str | None:
    """The noted rows of `table` in an index of this connection's own (temp, rebuilt per
    search; a read-only connection may write its temp database): its name, or None when
    no row is noted. Read before the main index: a flush committing in between makes a
    row show in both (the caller keeps one), never in neither."""
    if table not in DEFERRED or not _noting(db):
        return None
    rows = [r for (r,) in db.execute("select row from search_pending where tbl = ?", [table]).fetchall()]
    tails = _tails(db)
    if not rows:
        tails.pop(table, None)
        return None
    columns = SOURCES[table][0]
    names = ", ".join(f'"{c}"' for c in columns)
    name = f"{table}_tail"
    db.execute(f'create virtual table if not exists temp."{name}" using fts5({names})')
    db.execute(f'delete from temp."{name}"')
    marks = ", ".join("?" * len(rows))
    db.execute(
        f'insert into temp."{name}" (rowid, {names}) select rowid, {names} from "{table}" where rowid in ({marks})',
        rows,
    )
    tails[table] = set(rows)
    return name


def _tails(db: sqlite_utils.Database) -> dict[str, set[int]]:
    """{table: rowids} the connection's tail indexes hold (the last search's)."""
    return connection_state(db.conn).search_tails


def matches(db: sqlite_utils.Database, table: str, query: str, cap: int) -> list[tuple[float, int]]:
    """(rank, rowid) of up to `cap` matching rows, best first. Rows noted but not yet indexed
    (`flush`) are matched too.

    FTS5's bm25 rank reads the whole doclist of each phrase (its inverse document frequency),
    so ranking a word that half the store holds costs time in proportion to the store, even
    for ten rows. So a query is first matched without rank, newest first, up to `cap` rows (a
    walk of the doclist's end: cheap at any size). Fewer than `cap` matches: they are ranked
    by bm25 (a scan bounded by `cap`). `cap` or more: the query is too common for relevance to
    say much, and the newest `cap` are listed newest first, after every bm25-ranked row of
    the other tables (their ranks are below zero; these are zero minus a tiny step per row).
    Raises SearchSyntaxError (one line) for a query FTS5 cannot parse."""
    tail = _tail(db, table)
    try:
        ids = [
            r
            for (r,) in db.execute(
                f"select rowid from [{table}_fts] where [{table}_fts] match ? order by rowid desc limit ?", [query, cap]
            )
        ]
        if len(ids) < cap:
            rows = (
                db.execute(
                    f"select rank, rowid from [{table}_fts] where [{table}_fts] match ? order by rowid desc limit ?",
                    [query, cap],
                ).fetchall()
                if ids
                else []
            )
        else:
            rows = [(-RECENT_STEP * (cap - i), r) for i, r in enumerate(ids)]
        if tail is not None:
            seen = {r for _, r in rows}
            rows += [
                (rank, r)
                for rank, r in db.execute(
                    f'select rank, rowid from temp."{tail}" where "{tail}" match ? order by rowid desc limit ?',
                    [query, cap],
                ).fetchall()
                if r not in seen
            ]
    except sqlite3.DatabaseError as exc:  # the store's connection words SQLite's errors as "database error: ..."
        if "interrupted" in str(exc):  # the caller's time budget, not the query
            raise
        why = str(exc).removeprefix("database error: ").removeprefix("fts5: ")
        raise SearchSyntaxError(f"bad search query {query!r}: {why}") from None
    return sorted(rows)


def snippets(
    db: sqlite_utils.Database, table: str, query: str, rowids: Iterable[int]
) -> dict[int, list[tuple[str, str]]]:
    """rowid -> (field, snippet) for each column of the row that holds a match; a snippet's
    matches are wrapped in MARK_START / MARK_END. One query for all `rowids` of the index
    (and one for those noted, not yet indexed): a query's match is set up once, not once per
    row - a prefix query merges the doclists of every word it names, which costs in
    proportion to the store. The index walks only the rowid range the rows span."""
    columns, fields = SOURCES[table]
    wanted = sorted(set(rowids))
    tail = _tails(db).get(table, ())
    out: dict[int, list[tuple[str, str]]] = {}
    for noted in (False, True):
        ids = [r for r in wanted if (r in tail) == noted]
        if not ids:
            continue
        index = f'"{table}_tail"' if noted else f"[{table}_fts]"  # noted rows: the search's own index of them
        source = f"temp.{index}" if noted else index
        parts = ", ".join(
            f"snippet({index}, {i}, '{MARK_START}', '{MARK_END}', '…', {SNIPPET_TOKENS})" for i in range(len(columns))
        )
        rows = db.execute(  # (`rowid + 0`: a filter, so the index is asked for the range, walked once)
            f"select rowid, {parts} from {source} where {index} match ? and rowid between ? and ? "
            f"and rowid + 0 in ({','.join(str(int(r)) for r in ids)})",
            [query, ids[0], ids[-1]],
        ).fetchall()
        for r in rows:
            out[r[0]] = [(f, text) for f, text in zip(fields, r[1:]) if text and MARK_START in text]
    return out


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
