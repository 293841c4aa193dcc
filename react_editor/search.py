"""`react-editor search`: full-text search over every version (sessions.search)."""

from __future__ import annotations

import argparse

from react_editor.command_run import CliError, add_common, db_path
from react_editor.lazy_parser import env_kinds
from react_editor.output import emit, version_refs
from react_editor.paging import add_page_flags, page_of, say_page
from trajectory.records import OUTCOME_FILTERS
from trajectory.signals import SIGNALS


def register(sub: argparse._SubParsersAction) -> None:
    p = add_common(
        sub.add_parser(
            "search", help="full-text search: task text, thoughts, actions, observations, version names, notes"
        )
    )
    p.add_argument("query", help='FTS5 query: words, "a phrase", prefix*, AND / OR / NOT, observation: word')
    p.add_argument("--env", choices=env_kinds(), default=None)
    p.add_argument("--outcome", choices=OUTCOME_FILTERS, default=None, help="the version's automatic outcome")
    p.add_argument("--signal", choices=SIGNALS, default=None, help="only versions carrying this signal")
    add_page_flags(p, 20, "hits")
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    from trajectory.search_text import QueryError, check_query

    try:  # a flood is refused before the database (and the heavier modules) are opened
        check_query(args.query)
    except QueryError as exc:
        raise CliError(str(exc)) from None
    from sessions.search import search
    from sessions.store import Store

    store = Store(db_path(args), readonly=True)
    hits = search(
        store, args.query, env=args.env, outcome=args.outcome, signal=args.signal, limit=args.offset + args.limit + 1
    )  # one more than the page: are there more?
    shown, page = page_of(hits[args.offset :], args.limit, args.offset)
    rows = [h.as_json() for h in shown]
    ref = version_refs(store)
    for r in rows:  # people read EP:N (the per-episode number); `version` stays the global id
        r["ref"] = ref(r["version"], r["episode"])
        r["number"] = int(r["ref"].partition(":")[2].lstrip("r"))  # within its kind (v2 or r2: 2)
    note = say_page(args.json, page, "hits")
    emit(
        args,
        rows,
        lambda: (
            "\n".join(
                [
                    f"{r['ref']}\t{'-' if r['step'] is None else r['step']}\t{r['field']}\t"
                    f"{' '.join(r['snippet'].split())}"
                    for r in rows
                ]
                + ([note] if note else [])
            )
            or "(no matches)"
        ),
    )
    return 0
