"""The editing commands: edit (step K of a version, as a new version), branch (resume from step K), current."""

from __future__ import annotations

import argparse

from react_editor.command_run import CliError, add_common, db_path
from react_editor.episode_args import episode_ref, open_engine, ref_text, version_number, version_of
from react_editor.output import emit, version_ref


def register(sub: argparse._SubParsersAction) -> None:
    """edit, branch, current."""
    p = add_common(sub.add_parser("edit", help="edit step K of a version (a new version; the old one stays)"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--step", type=int, required=True, metavar="K")
    p.add_argument("--version", type=int, default=None)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--thought", help="rewrite the thought of step K")
    g.add_argument("--delete-thought", action="store_true", help="delete the thought of step K")
    g.add_argument("--insert-thought", metavar="TEXT", help="insert a thought (a hint) at step K")
    g.add_argument(
        "--action",
        help="rewrite the action of step K (the environment runs it): the environment's "
        'text form (Search[X], go to desk 1) or a tool call as JSON {"name": ..., "arguments": {...}}',
    )
    g.add_argument("--reasoning", help="rewrite the reasoning (reasoning_content) of step K")
    g.add_argument("--observation", help=argparse.SUPPRESS)
    p.add_argument("--keep-rest", action="store_true", help="thought edits: carry the later steps over unchanged")
    p.set_defaults(func=cmd_edit)

    p = add_common(sub.add_parser("branch", help="a new version keeping steps 1..K (resume from there)"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--step", type=int, required=True, metavar="K")
    p.add_argument("--version", type=int, default=None)
    p.set_defaults(func=cmd_branch)

    p = add_common(sub.add_parser("current", help="make a version the episode's current one"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--version", type=int, default=None, help="a version's global id (or give EP:N)")
    p.add_argument("--name", default=None, help="also name the version")
    p.set_defaults(func=cmd_current)


def cmd_edit(args: argparse.Namespace) -> int:
    if args.observation is not None:
        raise CliError("observations come from the environment and cannot be edited; edit the action instead")
    engine = open_engine(args)
    vid = version_of(engine, args.episode, args.version)
    if args.thought is not None:
        kind, text = "rewrite_thought", args.thought
    elif args.delete_thought:
        kind, text = "delete_thought", None
    elif args.insert_thought is not None:
        kind, text = "insert_thought", args.insert_thought
    elif args.reasoning is not None:
        kind, text = "rewrite_reasoning", args.reasoning
    else:
        kind, text = "rewrite_action", args.action
    v = engine.editor.edit(vid, args.step, kind, text, keep_rest=args.keep_rest)
    emit(args, {"version": v.id, "number": version_number(engine, v.id)}, ref_text(engine, v.id))
    return 0


def cmd_branch(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    vid = version_of(engine, args.episode, args.version)
    v = engine.editor.branch(vid, args.step)
    emit(args, {"version": v.id, "number": version_number(engine, v.id)}, ref_text(engine, v.id))
    return 0


def cmd_current(args: argparse.Namespace) -> int:
    from sessions.store import Store

    store = Store(db_path(args))
    if getattr(args.episode, "number", None) is not None:
        from sessions.numbering import id_of

        args.version = id_of(store, int(args.episode), args.episode.number)
    if args.version is None:
        raise CliError("say which version: EP:N or --version ID")
    store.versions.set_current(args.episode, args.version)
    if args.name is not None:
        store.versions.update(args.version, name=args.name)
    from sessions.numbering import number_of

    ref = version_ref(store, args.version)
    emit(
        args,
        {"episode": args.episode, "version": args.version, "number": number_of(store, args.version)},
        f"episode {args.episode}: current version {ref}",
    )
    return 0
