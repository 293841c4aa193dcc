"""`resample` and `whatif`: N rollouts from step K of a version, without and with an edit,
and the effect of the edit with its interval. Rerunning a command continues it."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any

from react_editor.command_run import CliError, JobStopped, add_common, run_job
from react_editor.episode_args import check_model_flags, model_flags, open_engine, version_of
from react_editor.output import emit, progress, rollout_progress, version_ref, version_refs


def register(sub: argparse._SubParsersAction) -> None:
    p = add_common(sub.add_parser("resample", help="N rollouts that let the model rewrite step K onwards"))
    p.add_argument("episode", type=int)
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--step", type=int, required=True, metavar="K")
    _rollout_flags(p)
    p.set_defaults(func=cmd_resample)

    p = add_common(sub.add_parser("whatif", help="the effect of an edit at step K: control vs treatment rollouts"))
    p.add_argument("episode", type=int, nargs="?", help="the episode (or --experiment)")
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--step", type=int, default=None, metavar="K")
    p.add_argument("--experiment", default=None, metavar="EXP", help="apply the edit to the episodes of an experiment")
    p.add_argument("--where", choices=("failed",), default=None, help="with --experiment: only its failed episodes")
    p.add_argument(
        "--at",
        default=None,
        metavar="K|first:REGEX",
        help="step K, or the first step whose action/observation matches REGEX",
    )
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--thought", help="rewrite the thought of step K")
    g.add_argument("--delete-thought", action="store_true", help="delete the thought of step K")
    g.add_argument("--insert-thought", metavar="TEXT", help="insert a thought (a hint) at step K")
    g.add_argument("--action", help="rewrite the action of step K (the environment runs it)")
    _rollout_flags(p)
    p.set_defaults(func=cmd_whatif)


def _rollout_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, required=True, metavar="N", help="rollouts per group (1..1000)")
    p.add_argument("--concurrency", type=int, default=4, metavar="C", help="rollouts at once (default 4)")
    model_flags(p)  # --temperature and --max-steps apply to the rollouts only


# ---------------------------------------------------------------------- helpers


def _settings(args: argparse.Namespace, engine, vid: int) -> dict[str, Any]:
    """The model flags besides --temperature and --max-steps (model, endpoint, ...): the
    rollouts run with them and pin them; the source version keeps its own."""
    changes = check_model_flags(args, engine, vid)
    return {k: v for k, v in changes.items() if k not in ("temperature", "max_steps")}


def _prepare(args: argparse.Namespace) -> tuple[Any, int, dict[str, Any]]:
    from agent.local_model import queue_note

    engine = open_engine(args)
    vid = version_of(engine, args.episode, args.version)
    settings = _settings(args, engine, vid)
    note = queue_note(engine.store.versions.config(vid).model_copy(update=settings), args.concurrency)
    if note:  # the rollouts at once queue for the built-in model: said, not hidden in their timings
        progress(note)
    if "base_url" not in settings:  # an imported episode's unconfirmed endpoint: one line before any rollout
        engine.envs.check_endpoint(vid)
    return engine, vid, settings


def _edit(args: argparse.Namespace):
    from sessions.rollouts import RolloutEdit

    if args.thought is not None:
        return RolloutEdit(kind="rewrite_thought", text=args.thought)
    if args.delete_thought:
        return RolloutEdit(kind="delete_thought")
    if args.insert_thought is not None:
        return RolloutEdit(kind="insert_thought", text=args.insert_thought)
    return RolloutEdit(kind="rewrite_action", text=args.action)


@contextmanager
def _ctrl_c_stops(stop: threading.Event):
    """Ctrl-C stops the rollouts after their current step (they are kept and a rerun
    continues them) instead of waiting for them to finish."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    old = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, old)


def _as_job(engine, kind: str, work, **row):
    """The rollouts as a job of the database (`react-editor jobs` lists it, `jobs stop N`
    stops it); its stop event is the one Ctrl-C sets. Stopped: one line, exit 130."""
    if "version_id" in row:
        row["episode_id"] = engine.store.versions.get(row["version_id"]).episode_id
    return run_job(engine.store, kind, work, _stopped, **row)


def _stopped(result) -> str:
    """What a stopped rollouts command keeps, and how to go on."""
    run = result[1] if isinstance(result, tuple) else result
    if not hasattr(run, "stats"):
        return "the finished rollouts are kept - run the same command again to continue"
    failed = f" ({len(run.errors)} failed)" if run.errors else ""
    return (
        f"{sum(s.n for s in run.stats)} finished rollout(s) are kept{failed} - run the same command again to continue"
    )


def _kw(args: argparse.Namespace, stop: threading.Event, h) -> dict[str, Any]:
    """Runner options: the job's Stop (checked in the database before each step, as a run's;
    the cancel of every call in flight); progress only on a terminal (when not watched,
    stderr stays one line: the error, if any)."""
    return {
        "concurrency": args.concurrency,
        "on_progress": rollout_progress(h),
        "stop": stop,
        "should_stop": h.sync_stop,
        "on_retry": h.on_retry,
    }


def _check(run) -> None:
    """Warnings, then one line: stopped (exit 130, whatever failed meanwhile), or the error
    when rollouts failed."""
    for w in run.warnings:
        progress(f"warning: {w}")
    if run.stopped:
        raise JobStopped(_stopped(run))
    run.check()


def _rate(stats) -> str:
    if not stats.n:
        return "no finished rollouts"
    lo, hi = stats.ci95
    return f"{stats.success}/{stats.n} success ({stats.rate:.0%}, 95% CI {lo:.0%}-{hi:.0%})"


def _effect_line(effect) -> str:
    """The effect in points with its interval (bounds rounded outward) and the p of the same
    procedure, named (`trajectory.numbers.effect_text`, as the app prints it)."""
    from trajectory.numbers import effect_text

    return f"effect:    {effect_text(effect.effect, effect.ci95, effect.p_value, ci_label='95% CI')} ({effect.method})"


def _effect_text(effect) -> str:
    return f"control:   {_rate(effect.control)}\ntreatment: {_rate(effect.treatment)}\n" + _effect_line(effect)


def _pooled_text(pool) -> str:
    """A pooled what-if: summed arms as counts only (an interval over them would read as one
    sample and can contradict the stratified effect: Simpson's paradox)."""
    c, t = pool.control, pool.treatment
    return (
        f"pooled over {pool.episodes} episodes, stratified by episode (summed counts, no interval: "
        f"control {c.success}/{c.n}, treatment {t.success}/{t.n}):\n" + _effect_line(pool)
    )


# ---------------------------------------------------------------------- commands


def cmd_resample(args: argparse.Namespace) -> int:
    from agent.rollouts import Request, check_n, resample

    check_n(args.n)
    engine, vid, settings = _prepare(args)

    def work(h):
        with _ctrl_c_stops(h.stop) as stop:
            return resample(
                engine,
                Request(vid, args.step, args.n, args.temperature, args.max_steps, settings=settings),
                **_kw(args, stop, h),
            )

    ref = version_ref(engine.store, vid)  # (EP:N, as people type it)
    run = _as_job(engine, "resample", work, version_id=vid, target=f"resample @{args.step} of {ref}")
    _check(run)
    stats = run.stats[0]

    def text() -> str:
        lines = [f"resample @{args.step} of {ref}: {_rate(stats)}", "first step:"]
        lines += [f"  {f['count']}x {f['text']}" for f in stats.first]
        return "\n".join(lines)

    emit(args, stats.as_json(first=True), text)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    from agent.rollouts import Request, check_n, whatif

    check_n(args.n)
    if args.experiment is not None:
        return _whatif_experiment(args)
    if args.episode is None:
        raise CliError("give an episode, or --experiment EXP")
    if args.where is not None:
        raise CliError("--where is for --experiment")
    engine, vid, settings = _prepare(args)
    k = _step(args, engine, vid)

    def work(h):
        with _ctrl_c_stops(h.stop) as stop:
            return whatif(
                engine,
                Request(vid, k, args.n, args.temperature, args.max_steps, _edit(args), settings),
                **_kw(args, stop, h),
            )

    effect, run = _as_job(
        engine, "whatif", work, version_id=vid, target=f"what-if @{k} of {version_ref(engine.store, vid)}"
    )
    _check(run)
    emit(args, effect.as_json(), lambda: _effect_text(effect))
    return 0


def _step(args: argparse.Namespace, engine, vid: int) -> int:
    from agent.rollouts import resolve_at

    if (args.step is None) == (args.at is None):
        raise CliError("give the step: --step K (or --at K|first:REGEX)")
    if args.step is not None:
        return args.step
    k = resolve_at(engine, vid, args.at)
    if k is None:
        raise CliError(f"no step of version {version_ref(engine.store, vid)} matches {args.at[len('first:') :][:60]!r}")
    return k


def _whatif_experiment(args: argparse.Namespace) -> int:
    from agent.rollout_stats import RolloutError, pooled
    from agent.rollouts import experiment_versions, whatif_many

    if args.episode is not None or args.version is not None or args.step is not None:
        raise CliError("with --experiment, give --at (not an episode, --version or --step)")
    if args.at is None:
        raise CliError("with --experiment, give --at K or --at first:REGEX")
    engine = open_engine(args)
    items = experiment_versions(engine.store, args.experiment, failed_only=args.where == "failed")
    if not items:
        raise CliError(f"experiment {args.experiment!r} has no {'failed ' if args.where else ''}episodes")
    settings = _settings(args, engine, items[0][1])  # one config for every episode of the experiment

    def report(item) -> None:
        if sys.stderr.isatty():
            progress(f"episode {item.episode}: {item.skipped or 'done'}")

    def work(h):
        with _ctrl_c_stops(h.stop) as stop:
            return whatif_many(
                engine,
                items,
                args.at,
                _edit(args),
                args.n,
                temperature=args.temperature,
                max_steps=args.max_steps,
                settings=settings,
                on_episode=report,
                **_kw(args, stop, h),
            )

    results = _as_job(
        engine,
        "whatif",
        work,
        target=f"what-if over the {'failures' if args.where else 'episodes'} of {args.experiment}",
    )
    ran = [r.effect for r in results if r.effect is not None]
    try:
        pool, why = pooled(ran), None
    except RolloutError as exc:
        pool, why = None, str(exc)
    data = {"episodes": [r.as_json() for r in results], "pooled": pool.as_json() if pool else None}
    if why:
        data["not_pooled"] = why

    ref = version_refs(engine.store)

    def text() -> str:
        lines = [
            f"{ref(r.version, r.episode)} @{r.k}: " + (r.skipped or _effect_text(r.effect).replace("\n", "; "))
            for r in results
        ]
        return "\n".join(lines + [_pooled_text(pool) if pool else f"not pooled: {why}"])

    emit(args, data, text)
    return 0
