"""`confirm`: a person's OK for the files and URLs an imported episode points at (an
imported game, ZIM file or wiki URL outside the configured data is not opened before)."""

from __future__ import annotations

import argparse

from react_editor.command_run import add_common, db_path
from react_editor.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = add_common(sub.add_parser("confirm", help="allow an imported episode to open its files/URLs (or re-point it)"))
    p.add_argument("episode", type=int)
    p.add_argument("--wiki", default=None, help="re-point the Wikipedia backend first: builtin, live, zim:PATH")
    p.add_argument("--wiki-url", default=None, help="re-point the MediaWiki API URL first (--wiki live)")
    p.set_defaults(func=cmd_confirm)


def cmd_confirm(args: argparse.Namespace) -> int:
    from agent.engine import Engine
    from agent.run_settings import check_base_url
    from sessions.store import Store

    check_base_url(args.wiki_url, "the MediaWiki API URL")
    refs = Engine(Store(db_path(args))).envs.confirm_references(args.episode, wiki=args.wiki, wiki_url=args.wiki_url)
    emit(
        args,
        {"episode": args.episode, "confirmed": refs},
        f"episode {args.episode} may open: {', '.join(refs)}"
        if refs
        else f"episode {args.episode} opens nothing outside the data folders",
    )
    return 0
