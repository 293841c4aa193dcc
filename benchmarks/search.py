"""Benchmark: full-text search over 10,000 versions of 30 steps (issue 13).

Builds the bulk database (`_bulk.py`), then
- index_build_s: turns a copy of it back into a database from before the search index and
  the signals (index, triggers, generated column and signals column dropped) and
  times the upgrade that opening it runs (signals backfill + index build);
- size_increase: what that upgrade adds, relative to the database before it (both vacuumed);
- search_p50_ms: the median wall time of `sessions.search.search` over a mix of queries
  (rare and common words, phrases, prefixes, column filters, boolean operators, filters),
  each run 5 times on the upgraded database.
Prints, last, one JSON object: {"search_p50_ms", "index_build_s", "size_increase", ...}
(targets: <= 50 ms, <= 60 s, <= 0.5).

    python benchmarks/search.py [--episodes 5000] [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

from _bulk import build  # noqa: E402  (before _root, which takes this folder off sys.path)
from _root import ROOT  # noqa: E402,F401  (repo root on sys.path; see _root.py)

QUERIES = [  # (query, filters)
    ("mug", {}),
    ("cabinet", {}),
    ('"cabinet 3"', {}),
    ('"put a mug 4321"', {}),
    ("spoon AND plate", {}),
    ("cup 17", {}),
    ("b 4321", {}),
    ("fridg*", {}),
    ("observation: spoon", {}),
    ("thought: mug NOT cabinet", {}),
    ("countertop OR drawer", {}),
    ("zebra", {}),
    ("mug", {"outcome": "unfinished"}),
    ("cabinet 5", {"env": "alfworld"}),
    ("cup 3", {"signal": "step_limit"}),
]
RUNS = 5


def downgrade(db: Path) -> None:
    """The database as it was before issue 13 (no search index, no signals column): every
    table, index, trigger and column the migrations from issue 13's first one on added is
    dropped - whatever migrations came later (the jobs table of the next one, ...), so that
    opening it re-runs them all, as an upgrade from that version would."""
    import sqlite_utils

    from sessions import schema

    first = schema.MIGRATIONS.index(schema._v8_step_signals)  # issue 13's first migration
    ref = sqlite3.connect(":memory:", isolation_level=None)
    ref_db = sqlite_utils.Database(ref)
    for migrate in schema.MIGRATIONS[:first]:
        migrate(ref_db)
    conn = sqlite3.connect(db, isolation_level=None)
    _drop_added(conn, ref)
    conn.execute("update meta set value = ? where key = 'schema_version'", [str(first)])
    conn.execute("vacuum")
    conn.close()


def _objects(conn: sqlite3.Connection) -> dict[str, dict[str, str]]:
    """{type: {name: table}} of the schema (meta, sqlite_* and FTS shadow tables aside)."""
    out: dict[str, dict[str, str]] = {"trigger": {}, "index": {}, "table": {}}
    for kind, name, table in conn.execute("select type, name, tbl_name from sqlite_master"):
        if kind in out and not name.startswith("sqlite_") and name != "meta":
            out[kind][name] = table
    return out


def _drop_added(conn: sqlite3.Connection, ref: sqlite3.Connection) -> None:
    have, want = _objects(conn), _objects(ref)
    for kind in ("trigger", "index", "table"):  # a virtual table first drops its shadow tables
        for name in sorted(set(have[kind]) - set(want[kind]), key=lambda n: ("_fts_" in n, n)):
            conn.execute(f"drop {kind} if exists [{name}]")
    for table in want["table"]:
        cols = {r[1] for r in ref.execute(f"pragma table_xinfo([{table}])")}
        for r in conn.execute(f"pragma table_xinfo([{table}])").fetchall():
            if r[1] not in cols:
                conn.execute(f"alter table [{table}] drop column [{r[1]}]")


def vacuumed_size(db: Path) -> int:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.execute("vacuum")
    conn.close()
    return db.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--keep", default=None, help="keep the databases here")
    ap.add_argument("--reuse", action="store_true", help="with --keep: start from the bulk database kept there")
    args = ap.parse_args()
    from sessions.search import search
    from sessions.store import Store

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-search-"))
    work.mkdir(parents=True, exist_ok=True)
    db, old = work / "bench.db", work / "old.db"
    reuse = args.reuse and args.keep and db.exists()
    for p in (old,) if reuse else (db, old):
        if p.exists():
            p.unlink()
    t0 = time.perf_counter()
    if not reuse:
        build(db, args.episodes)
        print(f"built {args.episodes * 2} versions in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    vacuumed_size(db)
    shutil.copy(db, old)
    downgrade(old)
    before = old.stat().st_size
    t0 = time.perf_counter()
    Store(old).close()  # the upgrade: signals backfill + index build
    build_s = time.perf_counter() - t0
    with closing(sqlite3.connect(old)) as a, closing(sqlite3.connect(db)) as b:  # the upgrade made it whole again
        assert _objects(a) == _objects(b), "the downgraded database did not upgrade to the current schema"
    increase = (vacuumed_size(old) - before) / before

    store = Store(old)
    times, cpu, hits, each = [], [], {}, {}
    for query, filters in QUERIES:
        mine = []
        for _ in range(RUNS):
            t0, c0 = time.perf_counter(), time.process_time()
            found = search(store, query, **filters)
            mine.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)  # a shared machine's load stretches wall time only
        times += mine
        hits[query], each[f"{query} {filters or ''}".strip()] = len(found), round(statistics.median(mine), 1)
    store.close()
    print(f"hits per query: {hits}", file=sys.stderr)
    print(f"p50 ms per query: {each}", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(work)
    print(
        json.dumps(
            {
                "search_p50_ms": round(statistics.median(times), 1),
                "search_p90_ms": round(statistics.quantiles(times, n=10)[-1], 1),
                "search_p50_cpu_ms": round(statistics.median(cpu), 1),
                "search_max_ms": round(max(times), 1),
                "index_build_s": round(build_s, 2),
                "size_increase": round(increase, 3),
                "versions": args.episodes * 2,
            }
        )
    )


if __name__ == "__main__":
    main()
