"""`react-editor jobs [--json]`: the running and recent jobs of the database (the app's
and every CLI process's); `react-editor jobs stop N`: stop one, wherever it runs."""

from __future__ import annotations

import argparse

from react_editor.command_run import CliError, add_common, db_path
from react_editor.output import emit, version_refs, visible
from react_editor.paging import add_page_flags, page_of, say_page


def register(sub: argparse._SubParsersAction) -> None:
    p = add_common(
        sub.add_parser(
            "jobs", help="running and recent jobs (steps, runs, rollouts, experiments); `jobs stop N` stops one"
        )
    )
    add_page_flags(p, 20, "jobs")
    jsub = p.add_subparsers(dest="jobs_command", required=False, metavar="SUBCOMMAND")
    s = add_common(jsub.add_parser("stop", help="stop job N (its model calls in flight are cancelled)"))
    s.add_argument("job", type=int, help="the job's number (first column of `react-editor jobs`)")
    p.set_defaults(func=cmd_jobs)
    s.set_defaults(func=cmd_stop)


def _store(args: argparse.Namespace, *, readonly: bool):
    from sessions.store import Store

    return Store(db_path(args), create=False, readonly=readonly)


ON_A_VERSION = ("step", "run", "edit-and-resume")  # their target is the version they work on now


def _line(j, ref: str | None) -> str:
    progress = f"{j.done}/{j.total}" if j.total else (str(j.done) if j.done else "-")
    what = (ref if j.kind in ON_A_VERSION else None) or j.target or ref or "-"
    tail = f"  ({j.error})" if j.error else ""
    return visible(f"{j.id}\t{j.kind}\t{j.state}\t{progress}\t{what}\t{j.owner}\t{j.updated_at}{tail}")


def _refs(store, found) -> dict[int, str]:
    """EP:N of each job's version (the per-episode number people type; --json keeps the id)."""
    ref = version_refs(store)
    return {j.id: ref(j.version_id, j.episode_id) for j in found if j.version_id is not None}


def cmd_jobs(args: argparse.Namespace) -> int:
    import sessions.jobs

    store = _store(args, readonly=False)
    try:
        listed = sessions.jobs.listing(store, recent=args.offset + args.limit)  # active ones first, then the newest
        found, page = page_of(listed[args.offset :], args.limit, args.offset, sessions.jobs.count(store))
        refs = _refs(store, found)
    finally:
        store.close()
    note = say_page(args.json, page, "jobs")
    emit(
        args,
        [{**j.as_json(), "ref": refs.get(j.id)} for j in found],
        lambda: (
            "\n".join(
                ["id\tkind\tstate\tprogress\ttarget\towner\tupdated"]
                + [_line(j, refs.get(j.id)) for j in found]
                + ([note] if note else [])
            )
            if found
            else (note or "(no jobs)")
        ),
    )
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    import sessions.jobs  # (the flag on the row: no runner here; no model client to load)
    from sessions.store import StoreError

    store = _store(args, readonly=False)
    try:
        try:
            before = sessions.jobs.get(store, args.job)
        except StoreError:
            raise CliError(f"unknown job {args.job} (see `react-editor jobs`)") from None
        if not before.active:
            raise CliError(f"job {args.job} is not running (it is {before.state})")
        job = sessions.jobs.request_stop(store, args.job)
    finally:
        store.close()
    emit(args, job.as_json(), f"job {job.id} ({job.kind}) is stopping: its model calls in flight are cancelled")
    return 0
