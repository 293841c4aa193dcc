"""`react-editor judge`: a person's pairwise judgment of two versions of one episode (which is
better, or a tie, with a reason), the judgments recorded, and how often annotators agree
(raw agreement, Cohen's kappa, Krippendorff's alpha)."""

from __future__ import annotations

import argparse
from typing import Any

from react_editor.command_run import CliError, add_common, db_path
from react_editor.output import emit, version_refs

_REF_HELP = "a version: EP (its current version), EP:N or EP:rN"


def register(sub: argparse._SubParsersAction) -> None:
    p = add_common(
        sub.add_parser(
            "judge",
            help="judge which of two versions of an episode is better (or list judgments, or agreement)",
            description="react-editor judge EP:A EP:B --better A|B|tie [--reason TEXT] [--annotator NAME]; "
            "react-editor judge --list; react-editor judge --agreement",
        )
    )
    p.add_argument("refs", nargs="*", metavar="EP:N", help=_REF_HELP + " (two of them: A, then B)")
    p.add_argument(
        "--better",
        choices=("A", "B", "tie"),
        default=None,
        help="A (the first version is better), B (the second) or tie",
    )
    p.add_argument("--reason", default=None, help="why (free text)")
    p.add_argument(
        "--annotator",
        "--by",
        dest="annotator",
        default=None,
        help="who judges (default $REACT_EDITOR_USER or the OS user); judging a pair again replaces "
        "your judgment of it",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="the judgments recorded")
    what.add_argument(
        "--agreement", action="store_true", help="how often annotators agree on the pairs two or more of them judged"
    )
    p.add_argument("--episode", type=int, default=None, metavar="EP", help="with --list/--agreement: one episode")
    p.set_defaults(func=cmd_judge)


def _store(args: argparse.Namespace, *, readonly: bool = False):
    from sessions.store import Store

    return Store(db_path(args), readonly=readonly)


def _version(store, text: str) -> tuple[int, int]:
    """(episode, version id) of `EP`, `EP:N`, `EP:vN` or `EP:rN`; one line when there is none."""
    from react_editor.args import ArgError, whole_number
    from sessions.numbering import id_of, parse

    ep_text, sep, num = str(text).partition(":")
    try:
        episode = whole_number(ep_text, "episode")
        number = parse(num) if sep else None
    except (ArgError, ValueError):
        raise CliError(f"bad version reference {text!r}: use EP, EP:N or EP:rN (e.g. 3, 3:2 or 3:r1)") from None
    ep = store.episodes.get(episode)  # unknown episode: one line
    if number is None:
        if ep.current_version is None:
            raise CliError(f"episode {episode} has no version")
        return episode, ep.current_version
    return episode, id_of(store, episode, number)


def judgment_json(j, ref) -> dict[str, Any]:
    """A judgment with the versions as people type them (`ref_a`, `ref_b`); ids stay global."""
    return {
        **j.model_dump(mode="json"),
        "ref_a": ref(j.version_a, j.episode_id),
        "ref_b": ref(j.version_b, j.episode_id),
    }


def judgment_text(j, ref) -> str:
    a, b = ref(j.version_a, j.episode_id), ref(j.version_b, j.episode_id)
    verdict = "tie" if j.better == "tie" else f"{a if j.better == 'A' else b} is better"
    line = f"{a} vs {b}: {verdict} (by {j.annotator}, {j.created_at})"
    return line + (f"\n  reason: {j.reason}" if j.reason else "")


def cmd_judge(args: argparse.Namespace) -> int:
    if args.list or args.agreement:
        if args.refs or args.better or args.reason is not None or args.annotator is not None:
            raise CliError("--list and --agreement take no versions, --better, --reason or --annotator")
        return _report(args)
    if args.episode is not None:
        raise CliError("--episode goes with --list or --agreement")
    if len(args.refs) != 2:
        raise CliError(f"give two versions of one episode (EP:A EP:B), not {len(args.refs)}")
    if args.better is None:
        raise CliError("say which is better: --better A, --better B or --better tie")
    from sessions.annotations import current_user

    if args.annotator is not None and not args.annotator.strip():
        raise CliError("the annotator is empty: give a name with --annotator, or leave it out")
    annotator = current_user(args.annotator)
    store = _store(args)
    try:
        (ep_a, va), (ep_b, vb) = (_version(store, r) for r in args.refs)
        if ep_a != ep_b:
            raise CliError(
                f"{args.refs[0]} and {args.refs[1]} are versions of different episodes ({ep_a} and "
                f"{ep_b}): a judgment compares two versions of one episode"
            )
        if va == vb:
            raise CliError(f"{args.refs[0]} and {args.refs[1]} are the same version: give two different ones")
        j = store.judgments.add(va, vb, args.better, annotator, reason=args.reason)
        ref = version_refs(store)
        others = [o for o in store.judgments.of_pair(va, vb) if o.annotator != j.annotator]
        data = {**judgment_json(j, ref), "others": [judgment_json(o, ref) for o in others]}

        def text() -> str:
            lines = [judgment_text(j, ref)]
            lines += [
                f"  also: {o.annotator}: "
                + (
                    "tie"
                    if o.better == "tie"
                    else f"{ref(o.version_a if o.better == 'A' else o.version_b, o.episode_id)} is better"
                )
                for o in others
            ]
            return "\n".join(lines)

        emit(args, data, text)
    finally:
        store.close()
    return 0


def _report(args: argparse.Namespace) -> int:
    from trajectory.agreement import agreement, agreement_lines

    store = _store(args, readonly=True)
    try:
        if args.episode is not None:
            store.episodes.get(args.episode)  # unknown episode: one line
        judgments = store.judgments.list(args.episode)
        if args.list:
            ref = version_refs(store)
            emit(
                args,
                [judgment_json(j, ref) for j in judgments],
                lambda: "\n".join(judgment_text(j, ref) for j in judgments) or "(no judgments)",
            )
        else:
            a = agreement(judgments)
            emit(args, a.model_dump(mode="json"), lambda: "\n".join(agreement_lines(a)))
    finally:
        store.close()
    return 0
