"""Core commands: tasks, run, resume, step, show, versions, edit, branch, episodes, data."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from react_editor.command_run import CliError, JobStopped, add_common, db_path
from react_editor.lazy_parser import env_kinds, later
from react_editor.output import emit, progress, version_ref, write_exact
from react_editor.args import retry_count, seconds
from react_editor.model import local_changes, local_model_flag, local_timeout, use_local_model
from react_editor.paging import add_page_flags
from trajectory.records import OUTCOME_FILTERS, AgentConfig
from trajectory.signals import SIGNALS, version_step_signals


def register(sub: argparse._SubParsersAction) -> None:
    _register_runs(sub)
    _register_versions(sub)


def _register_runs(sub: argparse._SubParsersAction) -> None:
    """tasks, run, resume, step, show."""
    p = add_common(sub.add_parser("tasks", help="list the tasks of an environment"))
    p.add_argument("--env", required=True, choices=env_kinds())
    p.add_argument("--source", default="builtin",
                   help="builtin (default), official, or react (the ReAct release's lists, where a family has them)")
    p.add_argument("--split", default=None, help="the split for --source official (default: the environment's own)")
    p.add_argument("--limit", type=int, default=None)
    p.set_defaults(func=cmd_tasks)

    p = add_common(sub.add_parser("run", help="start an episode and run it"))
    later(p, _run_args)  # (its flags ask every family)

    p = add_common(sub.add_parser("resume", help="continue a version"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--version", type=int, default=None, help="a version's global id (its `id` in --json)")
    p.add_argument("--until", action="append", default=[], metavar="COND",
                   help="stop at the first step where COND holds: signal:NAME, 'obs:/REGEX/', 'action:/REGEX/', "
                        "step:K (may be repeated: the first that holds stops the run)")
    model_flags(p)
    p.set_defaults(func=cmd_resume)

    p = add_common(sub.add_parser("step", help="one step of a version, by the model or by you (--thought/--action)"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--thought", default=None, help="human mode: the thought to write")
    p.add_argument("--action", default=None, help="human mode: the action to take")
    model_flags(p, steps=False)
    p.set_defaults(func=cmd_step)

    p = add_common(sub.add_parser("show", help="a version's trajectory in the paper's format"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--prompt", action="store_true", help="print the exact prompt of the next model call")
    p.set_defaults(func=cmd_show)


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


def _register_versions(sub: argparse._SubParsersAction) -> None:
    """versions, episodes, edit, branch, current, data."""
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

    p = add_common(sub.add_parser("edit", help="edit step K of a version (a new version; the old one stays)"))
    p.add_argument("episode", type=episode_ref, help="EP or EP:N (version N of the episode: v1, v2, ...)")
    p.add_argument("--step", type=int, required=True, metavar="K")
    p.add_argument("--version", type=int, default=None)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--thought", help="rewrite the thought of step K")
    g.add_argument("--delete-thought", action="store_true", help="delete the thought of step K")
    g.add_argument("--insert-thought", metavar="TEXT", help="insert a thought (a hint) at step K")
    g.add_argument("--action", help="rewrite the action of step K (the environment runs it)")
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

    p = add_common(sub.add_parser("data", help="download official datasets or the ReAct release's files (needs internet)"))
    later(p, lambda q: q.add_argument("dataset", choices=tuple(_downloads())))  # (asks every family)
    p.add_argument("--dest", default=None, help="where to put the data")
    p.add_argument("--url", default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_data)


def model_flags(p: argparse.ArgumentParser, steps: bool = True) -> None:
    p.add_argument("--model", default=None,
                   help="model name; `local`: the built-in model on this machine (the default with no endpoint "
                        "configured: no OPENAI_API_KEY, OPENAI_BASE_URL or --base-url)")
    local_model_flag(p)
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, ...)")
    p.add_argument("--api-style", choices=("completions", "chat"), default=None)
    p.add_argument("--style", choices=("react", "act"), default=None)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--exemplars", default=None,
                   help="exemplar set name (default: the environment's built-in set; `react-editor exemplars "
                        "list` names the others)")
    p.add_argument("--no-cache", action="store_true", help="do not answer from the response cache")
    p.add_argument("--timeout", type=seconds, default=None,
                   help="seconds to wait for one model answer (default 60, at most 3600)")
    p.add_argument("--max-retries", type=retry_count, default=None,
                   help="retries of a failed model call, rate limits (429) included (default 4, at most 100)")
    if steps:
        p.add_argument("--max-steps", type=int, default=None)


def model_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the model flags given on the command line set."""
    use_local_model(args)
    changes = {}
    for flag, key in (
        ("model", "model"),
        ("base_url", "base_url"),
        ("api_style", "api_style"),
        ("style", "style"),
        ("temperature", "temperature"),
        ("exemplars", "exemplar_set"),
        ("timeout", "timeout_s"),
        ("max_retries", "max_retries"),
        ("max_steps", "max_steps"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            changes[key] = value
    if getattr(args, "no_cache", False):
        changes["cache"] = False
    return local_changes(changes)  # `local` -> `local:NAME` (and its timeout)


def config_from_args(args: argparse.Namespace, base: AgentConfig | None = None) -> AgentConfig:
    """The agent config the model flags ask for (checked by `run_settings.check_config`
    before anything is written; a base URL with credentials is refused here, before the
    config would strip them)."""
    from agent.run_settings import check_base_url

    check_base_url(getattr(args, "base_url", None))
    if base is None:
        from agent.local_model import default_model

        use_local_model(args)
        base = AgentConfig(model=default_model(getattr(args, "base_url", None), AgentConfig().model))
    return local_timeout(AgentConfig.model_validate({**base.model_dump(), **model_changes(args)}),
                         getattr(args, "timeout", None))


def open_engine(args: argparse.Namespace, *, readonly: bool = False):
    """`readonly` for reading commands: they work on a database they cannot write."""
    from agent.engine import Engine
    from sessions.store import Store

    return Engine(Store(db_path(args), readonly=readonly),
                  on_retry=lambda n, why: progress(f"  model call failed ({why}); retry {n}"))


class _Reader:
    """What the reading commands need of an Engine - its store and a version's steps -
    without the model client and the environments an Engine loads: they answer at once."""

    def __init__(self, store):
        self.store = store

    def steps(self, v) -> list:
        return self.store.versions.path(v.leaf_step_id)


def open_reader(args: argparse.Namespace) -> _Reader:
    """The database read-only, for `show`, `versions`: no Engine (no model client) loaded."""
    from sessions.store import Store

    return _Reader(Store(db_path(args), readonly=True))


class EpisodeRef(int):
    """An episode number as typed (`12`, `12:3`, `12:r2`); `.number` is the per-episode
    version number after the colon (3, or "r2" for a rollout), if any."""

    number: int | str | None = None


def episode_ref(text: str) -> EpisodeRef:
    """argparse type for `EP`, `EP:N` (N = the per-episode version number, `v` optional) or
    `EP:rN` (rollout N of the episode)."""
    from react_editor.args import ArgError, whole_number
    from sessions.numbering import parse

    ep, sep, num = str(text).partition(":")
    try:
        ref = EpisodeRef(whole_number(ep))
        if sep:
            ref.number = parse(num)
    except (ArgError, ValueError):
        raise argparse.ArgumentTypeError(f"bad episode reference {text!r}: use EP, EP:N or EP:rN (e.g. 3, 3:2 "
                                         "or 3:r1)") from None
    return ref


def version_of(engine, episode: int, version: int | None) -> int:
    """The global id of the version a command names: `--version ID`, `EP:N`, or the current one."""
    from sessions.numbering import id_of

    ep = engine.store.episodes.get(int(episode))
    number = getattr(episode, "number", None)
    if number is not None:
        if version is not None:
            raise CliError("give either EP:N or --version, not both")
        return id_of(engine.store, int(episode), number)
    if version is None:
        if ep.current_version is None:
            raise CliError(f"episode {episode} has no version")
        return ep.current_version
    engine.store.versions.get(version, episode)
    return version


# ---------------------------------------------------------------------- commands


def cmd_tasks(args: argparse.Namespace) -> int:
    from envs.registry import family

    opts: dict[str, Any] = {}
    if args.split:
        opts["split"] = args.split
    tasks = family(args.env).list_tasks(source=args.source, **opts)
    if args.limit:
        tasks = tasks[: args.limit]
    rows = [{"id": t.id, "env": t.env, "type": t.type, "text": t.text, "gold": t.gold, "source": t.source} for t in tasks]
    emit(args, rows, lambda: "\n".join(f"{r['id']}\t{r['type'] or '-'}\t{_one_line(r['text'])}" for r in rows) or "(no tasks)")
    return 0


def _one_line(text: str, n: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= n else line[: n - 1] + "…"


def _families() -> list:
    from envs.registry import loaded

    return loaded()


def _by_flag(items) -> dict[str, tuple[Any, list[str]]]:
    """(first declaration, kinds declaring it) per flag, over every family's `items`."""
    out: dict[str, tuple[Any, list[str]]] = {}
    for fam in _families():
        for it in items(fam):
            out.setdefault(it.key, (it, []))[1].append(fam.kind)
    return out


def _shared_help(what: str, key: str, owners: list[str], items) -> str:
    """A flag several families declare: each family's own words, by kind (one family's
    words under another's name would mislead: "an ALFWorld game" for --env textworld)."""
    from envs.registry import family

    labels = {}
    for kind in owners:
        it = next(i for i in items(family(kind)) if i.key == key)
        labels.setdefault(getattr(it, "label", None) or getattr(it, "help", None) or key, []).append(kind)
    head = f"{what}: " if what else ""
    if len(labels) == 1:
        return f"{head}{next(iter(labels))} ({', '.join(owners)})"
    return head + "; ".join(f"{', '.join(kinds)}: {text}" for text, kinds in labels.items())


def env_option_flags(p: argparse.ArgumentParser) -> None:
    """The episode options every installed family takes (`EnvFamily.options`), added when
    the command is used (loading every family is for the commands that need them)."""
    later(p, _env_option_flags)


def _env_option_flags(p: argparse.ArgumentParser) -> None:
    for key, (opt, owners) in _by_flag(lambda f: f.options).items():
        text = _shared_help("", key, owners, lambda f: f.options)
        if opt.switch:
            p.add_argument(opt.flag, dest=key, action="store_const", const=True, default=None, help=text)
        else:
            p.add_argument(opt.flag, dest=key, choices=opt.choices, default=None, help=text)


def custom_task_flags(p: argparse.ArgumentParser, group) -> None:
    """A custom task's inputs (`EnvFamily.custom_fields`): required ones exclude --task
    (added when the command is used, as `env_option_flags`)."""
    later(p, lambda q: _custom_task_flags(q, group))


def _custom_task_flags(p: argparse.ArgumentParser, group) -> None:
    for key, (f, owners) in _by_flag(lambda fam: fam.custom_fields).items():
        (group if f.required else p).add_argument(f"--{key.replace('_', '-')}", dest=key, default=None,
                                                  help=_shared_help("a custom task", key, owners,
                                                                    lambda fam: fam.custom_fields))


def env_options_from(args: argparse.Namespace) -> dict[str, Any]:
    from envs.registry import family

    fam = family(args.env)
    values = {o.key: getattr(args, o.key, None) for o in fam.options}
    for o in fam.options:
        if o.url_name and values[o.key]:  # credentials are refused in any URL a person gives
            from agent.run_settings import check_base_url

            check_base_url(values[o.key], o.url_name)
    return fam.env_options(values)


def _custom_task(args: argparse.Namespace, fam):
    """The task a run's custom flags describe, for a family that takes them."""
    mine = {f.key for f in fam.custom_fields}
    for key, (f, owners) in _by_flag(lambda x: x.custom_fields).items():
        if key not in mine and getattr(args, key, None) is not None:
            raise CliError(f"--{key.replace('_', '-')} is for --env {' or '.join(owners)}")
    if fam.custom_task is None or not mine:
        raise CliError(f"{fam.label} has no custom tasks; use --task")
    return fam.custom_task(**{k: getattr(args, k, None) for k in mine})


def _downloads() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fam in _families():
        for name, fn in fam.downloads.items():
            out.setdefault(name, fn)
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from envs.registry import family

    fam = family(args.env)
    task = fam.get_task(args.task, source=args.source) if args.task else _custom_task(args, fam)
    config = config_from_args(args)
    engine = open_engine(args)
    episode, version = engine.start_episode(task, config, env_options_from(args), name=args.name)
    progress(f"episode {episode.id}, v1: {_one_line(task.text, 80)}")
    if args.human:
        emit(args, {"episode": episode.id, "version": version.id, "number": 1, "done": False, "success": None,
                    "steps": 0},
             f"episode {episode.id} v1: 0 steps, open (take a step: react-editor step {episode.id}:1 --action ...)")
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
                progress(f"  the model's completion was cut to {len(call.completion or ''):,} characters "
                         f"(it had {call.cut_from:,})")
        for s in rep.steps:
            what = f"think: {s.thought}" if s.action is None else s.action
            progress(f"  step {s.index}: {_one_line(what, 70)} -> {_one_line(s.observation or '', 60)}")
        if until and not hit and (found := first_hit(until, rep.steps, version_step_signals(rep.steps, rep.version.outcome))):
            hit.append(found)
            progress(f"stopped at step {found[1].index}: {found[0].describe()} ({found[0].spec})")

    report = _run_job(engine, version_id, max_new, on_step, lambda: bool(hit))
    if report.error:
        progress(f"stopped by an error: {report.error}")
    out = {**report.as_json(), "number": _number(engine, report.version)}
    if hit:
        out["until"] = {"condition": hit[0][0].spec, "step": hit[0][1].index}
    emit(args, out, lambda: _run_text(engine, report, hit))
    if report.stopped and not hit and not report.error:  # Stop / `jobs stop N`: one exit code everywhere
        raise JobStopped(f"episode {report.episode}: {report.added} new step(s) kept; "
                         f"`react-editor resume {report.episode}` continues it")
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
        return engine.run(version_id, max_steps=max_new, on_step=step, should_stop=lambda: h.sync_stop() or until(),
                          watch=h.watch())

    return jobs.run_here(engine.store, "run", work, episode_id=ep, version_id=version_id,
                         target=f"episode {ep} {_label(engine, version_id)}")


def _number(engine, version_id: int) -> int:
    from sessions.numbering import number_of

    return number_of(engine.store, version_id)


def _label(engine, version_id: int) -> str:
    """"v3" or "r2", as people read it (sessions.numbering)."""
    from sessions.numbering import label_of

    return label_of(engine.store, version_id)


def _ref(engine, version_id: int) -> str:
    """A version as people read and type it: `EP:N` (N = its per-episode number)."""
    return version_ref(engine.store, version_id)


def _notice(engine, rep) -> str:
    """The frozen notice in the command line's words: `version 3:1 is frozen (annotated);
    continuing in new version 3:2`."""
    from agent.engine_reports import FROZEN

    return (f"version {_ref(engine, rep.continued_from)} is frozen ({FROZEN[rep.frozen]}); "
            f"continuing in new version {_ref(engine, rep.version.id)}")


def _run_text(engine, report, hit: list | None = None) -> str:
    state = "unfinished" if not report.done else ("success" if report.success else "failure")
    if hit:
        state += f", stopped at step {hit[0][1].index} ({hit[0][0].spec})"
    return f"episode {report.episode} {_label(engine, report.version)}: {report.steps} steps, {state}"


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
        raise CliError(f"{_ref(engine, vid)} already has {have} steps: --max-steps counts every step, "
                       f"so give more than {have} (e.g. --max-steps {have + 10})")


def check_model_flags(args: argparse.Namespace, engine, vid: int) -> dict[str, Any]:
    """The settings the model flags change on version `vid`, checked in full (as the
    version's config with them) before anything is written."""
    from agent.run_settings import check_config

    changes = model_changes(args)
    if changes:
        check_config(config_from_args(args, engine.store.versions.config(vid)),
                     engine.store.episodes.get(engine.store.versions.get(vid).episode_id).task.env, engine.store)
    return changes


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
    progress(f"version {_ref(engine, vid)} keeps the settings it ran with; continuing in new version "
             f"{_ref(engine, new.id)}")
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
    data = {"episode": int(args.episode), "version": rep.version.id, "number": _number(engine, rep.version.id),
            "done": rep.done,
            "steps": [_step_json(s, sigs) for s, sigs in zip(rep.steps, signals)]}
    emit(args, data, lambda: "\n".join(_step_text(s) for s in rep.steps))
    return 0


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
    return out


def _step_text(s) -> str:
    head = f"[{s.index}] ({s.source}{', edited' if s.edit else ''})"
    body = f"think: {s.thought}" if s.action is None else (f"Thought: {s.thought}\n    Action: {s.action}" if s.thought else s.action)
    return f"{head} {body}\n    -> {s.observation}"


def cmd_show(args: argparse.Namespace) -> int:
    from envs.registry import family

    engine = open_engine(args, readonly=True) if args.prompt else open_reader(args)
    vid = version_of(engine, args.episode, args.version)
    if args.prompt:
        text = engine.prompts.prompt(vid)
        if args.json:
            emit(args, {"prompt": text})
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
    entries: list = []
    headed: set[int] = set()  # the groups whose line is in `entries` already
    for v in versions:
        g = member.get(v.id)
        if g is not None and not args.json and g not in headed:
            headed.add(g)
            entries.append(("g", g))
        if args.json or args.expand or g is None:
            entries.append(v)
    shown, page = page_of(entries[args.offset:], args.limit, args.offset, len(entries))
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
        out = [f"  g{e[1]}\t{labels[e[1]]}" if isinstance(e, tuple)
               else line(by_id[e.id], "    " if e.id in member else "") for e in shown]
        note = say_page(False, page, "lines")
        return "\n".join(out + ([note] if note else []))

    if args.json:
        say_page(True, page, "versions")
    emit(args, rows, text)
    return 0


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
    rows, page = page_of(store.episodes.list(**filters, limit=args.limit, offset=args.offset),
                         args.limit, args.offset, store.episodes.count(**filters))
    from sessions.jobs import version_words

    words = version_words(store, rows, key="current_version")  # the current version's, as the app says
    for r in rows:
        r["state"] = words.get(r["current_version"], "open")
    note = say_page(args.json, page, "episodes")
    emit(args, rows, lambda: "\n".join(
        [f"{r['episode']}\t{r['env']}\t{r['type'] or '-'}\t{r['state']}\t{r['versions']} versions\t{_one_line(r['text'], 60)}"
         for r in rows] + ([note] if note else [])) or "(no episodes)")
    return 0


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
    else:
        kind, text = "rewrite_action", args.action
    v = engine.editor.edit(vid, args.step, kind, text, keep_rest=args.keep_rest)
    emit(args, {"version": v.id, "number": _number(engine, v.id)}, _ref(engine, v.id))
    return 0


def cmd_branch(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    vid = version_of(engine, args.episode, args.version)
    v = engine.editor.branch(vid, args.step)
    emit(args, {"version": v.id, "number": _number(engine, v.id)}, _ref(engine, v.id))
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
    emit(args, {"episode": args.episode, "version": args.version, "number": number_of(store, args.version)},
         f"episode {args.episode}: current version {ref}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from react_editor.args import folder

    dest = folder(args.dest, "destination folder") if args.dest else None
    kw: dict[str, Any] = {"progress": progress}
    if args.url:
        kw["base_url"] = args.url
    path = _downloads()[args.dataset](dest, **kw)  # the family that offers it
    emit(args, {"dataset": args.dataset, "path": str(path)}, f"{args.dataset}: {path}")
    return 0
