"""The reading commands: show (a version's trajectory, or the exact prompt or request of its next
call), versions, episodes."""

from __future__ import annotations

import argparse
from typing import Any

from react_editor.command_run import CliError, add_common, db_path
from react_editor.episode_args import episode_ref, one_line, open_engine, open_reader, version_of
from react_editor.lazy_parser import env_kinds
from react_editor.output import emit, write_exact
from react_editor.paging import add_page_flags
from trajectory.records import OUTCOME_FILTERS
from trajectory.signals import SIGNALS, version_step_signals


def register_show(sub: argparse._SubParsersAction) -> None:
    """show."""
    p = add_common(sub.add_parser("show", help="a version's trajectory in the paper's format"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--prompt", action="store_true", help="print the exact prompt of the next model call")
    p.set_defaults(func=cmd_show)


def register_lists(sub: argparse._SubParsersAction) -> None:
    """versions, episodes."""
    p = add_common(sub.add_parser("versions", help="the versions of an episode"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--expand", action="store_true", help="list the versions of rollout groups one by one")
    add_page_flags(p, 100, "lines (with --json: versions)")
    p.set_defaults(func=cmd_versions)

    p = add_common(sub.add_parser("episodes", help="list episodes"))
    p.add_argument("--env", choices=env_kinds(), default=None)
    p.add_argument("--type", dest="task_type", default=None)
    p.add_argument("--outcome", choices=OUTCOME_FILTERS, default=None)
    p.add_argument("--edited", action="store_true", default=None)
    p.add_argument("--signal", choices=SIGNALS, default=None, help="only episodes whose current version carries it")
    p.add_argument("--all-versions", action="store_true", help="with --signal: any version carries it")
    add_page_flags(p, 50, "episodes")
    p.set_defaults(func=cmd_episodes)


def _step_json(s, signals: list[str] | None = None) -> dict[str, Any]:
    out = {
        "index": s.index,
        "thought": s.thought,
        "action": s.action,
        "observation": s.observation,
        "source": s.source,
        "done": s.done,
        "id": s.id,
        "signals": list(s.signals or []) if signals is None else signals,
    }
    if s.edit:
        out["edit"] = s.edit.model_dump(exclude_none=True)
    if getattr(s, "reasoning", None) is not None:  # (the conversation styles' parts, when a step has them)
        out["reasoning"] = s.reasoning
    if getattr(s, "tool_call", None) is not None:
        out["tool_call"] = s.tool_call.model_dump()
    if (getattr(s, "info", None) or {}).get("parse_error"):
        out["parse_error"] = s.info["parse_error"]
    return out


def _step_text(s) -> str:
    head = f"[{s.index}] ({s.source}{', edited' if s.edit else ''})"
    body = (
        f"think: {s.thought}"
        if s.action is None
        else (f"Thought: {s.thought}\n    Action: {s.action}" if s.thought else s.action)
    )
    return f"{head} {body}\n    -> {s.observation}"


def cmd_show(args: argparse.Namespace) -> int:
    from envs.registry import family

    engine = open_engine(args, readonly=True) if args.prompt else open_reader(args)
    vid = version_of(engine, args.episode, args.version)
    if args.prompt:
        text = engine.prompts.prompt(vid)
        if args.json:
            body = engine.prompts.request_body(vid)  # the conversation styles: the request's body
            emit(args, body if body is not None else {"prompt": text})
        else:
            write_exact(text)  # the bytes sent (escaped only on a terminal)
        return 0
    ep = engine.store.episodes.get(int(args.episode))
    v = engine.store.versions.get(vid)
    steps = engine.steps(v)
    data = [_step_json(s, sigs) for s, sigs in zip(steps, version_step_signals(steps, v.outcome))]
    emit(args, data, lambda: family(ep.task.env).transcript.render(ep.task.text, steps).rstrip("\n"))
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from agent.summary import version_summary
    from react_editor.paging import page_of, say_page
    from sessions import rollouts
    from sessions.numbering import labels as version_labels

    engine = open_reader(args)
    ep = engine.store.episodes.get(args.episode)
    member, labels = {}, {}
    if rollouts.groups(engine.store, args.episode):  # (rollout groups' labels: the rollouts module)
        from agent.rollouts import version_groups

        member, labels = version_groups(engine, args.episode)
    nums = version_labels(engine.store, args.episode)
    versions = engine.store.versions.of_episode(args.episode)
    # the page: with --json every version is an entry; in text a closed rollout group is one line
    # (--expand lists its versions under it). Only the page's versions are read in full.
    entries = _version_entries(versions, member, grouped=not args.json, expand=args.json or args.expand)
    shown, page = page_of(entries[args.offset :], args.limit, args.offset, len(entries))
    rows = [version_summary(engine, v) for v in shown if not isinstance(v, tuple)]
    for r in rows:
        r["current"] = r["version"] == ep.current_version
        r["group"] = member.get(r["version"])
        r["id"], r["label"] = r["version"], nums[r["version"]]
        r["number"] = int(r["label"][1:])

    from sessions.jobs import version_words

    words = version_words(engine.store, rows)  # running / stopped as the app and `jobs` say
    for r in rows:
        r["state"] = words[r["version"]]
    by_id = {r["version"]: r for r in rows}

    def line(r: dict, indent: str = "") -> str:
        state = r["state"]
        mark = "*" if r["current"] else " "
        parent = f"from {nums[r['parent_version']]}" if r["parent_version"] else "root"
        return f"{indent}{mark} {r['label']}\t{parent}\t{r['steps']} steps\t{state}\t{r['human_edits']} edits\t{r['name'] or ''}"

    def text() -> str:
        out = [
            f"  g{e[1]}\t{labels[e[1]]}"
            if isinstance(e, tuple)
            else line(by_id[e.id], "    " if e.id in member else "")
            for e in shown
        ]
        note = say_page(False, page, "lines")
        return "\n".join(out + ([note] if note else []))

    if args.json:
        say_page(True, page, "versions")
    emit(args, rows, text)
    return 0


def _version_entries(versions: list, member: dict, *, grouped: bool, expand: bool) -> list:
    """The versions listed: each version, and (`grouped`) a ("g", group) line before a rollout
    group's first version, its versions under it only with `expand`."""
    entries: list = []
    headed: set[int] = set()  # the groups whose line is in `entries` already
    for v in versions:
        g = member.get(v.id)
        if g is not None and grouped and g not in headed:
            headed.add(g)
            entries.append(("g", g))
        if expand or g is None:
            entries.append(v)
    return entries


def cmd_episodes(args: argparse.Namespace) -> int:
    from react_editor.paging import page_of, say_page
    from sessions.store import Store

    store = Store(db_path(args), readonly=True)
    among = None
    if args.signal:
        from sessions.search import episodes_with_signal

        among = episodes_with_signal(store, args.signal, all_versions=args.all_versions)
    elif args.all_versions:
        raise CliError("--all-versions goes with --signal")
    filters = dict(env=args.env, task_type=args.task_type, outcome=args.outcome, edited=args.edited, among=among)
    rows, page = page_of(
        store.episodes.list(**filters, limit=args.limit, offset=args.offset),
        args.limit,
        args.offset,
        store.episodes.count(**filters),
    )
    from sessions.jobs import version_words

    words = version_words(store, rows, key="current_version")  # the current version's, as the app says
    for r in rows:
        r["state"] = words.get(r["current_version"], "open")
    note = say_page(args.json, page, "episodes")
    emit(
        args,
        rows,
        lambda: (
            "\n".join(
                [
                    f"{r['episode']}\t{r['env']}\t{r['type'] or '-'}\t{r['state']}\t{r['versions']} versions\t{one_line(r['text'], 60)}"
                    for r in rows
                ]
                + ([note] if note else [])
            )
            or "(no episodes)"
        ),
    )
    return 0
