"""The model-running commands: run (start an episode and run it), resume, step (by the model or by a person)."""

from __future__ import annotations

import argparse

from react_editor.command_run import CliError, JobStopped, add_common
from react_editor.episode_args import (
    check_model_flags,
    config_from_args,
    custom_task,
    custom_task_flags,
    env_option_flags,
    env_options_from,
    episode_ref,
    model_flags,
    one_line,
    open_engine,
    ref_text,
    version_label,
    version_number,
    version_of,
)
from react_editor.lazy_parser import env_kinds, later
from react_editor.output import emit, progress
from react_editor.show_commands import _step_json, _step_text
from trajectory.signals import version_step_signals


def register(sub: argparse._SubParsersAction) -> None:
    """run, resume, step."""
    p = add_common(sub.add_parser("run", help="start an episode and run it"))
    later(p, _run_args)  # (its flags ask every family)

    p = add_common(sub.add_parser("resume", help="continue a version"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--version", type=int, default=None, help="a version's global id (its `id` in --json)")
    p.add_argument(
        "--until",
        action="append",
        default=[],
        metavar="COND",
        help="stop at the first step where COND holds: signal:NAME, 'obs:/REGEX/', 'action:/REGEX/', "
        "step:K (may be repeated: the first that holds stops the run)",
    )
    model_flags(p)
    p.set_defaults(func=cmd_resume)

    p = add_common(sub.add_parser("step", help="one step of a version, by the model or by you (--thought/--action)"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--thought", default=None, help="human mode: the thought to write")
    p.add_argument("--action", default=None, help="human mode: the action to take")
    model_flags(p, steps=False)
    p.set_defaults(func=cmd_step)


def _run_args(p: argparse.ArgumentParser) -> None:
    """`run`'s flags: the task, a custom task's inputs and the episode options of every family."""
    p.add_argument("--env", required=True, choices=env_kinds())
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--task", help="task id (see `react-editor tasks`)")
    custom_task_flags(p, g)
    p.add_argument("--source", default="builtin", help="where --task comes from (builtin, official, react)")
    env_option_flags(p)
    p.add_argument("--name", default=None, help="a name for the episode")
    p.add_argument("--human", action="store_true", help="create the episode without running the model")
    model_flags(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from envs.registry import family

    fam = family(args.env)
    task = fam.get_task(args.task, source=args.source) if args.task else custom_task(args, fam)
    config = config_from_args(args)
    engine = open_engine(args)
    episode, version = engine.start_episode(task, config, env_options_from(args), name=args.name)
    progress(f"episode {episode.id}, v1: {one_line(task.text, 80)}")
    if args.human:
        emit(
            args,
            {"episode": episode.id, "version": version.id, "number": 1, "done": False, "success": None, "steps": 0},
            f"episode {episode.id} v1: 0 steps, open (take a step: react-editor step {episode.id}:1 --action ...)",
        )
        return 0
    return _run(args, engine, version.id, None)


def _run(args: argparse.Namespace, engine, version_id: int, max_new: int | None, until: list | None = None) -> int:
    from agent.stop_conditions import first_hit

    hit: list = []

    def on_step(rep) -> None:
        if rep.notice:
            progress(_notice(engine, rep))
        for call in rep.calls:
            if call.cut_from:
                progress(
                    f"  the model's completion was cut to {len(call.completion or ''):,} characters "
                    f"(it had {call.cut_from:,})"
                )
        for s in rep.steps:
            what = f"think: {s.thought}" if s.action is None else s.action
            progress(f"  step {s.index}: {one_line(what, 70)} -> {one_line(s.observation or '', 60)}")
        if (
            until
            and not hit
            and (found := first_hit(until, rep.steps, version_step_signals(rep.steps, rep.version.outcome)))
        ):
            hit.append(found)
            progress(f"stopped at step {found[1].index}: {found[0].describe()} ({found[0].spec})")

    report = _run_job(engine, version_id, max_new, on_step, lambda: bool(hit))
    if report.error:
        progress(f"stopped by an error: {report.error}")
    out = {**report.as_json(), "number": version_number(engine, report.version)}
    if hit:
        out["until"] = {"condition": hit[0][0].spec, "step": hit[0][1].index}
    emit(args, out, lambda: _run_text(engine, report, hit))
    if report.stopped and not hit and not report.error:  # Stop / `jobs stop N`: one exit code everywhere
        raise JobStopped(
            f"episode {report.episode}: {report.added} new step(s) kept; "
            f"`react-editor resume {report.episode}` continues it"
        )
    return 1 if report.error else 0


def _run_job(engine, version_id: int, max_new: int | None, on_step, until=lambda: False):
    """The run as a job of the database: `react-editor jobs` lists it, `jobs stop N` stops
    it between two steps (Ctrl-C ends it "stopped")."""
    from agent import jobs

    ep = engine.store.versions.get(version_id).episode_id

    def work(h):
        def step(rep) -> None:
            h.progress(done=h.done_n + len(rep.steps), version_id=rep.version.id)
            on_step(rep)

        # the stop flag as the database holds it, before each step (one read): `jobs stop N` ends the
        # run within the model call in flight, not at the next heartbeat
        return engine.run(
            version_id, max_steps=max_new, on_step=step, should_stop=lambda: h.sync_stop() or until(), watch=h.watch()
        )

    return jobs.run_here(
        engine.store,
        "run",
        work,
        episode_id=ep,
        version_id=version_id,
        target=f"episode {ep} {version_label(engine, version_id)}",
    )


def _notice(engine, rep) -> str:
    """The frozen notice in the command line's words: `version 3:1 is frozen (annotated);
    continuing in new version 3:2`."""
    from agent.engine_reports import FROZEN

    return (
        f"version {ref_text(engine, rep.continued_from)} is frozen ({FROZEN[rep.frozen]}); "
        f"continuing in new version {ref_text(engine, rep.version.id)}"
    )


def _run_text(engine, report, hit: list | None = None) -> str:
    state = "unfinished" if not report.done else ("success" if report.success else "failure")
    if hit:
        state += f", stopped at step {hit[0][1].index} ({hit[0][0].spec})"
    return f"episode {report.episode} {version_label(engine, report.version)}: {report.steps} steps, {state}"


def cmd_resume(args: argparse.Namespace) -> int:
    from agent.stop_conditions import ConditionError, parse_all

    try:
        until = parse_all(args.until)
    except ConditionError as exc:
        raise CliError(str(exc)) from None
    engine = open_engine(args)
    vid = version_of(engine, args.episode, args.version)
    _check_max_steps(engine, vid, args.max_steps)
    vid = _apply_model_flags(engine, vid, args)
    engine.envs.check_endpoint(vid)
    return _run(args, engine, vid, None, until)


def _check_max_steps(engine, vid: int, max_steps: int | None) -> None:
    """`--max-steps` counts every step of the version: one at or below its step count
    would make a child that cannot step (and keeps the low limit): refused, nothing written."""
    if max_steps is None:
        return
    have = len(engine.steps(engine.store.versions.get(vid)))
    if max_steps <= have:
        raise CliError(
            f"{ref_text(engine, vid)} already has {have} steps: --max-steps counts every step, "
            f"so give more than {have} (e.g. --max-steps {have + 10})"
        )


def _apply_model_flags(engine, vid: int, args: argparse.Namespace) -> int:
    """Model flags given to resume/step apply to the steps that follow: a new child
    version runs with them (the version keeps the config it ran with, so its prompt and
    record stay true). Returns the version to continue."""
    changes = check_model_flags(args, engine, vid)
    if changes:  # the endpoint the child would call (an unconfirmed import's): refused before it is written
        engine.envs.check_endpoint(vid, config_from_args(args, engine.store.versions.config(vid)))
    new = engine.editor.reconfigure(vid, changes) if changes else None
    if new is None or new.id == vid:
        return vid
    progress(
        f"version {ref_text(engine, vid)} keeps the settings it ran with; continuing in new version "
        f"{ref_text(engine, new.id)}"
    )
    return new.id


def cmd_step(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    vid = version_of(engine, args.episode, args.version)
    if args.thought is not None or args.action is not None:
        rep = engine.human_step(vid, thought=args.thought, action=args.action)
    else:
        rep = engine.step(_apply_model_flags(engine, vid, args))
    if rep.notice:
        progress(_notice(engine, rep))
    signals = version_step_signals(rep.steps, rep.version.outcome)
    data = {
        "episode": int(args.episode),
        "version": rep.version.id,
        "number": version_number(engine, rep.version.id),
        "done": rep.done,
        "steps": [_step_json(s, sigs) for s, sigs in zip(rep.steps, signals)],
    }
    emit(args, data, lambda: "\n".join(_step_text(s) for s in rep.steps))
    return 0
