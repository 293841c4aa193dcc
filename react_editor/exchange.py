"""Export, import and labels: `export`, `import`, `annotate`, `tag` (exemplar sets:
`react_editor.exemplar_commands`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from react_editor.command_run import CliError, add_common, db_path, regular_file
from react_editor.lazy_parser import env_kinds
from react_editor.output import VisibleStream, emit, progress, version_ref


def register(sub: argparse._SubParsersAction) -> None:
    _register_files(sub)
    _register_labels(sub)


def _register_files(sub: argparse._SubParsersAction) -> None:
    """export, import."""
    p = add_common(sub.add_parser("export", help="export versions (or an exemplar set) to a file"))
    p.add_argument("refs", nargs="*", metavar="EPISODE[:VERSION]", help="versions: 12 (current), 12:34, 12:all")
    p.add_argument(
        "--format",
        "-f",
        required=True,
        choices=("prompt", "react-json", "jsonl", "chat-sft", "dpo", "kto", "steps"),
        help="chat-sft, dpo, kto, steps: training data in TRL's formats (docs/training-data.md)",
    )
    p.add_argument(
        "--out",
        "-o",
        required=True,
        help="output file ('-' for stdout); X.parquet writes Parquet; with --hf a new folder",
    )
    p.add_argument("--set", dest="exemplar_set", default=None, help="export this exemplar set (prompt / react-json)")
    p.add_argument("--key", action="append", default=None, help="only this prompt-file key (repeatable)")
    _filter_flags(p)
    _training_flags(p)
    p.set_defaults(func=cmd_export)

    p = add_common(sub.add_parser("import", help="import a ReAct prompt file, transcript or jsonl export"))
    p.add_argument("path")
    p.add_argument("--format", "-f", default="auto", choices=("auto", "react-json", "jsonl", "prompt", "chat-sft"))
    p.add_argument(
        "--env", choices=env_kinds(), default=None, help="environment of a prompt file / transcript / chat-sft file"
    )
    p.add_argument("--set", dest="set_name", default=None, help="name of the exemplar set a prompt file becomes")
    p.add_argument(
        "--source",
        default=None,
        choices=("builtin", "react", "official"),
        help="the dataset the transcripts' questions come from: their gold answers are taken from it "
        "(without it, imported tasks have no gold answer)",
    )
    p.add_argument("--by", default=None, help="who imports (default $REACT_EDITOR_USER or the OS user)")
    p.add_argument(
        "--as-new",
        action="store_true",
        help="copy episodes even when the same records were imported before (default: not again)",
    )
    p.set_defaults(func=cmd_import)


def _register_labels(sub: argparse._SubParsersAction) -> None:
    """annotate, tag."""
    p = add_common(sub.add_parser("annotate", help="label a version: verdict, failure modes, notes, exemplar-ready"))
    p.add_argument("ref", metavar="EPISODE[:VERSION]")
    p.add_argument("--verdict", choices=("success", "failure", "unsure", "none"), default=None)
    p.add_argument(
        "--failure-mode",
        "--mode",
        action="append",
        default=[],
        dest="add_modes",
        help="add a failure mode: reasoning_error, search_result_error, hallucination, label_ambiguity, "
        "repetitive_loop, invalid_action (repeatable)",
    )
    p.add_argument("--remove-mode", action="append", default=[], dest="remove_modes")
    p.add_argument("--clear-modes", action="store_true")
    p.add_argument("--note", "--notes", dest="notes", default=None, help="free notes (replaces the notes)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--exemplar-ready", dest="ready", action="store_true", default=None)
    g.add_argument("--not-exemplar-ready", dest="ready", action="store_false")
    p.add_argument("--by", default=None, help="annotator (default $REACT_EDITOR_USER or the OS user)")
    p.add_argument("--history", action="store_true", help="print every annotation of the version")
    p.set_defaults(func=cmd_annotate)

    p = add_common(sub.add_parser("tag", help="tag or note step K of a version"))
    p.add_argument("ref", metavar="EPISODE[:VERSION]")
    p.add_argument("--step", type=int, required=True, metavar="K")
    p.add_argument("--add", action="append", default=[], help="add a tag (e.g. hallucinated, good_subgoal)")
    p.add_argument("--remove", action="append", default=[], help="remove a tag")
    p.add_argument("--note", default=None)
    p.add_argument("--by", default=None)
    p.add_argument("--history", action="store_true")
    p.set_defaults(func=cmd_tag)


def _filter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env=, type=, outcome=, verdict=, annotator=, edited, exemplar_ready, versions=all",
    )
    p.add_argument("--env", choices=env_kinds(), default=None)
    p.add_argument("--type", dest="task_type", default=None, help="task type (prefix match)")
    p.add_argument("--outcome", choices=("success", "failure", "unfinished"), default=None)
    p.add_argument("--verdict", choices=("success", "failure", "unsure"), default=None)
    p.add_argument("--edited", action="store_true", help="only versions with a person's edits")
    p.add_argument("--exemplar-ready", action="store_true")
    p.add_argument("--annotator", default=None)
    p.add_argument(
        "--all-versions", action="store_true", help="every version of matched episodes, not only the current"
    )


def _training_flags(p: argparse.ArgumentParser) -> None:
    """The training formats' options (sessions.exchange.training_options)."""
    g = p.add_argument_group("training formats (chat-sft, dpo, kto, steps)")
    g.add_argument("--hf", action="store_true", help="save a `datasets` dataset with its card to the folder --out")
    g.add_argument(
        "--continuation",
        choices=("step", "rest"),
        default="rest",
        help="dpo: the one differing step, or the rest of each branch (default)",
    )
    g.add_argument("--implicit-prompt", action="store_true", help="dpo: the prompt inside chosen and rejected")
    g.add_argument("--unit", choices=("trajectory", "step"), default="trajectory", help="kto: a label per ...")
    g.add_argument(
        "--exclude-experiment",
        action="append",
        default=[],
        metavar="NAME",
        help="leave out every task this experiment evaluates (repeatable)",
    )
    g.add_argument("--proven-only", action="store_true", help="dpo: only pairs a what-if proved")
    g.add_argument(
        "--min-effect",
        type=float,
        default=None,
        metavar="X",
        help="dpo: only pairs a what-if proved with an effect of at least X (a difference of success rates)",
    )


def _training_options(args: argparse.Namespace):
    from sessions.exchange.training_options import TrainingOptions

    return TrainingOptions(
        continuation=args.continuation,
        implicit_prompt=args.implicit_prompt,
        unit=args.unit,
        exclude_experiments=tuple(args.exclude_experiment),
        proven_only=args.proven_only,
        min_effect=args.min_effect,
    ).check()


def _store(args: argparse.Namespace, *, readonly: bool = False):
    """`readonly` for reading commands: they work on a database they cannot write."""
    from sessions.store import Store

    return Store(db_path(args), readonly=readonly)


def _filters(args: argparse.Namespace):
    from sessions.exchange import Filters

    return Filters.parse(
        args.filter,
        env=args.env,
        task_type=args.task_type,
        outcome=args.outcome,
        verdict=args.verdict,
        edited=args.edited,
        exemplar_ready=args.exemplar_ready,
        annotator=args.annotator,
        all_versions=args.all_versions,
    )


def _has_filters(args: argparse.Namespace) -> bool:
    return bool(
        args.filter
        or args.env
        or args.task_type
        or args.outcome
        or args.verdict
        or args.edited
        or args.exemplar_ready
        or args.annotator
        or args.all_versions
    )


def _version(store, spec: str) -> int:
    from sessions.exchange import parse_ref
    from sessions.exchange.selection import resolve

    r = parse_ref(spec)
    if r.all:
        raise CliError(f"{spec}: give one version (EPISODE or EPISODE:VERSION)")
    ep = store.episodes.get(r.episode)
    if r.version is None:
        if ep.current_version is None:
            raise CliError(f"episode {r.episode} has no version")
        return ep.current_version
    return resolve(store, r).version


# ---------------------------------------------------------------------- export / import


def cmd_export(args: argparse.Namespace) -> int:
    from sessions.exchange import export, parse_ref
    from sessions.exchange.training import TRAINING_FORMATS

    store = _store(args, readonly=True)
    refs = [parse_ref(s) for s in args.refs]
    if args.exemplar_set is None and not refs and not _has_filters(args):
        raise CliError("choose what to export: EPISODE[:VERSION] ..., filters (e.g. --env alfworld), or --set NAME")
    filters = _filters(args) if (refs or _has_filters(args)) else None
    out = VisibleStream(sys.stdout) if args.out == "-" and sys.stdout.isatty() else args.out
    report = export(
        store,
        args.format,
        out,
        refs=refs or None,
        filters=filters,
        exemplar_set=args.exemplar_set,
        keys=args.key,
        options=_training_options(args),
        hf=args.hf,
        source=db_path(args),
    )
    for s in report.skipped:
        progress(f"skipped {s}")
    if report.format in TRAINING_FORMATS:
        left = sum(report.left_out.values())
        lines = [
            f"{report.path}: wrote {report.records} record{'s' if report.records != 1 else ''} ({report.output}, {report.bytes:,} bytes); left out {left}"
        ]
        lines += [f"  left out {n}: {why}" for why, n in sorted(report.left_out.items(), key=lambda x: (-x[1], x[0]))]
        if args.out == "-":
            for line in lines:
                progress(line)
            return 0
        emit(args, report.as_json(), "\n".join(lines))
        return 0
    if args.out == "-":
        progress(f"{report.records} records, {report.versions} versions")
        return 0
    emit(
        args,
        report.as_json(),
        f"{report.path}: {report.records} records ({report.versions} versions, "
        f"{report.episodes} episodes, {report.steps} steps, {report.bytes:,} bytes)",
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from sessions.exchange import import_file

    find = None
    if args.source:
        from agent.task_selection import task_finder

        find = task_finder(args.source)
    regular_file(args.path, "import file")  # a FIFO would block the command
    report = import_file(
        _store(args),
        args.path,
        fmt=args.format,
        env=args.env,
        set_name=args.set_name,
        by=args.by,
        find_task=find,
        as_new=args.as_new,
    )
    if report.already_present:
        progress(
            f"{len(report.already_present)} episode(s) already here with the same records, not imported again: "
            f"{' '.join(map(str, report.already_present))} (--as-new to copy them)"
        )

    def text() -> str:
        out = f"{report.path}: {len(report.episodes)} episodes ({report.versions} versions, {report.steps} steps)"
        if report.exemplar_set:
            out += f"; exemplar set {report.exemplar_set!r}"
            if report.raw_entries:
                out += f" (+{report.raw_entries} text entries)"
        ids = " ".join(str(i) for i in report.episodes)
        return out + (f"\nepisodes: {ids}" if ids else "")

    emit(args, report.as_json(), text)
    return 0


# ---------------------------------------------------------------------- annotations


def _va_json(a, ref: str) -> dict[str, Any]:
    """The annotation; `version_id` the global id, `ref` the EP:N people type."""
    return {**a.model_dump(mode="json"), "ref": ref}


def cmd_annotate(args: argparse.Namespace) -> int:
    from sessions import annotations

    store = _store(args)
    vid = _version(store, args.ref)
    change: dict[str, Any] = {}
    if args.verdict is not None:
        change["verdict"] = None if args.verdict == "none" else args.verdict
    if args.clear_modes:
        change["failure_modes"] = []
    if args.notes is not None:
        change["notes"] = args.notes
    if args.ready is not None:
        change["exemplar_ready"] = args.ready
    if change or args.add_modes or args.remove_modes:
        a = annotations.annotate_version(
            store, vid, by=args.by, add_failure_modes=args.add_modes, remove_failure_modes=args.remove_modes, **change
        )
    else:
        a = annotations.version_annotation(store, vid)
    ref = version_ref(store, vid)
    if args.history:
        rows = [_va_json(x, ref) for x in annotations.version_history(store, vid)]
        emit(
            args,
            rows,
            lambda: "\n".join(_va_text(x, ref) for x in annotations.version_history(store, vid)) or "(no annotations)",
        )
        return 0
    emit(
        args,
        _va_json(a, ref) if a else {"version_id": vid, "ref": ref},
        lambda: _va_text(a, ref) if a else f"{ref}: no annotations",
    )
    return 0


def _va_text(a, ref: str) -> str:
    modes = ", ".join(a.failure_modes) or "-"
    ready = "exemplar-ready" if a.exemplar_ready else "not exemplar-ready"
    return f"{ref}: verdict {a.verdict or '-'}; failure modes {modes}; {ready}; by {a.annotator} at {a.created_at}" + (
        f"\n  notes: {a.notes}" if a.notes else ""
    )


def cmd_tag(args: argparse.Namespace) -> int:
    from sessions import annotations

    store = _store(args)
    vid = _version(store, args.ref)
    steps = store.versions.steps(vid)
    if not 1 <= args.step <= len(steps):
        raise CliError(f"{version_ref(store, vid)} has no step {args.step} (it has {len(steps)})")
    sid = steps[args.step - 1].id
    if args.add or args.remove or args.note is not None:
        kw: dict[str, Any] = {"add": args.add, "remove": args.remove}
        if args.note is not None:
            kw["note"] = args.note
        a = annotations.tag_step(store, sid, by=args.by, **kw)
    else:
        a = annotations.step_annotation(store, sid)
    if args.history:
        hist = annotations.step_history(store, sid)
        emit(
            args,
            [x.model_dump(mode="json") for x in hist],
            lambda: (
                "\n".join(
                    f"{x.created_at} {x.annotator}: {', '.join(x.tags) or '-'}" + (f" ({x.note})" if x.note else "")
                    for x in hist
                )
                or "(no tags)"
            ),
        )
        return 0
    data = a.model_dump(mode="json") if a else {"step_id": sid, "tags": []}
    emit(
        args,
        data,
        lambda: (
            f"step {args.step}: {', '.join(a.tags) or '-'}" + (f"; note: {a.note}" if a and a.note else "")
            if a
            else f"step {args.step}: no tags"
        ),
    )
    return 0
