"""`react-editor experiment run|show|resume|list|compare`: batch runs scored like the
paper's Tables 1 and 3. Progress goes to stderr as a bar; `--json` prints one object last."""

from __future__ import annotations

import argparse
import sys

from react_editor.command_run import CliError, JobStopped, add_common, db_path
from react_editor.episode_args import config_from_args, env_option_flags, env_options_from, model_flags
from react_editor.lazy_parser import env_kinds
from react_editor.output import emit, progress
from react_editor.paging import add_page_flags, page_of, say_page


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="batch runs of a method over a task set (the paper's tables)")
    xsub = p.add_subparsers(dest="experiment_command", required=True, metavar="SUBCOMMAND")

    r = add_common(xsub.add_parser("run", help="create an experiment and run it"))
    r.add_argument("--env", required=True, choices=env_kinds())
    r.add_argument("--tasks", default="builtin", help="builtin (default), official, react, ID,ID,... or @FILE")
    r.add_argument("--source", default=None, help="where the ids of --tasks ID,ID/@FILE come from (default builtin)")
    r.add_argument("--split", default=None, help="ALFWorld split for --tasks official (default valid_unseen)")
    r.add_argument("--limit", type=int, default=None, help="keep the first N tasks")
    r.add_argument("--sample", default=None, help="N tasks drawn with --seed, or 'paper' (the notebooks' subset)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--name", default=None)
    r.add_argument("--method", default="react", help="react, act, standard, cot, cot-sc, react-cot-sc, cot-sc-react")
    r.add_argument("--samples", type=int, default=None, help="CoT-SC samples (default 21, at temperature 0.7)")
    _leak_flag(r)
    _batch_flags(r)
    env_option_flags(r)
    model_flags(r)
    r.set_defaults(func=cmd_run)

    r = add_common(
        xsub.add_parser("rerun", help="a new experiment on another's tasks with a change (e.g. --exemplars)")
    )
    r.add_argument("experiment", help="id or name of the source experiment")
    r.add_argument("--name", default=None)
    r.add_argument("--method", default=None, help="another method (default: the source's)")
    _leak_flag(r)
    _batch_flags(r)
    model_flags(r)
    r.set_defaults(func=cmd_rerun)

    s = add_common(xsub.add_parser("show", help="an experiment's scores and items"))
    s.add_argument("experiment", help="id or name")
    s.set_defaults(func=cmd_show)

    s = add_common(xsub.add_parser("resume", help="finish unfinished episodes and start the missing ones"))
    s.add_argument("experiment", help="id or name")
    _batch_flags(s)
    s.set_defaults(func=cmd_resume)

    s = add_common(xsub.add_parser("list", help="the experiments, oldest first"))
    add_page_flags(s, 50, "experiments")
    s.set_defaults(func=cmd_list)

    s = add_common(xsub.add_parser("compare", help="two experiments, paired over their common tasks"))
    s.add_argument("a", help="id or name")
    s.add_argument("b", help="id or name")
    s.add_argument(
        "--errors",
        choices=("failure", "exclude"),
        default="failure",
        help="a task that ended on an error: a failure in the paired test (default) or left out",
    )
    s.add_argument(
        "--include-leaked",
        action="store_true",
        help="keep in the paired test the tasks whose own trajectory was an exemplar (default: left out)",
    )
    s.set_defaults(func=cmd_compare)


def _leak_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--leave-out-leaked",
        action="store_true",
        help="leave out the tasks whose own trajectory is in the exemplar set (default: run them, warn)",
    )


def _batch_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, default=1, help="episodes at once (model calls dominate)")
    p.add_argument(
        "--processes",
        action="store_true",
        help="run episodes in worker processes instead of threads (CPU-heavy environments, many cores)",
    )


class Bar:
    """done/total, successes and ETA on one stderr line (redrawn in place on a terminal)."""

    def __init__(self, stream=None, width: int = 30):
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = ""
        self.note = ""  # e.g. that the runs queue for the built-in model

    def __call__(self, p) -> None:
        filled = int(self.width * p.done / p.total) if p.total else self.width
        eta = "--" if p.eta_s is None else _clock(p.eta_s)
        line = (
            f"[{'#' * filled}{'.' * (self.width - filled)}] {p.done}/{p.total} done, {p.success} ok"
            f"{f', {p.failed} failed' if p.failed else ''}, ETA {eta}{self.note}"
        )
        if line == self._last:
            return
        self._last = line
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._last:
            self.stream.write("\n")
            self.stream.flush()


def _clock(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _concurrency(n: int) -> int:
    if n < 1:
        raise CliError("--concurrency must be at least 1")
    return n


def _queue_note(args: argparse.Namespace, ref) -> str | None:
    """What to say when the experiment's episodes at once queue for the built-in model."""
    from agent.local_model import queue_note
    from sessions import experiments
    from sessions.store import Store

    if args.concurrency <= 1:
        return None
    try:
        return queue_note(experiments.get(Store(db_path(args), readonly=True), ref).config, args.concurrency)
    except Exception:  # (the run itself says what is wrong with the reference)
        return None


def _run(args: argparse.Namespace, ref) -> int:
    from agent import experiment_runner

    bar = Bar()
    note = _queue_note(args, ref)
    if note:
        progress(note)
        bar.note = " · one request at a time (built-in model)"
    try:
        out = experiment_runner.run(
            db_path(args),
            ref,
            concurrency=_concurrency(args.concurrency),
            on_progress=bar,
            mode="processes" if args.processes else "threads",
        )
    finally:
        bar.close()
    emit(args, out, lambda: _text(out))
    if out.get("status") == "stopped":  # Stop / `jobs stop N`: one exit code everywhere
        raise JobStopped(
            f"{out['done']}/{out['episodes']} episodes done; `react-editor experiment resume "
            f"{out.get('experiment', ref)}` continues it"
        )
    return 0 if out["done"] == out["episodes"] else 1


def cmd_run(args: argparse.Namespace) -> int:
    from agent import experiment
    from agent.methods import check_method
    from agent.run_settings import check_config
    from agent.task_selection import select_tasks
    from sessions.store import Store

    check_method(args.env, args.method)
    _concurrency(args.concurrency)
    tasks = select_tasks(
        args.env, args.tasks, source=args.source, limit=args.limit, sample=args.sample, seed=args.seed, split=args.split
    )
    config = config_from_args(args)  # checked in full below, before the experiment is written
    params = {
        "tasks": args.tasks,
        "source": args.source,
        "split": args.split,
        "limit": args.limit,
        "sample": args.sample,
        "seed": args.seed if args.sample not in (None, "paper") else None,
    }
    if args.samples is not None:
        params["samples"] = args.samples
    store = Store(db_path(args))
    try:
        check_config(config, args.env, store)
        tasks = _leak_check(store, config.exemplar_set, tasks, args.leave_out_leaked)
        exp = experiment.create(
            store,
            env=args.env,
            method=args.method,
            config=config,
            tasks=tasks,
            name=args.name,
            env_options=env_options_from(args),
            params={k: v for k, v in params.items() if v is not None},
        )
    finally:
        store.close()
    sys.stderr.write(f"experiment {exp.id} {exp.name!r}: {len(tasks)} tasks, {exp.method} on {exp.env}\n")
    return _run(args, exp.id)


def _leak_check(store, exemplar_set: str | None, tasks: list, leave_out: bool) -> list:
    """Warn on stderr about tasks the exemplar set holds a trajectory of; leave them out
    when asked (the experiment records the ones it keeps)."""
    from agent import leakage

    leaked = leakage.leaked_tasks(store, exemplar_set, tasks)
    if not leaked:
        return tasks
    what = "left out" if leave_out else "run anyway; `experiment compare` leaves them out of the paired test"
    sys.stderr.write(
        f"warning: exemplar set {exemplar_set!r} holds a trajectory of {len(leaked)} evaluated "
        f"task(s): {leakage.describe(leaked)} ({what})\n"
    )
    if not leave_out:
        return tasks
    out = {t.key for t in leaked}
    kept = [t for t in tasks if t.key not in out]
    if not kept:
        raise CliError("every task leaks: nothing left to run")
    return kept


def cmd_rerun(args: argparse.Namespace) -> int:
    from agent import experiment
    from agent.run_settings import check_config
    from react_editor.episode_args import model_changes
    from sessions import experiments
    from sessions.store import Store

    _concurrency(args.concurrency)
    store = Store(db_path(args))
    try:
        changes = model_changes(args)
        src = experiments.get(store, args.experiment)
        cfg = src.config.model_validate({**src.config.model_dump(), **changes})
        check_config(cfg, src.env, store)
        tasks = [it.task for it in experiments.items(store, src.id)]
        kept = _leak_check(store, cfg.exemplar_set, tasks, args.leave_out_leaked)
        exp = experiment.rerun(
            store, src.id, config=changes, method=args.method, name=args.name, leave_out_leaked=args.leave_out_leaked
        )
    finally:
        store.close()
    sys.stderr.write(f"experiment {exp.id} {exp.name!r}: re-run of {src.id} {src.name!r} on {len(kept)} tasks\n")
    return _run(args, exp.id)


def cmd_resume(args: argparse.Namespace) -> int:
    return _run(args, args.experiment)


def _with_store(args: argparse.Namespace, fn):
    from sessions.store import Store

    store = Store(db_path(args), create=False)
    try:
        return fn(store)
    finally:
        store.close()


def cmd_show(args: argparse.Namespace) -> int:
    from agent import experiment_scores

    out = _with_store(args, lambda st: experiment_scores.summary(st, args.experiment, with_items=True))
    emit(
        args,
        out,
        lambda: (
            _text(out)
            + "\n"
            + "\n".join(
                f"  {it['task']}\t{it['type'] or '-'}\tepisode {it['episode'] or '-'}\t"
                f"{'success' if it['success'] else ('failure' if it['done'] else it['status'])}"
                for it in out["items"]
            )
        ),
    )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from agent import experiment_scores
    from sessions import experiments

    def page(st):
        found = experiments.list_all(st)
        shown, pg = page_of(found[args.offset :], args.limit, args.offset, len(found))
        return [experiment_scores.summary(st, e.id) for e in shown], pg  # (a summary reads items: the page's only)

    rows, pg = _with_store(args, page)
    note = say_page(args.json, pg, "experiments")
    emit(args, rows, lambda: "\n".join([_text(r) for r in rows] + ([note] if note else [])) or "(no experiments)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from agent import experiment_scores

    out = _with_store(
        args,
        lambda st: experiment_scores.compare(
            st, args.a, args.b, errors=args.errors, include_leaked=args.include_leaked
        ),
    )
    emit(args, out, lambda: _compare_text(out))
    return 0


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _text(s: dict) -> str:
    rate = "-" if s["success_rate"] is None else f"{100 * s['success_rate']:.1f}%"
    extra = f", EM {_pct(s['em'])}, F1 {_pct(s['f1'])}" if "em" in s else ""
    scope = (
        f"PARTIAL: {s['done']} of {s['episodes']} tasks finished; rates over the finished"
        if s.get("partial")
        else f"{s['done']}/{s['episodes']} done"
    )
    return (
        f"experiment {s['experiment']} {s['name']!r} ({s['method']} on {s['env']}, {s['status']}): "
        f"{s['success']}/{s['done']} success ({rate}){extra}, {scope}, "
        f"{s['tokens']} tokens, ${s['cost']:.4f}, {s['wall_s']:.1f} s"
    )


def _p(x) -> str:
    from trajectory.numbers import p_text

    return p_text(x)[4:] if x is not None else "n/a"


def _effect(c: dict) -> str:
    """A - B in points, its 95% interval rounded outward, its p (`trajectory.numbers`)."""
    from trajectory.numbers import effect_text

    ci = None if c["diff_ci"][0] is None else c["diff_ci"]
    return effect_text(c["diff"], ci, c["p_value"], decimals=1, ci_label="95% CI")


def _compare_text(c: dict) -> str:
    """A and B over the paired tasks beside their difference, all in percentage points; the
    p that goes with the interval; the exact McNemar p on a line of its own."""
    why = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in c["excluded_why"].items() if n and k != "warning")
    e = c["errors"]
    rule = "counted as failures" if e["counted_as"] == "failure" else "left out (--errors exclude)"
    lines = [
        "A: " + _text(c["a"]),
        "B: " + _text(c["b"]),
        f"paired over {c['common']} tasks: A {_pct(c['a_rate'])}%, B {_pct(c['b_rate'])}% of these tasks; "
        f"both {c['both']}, A only {c['a_only']}, B only {c['b_only']}, neither {c['neither']}",
        f"difference A - B: {_effect(c)} ({c['p_method']})",
        f"exact McNemar p = {_p(c['mcnemar_p'])}",
        f"errors: A {e['a']}, B {e['b']} - {rule} in the paired test",
    ]
    typed = [(t, p) for t, p in c["by_type"].items() if p["n"]]
    if typed:
        lines.append(f"by task type (p adjusted by {c['by_type_adjustment']}):")
        lines += [f"  {t}: {_effect(p)}, Holm p = {_p(p['p_holm'])}" for t, p in typed]
    if c["excluded"]:
        lines.append(f"excluded {c['excluded']} task(s) listed in both: {why}")
    if c["excluded_why"].get("warning"):
        lines.append("warning: " + c["excluded_why"]["warning"])
    if c.get("leaked"):
        lines.append(
            f"leaked {len(c['leaked'])} task(s) (own trajectory an exemplar): {', '.join(c['leaked'])}; "
            + (
                "kept in the test (--include-leaked)"
                if c["leaked_included"]
                else "left out of the paired test (--include-leaked keeps them)"
            )
        )
    return "\n".join(lines)
