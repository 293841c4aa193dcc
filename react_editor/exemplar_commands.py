"""Exemplar sets, the few-shot examples new runs are given: `exemplars list`, `create`, `add`,
`remove` and `show`."""

from __future__ import annotations

import argparse

from react_editor.command_run import CliError, add_common
from react_editor.exchange import _filter_flags, _filters, _has_filters, _store
from react_editor.lazy_parser import env_kinds
from react_editor.output import emit, version_refs


def register(sub: argparse._SubParsersAction) -> None:
    """exemplars and its actions."""
    p = add_common(sub.add_parser("exemplars", help="named exemplar sets (few-shot examples for new runs)"))
    ex = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = add_common(ex.add_parser("list", help="all exemplar sets"))
    q.add_argument("--env", choices=env_kinds(), default=None)
    q.set_defaults(func=cmd_ex_list)
    q = add_common(ex.add_parser("create", help="a new set: empty, or built on the built-in exemplars or another set"))
    q.add_argument("name")
    q.add_argument("--env", choices=env_kinds(), required=True)
    _from_flag(q, "start from the built-in exemplars or a copy of another set (docs/jsonl-schema.md)")
    q.add_argument("--description", default=None)
    q.add_argument("--by", default=None)
    q.set_defaults(func=cmd_ex_create)
    q = add_common(ex.add_parser("add", help="add versions (a newer version of an episode replaces its entry)"))
    q.add_argument("name")
    q.add_argument("refs", nargs="*", metavar="EPISODE[:VERSION]")
    q.add_argument("--key", default=None, help="prompt-file key for a single ALFWorld version (react_put_0, ...)")
    q.add_argument("--create", action="store_true", help="create the set if needed (env from the first version)")
    _from_flag(q, "with --create: build the new set on the built-in exemplars or a copy of another set")
    q.add_argument("--by", default=None)
    _filter_flags(q)
    q.set_defaults(func=cmd_ex_add)
    q = add_common(ex.add_parser("remove", help="remove entries by key or episode"))
    q.add_argument("name")
    q.add_argument("--key", default=None)
    q.add_argument("--episode", type=int, default=None)
    q.set_defaults(func=cmd_ex_remove)
    q = add_common(ex.add_parser("show", help="a set's entries (or its prompt dict with --prompts)"))
    q.add_argument("name")
    q.add_argument("--prompts", action="store_true", help="print the prompt dict the agent would use")
    q.set_defaults(func=cmd_ex_show)


def _from_flag(p: argparse.ArgumentParser, help_text: str) -> None:
    """A new exemplar set's base (`agent.exemplars.create_set`)."""
    p.add_argument("--from", dest="base", default=None, metavar="builtin|SET", help=help_text)


def cmd_ex_list(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from sessions import exemplar_sets

    rows = [asdict(s) for s in exemplar_sets.list_sets(_store(args, readonly=True), env=args.env)]
    emit(
        args,
        rows,
        lambda: (
            "\n".join(
                f"{r['name']}\t{r['env']}\t{r['entries']} entries\t{r['description'] or ''}"
                + (f"\tfrom {r['base_note']}" if r["base"] else "")
                for r in rows
            )
            or "(no exemplar sets)"
        ),
    )
    return 0


def cmd_ex_create(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from agent import exemplars

    s = exemplars.create_set(_store(args), args.name, args.env, args.base, description=args.description, by=args.by)
    base = f", {s.entries} entries from {s.base_note}" if s.base else ""
    emit(args, asdict(s), f"exemplar set {s.name!r} ({s.env}{base})")
    return 0


def cmd_ex_add(args: argparse.Namespace) -> int:
    from agent import exemplars
    from sessions import exemplar_sets
    from sessions.exchange import parse_ref, select

    store = _store(args)
    refs = [parse_ref(s) for s in args.refs]
    if not refs and not _has_filters(args):
        raise CliError("give versions (EPISODE[:VERSION]) or filters such as --exemplar-ready --env alfworld")
    if args.key and (len(refs) != 1 or refs[0].all or _has_filters(args)):
        raise CliError("--key is for a single version")
    vids = [v.id for b in select(store, refs or None, _filters(args)) for v in b.versions]
    if not vids:
        raise CliError("no version matches")
    with store.transaction():
        try:
            exemplar_sets.get_set(store, args.name)
        except exemplar_sets.ExemplarSetError:
            if not args.create:
                raise
            env = store.episodes.get(store.versions.get(vids[0]).episode_id).task.env
            exemplars.create_set(store, args.name, env, args.base, by=args.by)
        added = [exemplar_sets.add_version(store, args.name, vid, key=args.key, by=args.by) for vid in vids]
    ref = version_refs(store)
    rows = [{"version": e.version_id, "ref": ref(e.version_id), "key": e.key, "pos": e.pos} for e in added]
    emit(args, rows, lambda: "\n".join(f"{r['ref']} -> {r['key'] or '(block)'}" for r in rows))
    return 0


def cmd_ex_remove(args: argparse.Namespace) -> int:
    from sessions import exemplar_sets

    if args.key is None and args.episode is None:
        raise CliError("give --key or --episode")
    n = exemplar_sets.remove(_store(args), args.name, key=args.key, episode_id=args.episode)
    emit(args, {"removed": n}, f"removed {n} entr{'y' if n == 1 else 'ies'}")
    return 0


def cmd_ex_show(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from sessions import exemplar_sets

    store = _store(args, readonly=True)
    if args.prompts:
        env, d = exemplar_sets.prompt_dict(store, args.name)
        emit(args, {"env": env, "prompts": d}, lambda: "\n".join(f"== {k} ==\n{v}" for k, v in d.items()))
        return 0
    rows, ref = [], version_refs(store)
    for e in exemplar_sets.entries(store, args.name):
        row = asdict(e)
        row.pop("text")
        if e.version_id is not None:
            v = store.versions.get(e.version_id)
            row["episode"], row["ref"] = v.episode_id, ref(v.id, v.episode_id)
        rows.append(row)
    emit(
        args,
        rows,
        lambda: (
            "\n".join(
                f"{r['pos']}\t{r['key'] or '(auto)'}\t"
                + (r["ref"] if r["version_id"] else "text")
                + ("\t(from the base)" if r["inherited"] else "")
                for r in rows
            )
            or "(empty)"
        ),
    )
    return 0
