"""The task commands: tasks (an environment's task list) and data (official datasets and the ReAct
release's files)."""

from __future__ import annotations

import argparse
from typing import Any

from react_editor.command_run import add_common
from react_editor.episode_args import families, one_line
from react_editor.lazy_parser import env_kinds, later
from react_editor.output import emit, progress


def register_tasks(sub: argparse._SubParsersAction) -> None:
    """tasks."""
    p = add_common(sub.add_parser("tasks", help="list the tasks of an environment"))
    p.add_argument("--env", required=True, choices=env_kinds())
    p.add_argument(
        "--source",
        default="builtin",
        help="builtin (default), official, or react (the ReAct release's lists, where a family has them)",
    )
    p.add_argument("--split", default=None, help="the split for --source official (default: the environment's own)")
    p.add_argument("--limit", type=int, default=None)
    p.set_defaults(func=cmd_tasks)


def register_data(sub: argparse._SubParsersAction) -> None:
    """data."""
    p = add_common(
        sub.add_parser("data", help="download official datasets or the ReAct release's files (needs internet)")
    )
    later(p, lambda q: q.add_argument("dataset", choices=tuple(_downloads())))  # (asks every family)
    p.add_argument("--dest", default=None, help="where to put the data")
    p.add_argument("--url", default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_data)


def cmd_tasks(args: argparse.Namespace) -> int:
    from envs.registry import family

    opts: dict[str, Any] = {}
    if args.split:
        opts["split"] = args.split
    tasks = family(args.env).list_tasks(source=args.source, **opts)
    if args.limit:
        tasks = tasks[: args.limit]
    rows = [
        {"id": t.id, "env": t.env, "type": t.type, "text": t.text, "gold": t.gold, "source": t.source} for t in tasks
    ]
    emit(
        args,
        rows,
        lambda: "\n".join(f"{r['id']}\t{r['type'] or '-'}\t{one_line(r['text'])}" for r in rows) or "(no tasks)",
    )
    return 0


def _downloads() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fam in families():
        for name, fn in fam.downloads.items():
            out.setdefault(name, fn)
    return out


def cmd_data(args: argparse.Namespace) -> int:
    from react_editor.args import folder

    dest = folder(args.dest, "destination folder") if args.dest else None
    kw: dict[str, Any] = {"progress": progress}
    if args.url:
        kw["base_url"] = args.url
    path = _downloads()[args.dataset](dest, **kw)  # the family that offers it
    emit(args, {"dataset": args.dataset, "path": str(path)}, f"{args.dataset}: {path}")
    return 0
