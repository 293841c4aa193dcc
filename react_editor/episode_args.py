"""What the episode commands share: model and environment flags, episode references (EP, EP:N),
opening the engine, version labels."""

from __future__ import annotations

import argparse
from typing import Any

from react_editor.args import retry_count, seconds, token_count
from react_editor.command_run import CliError, db_path
from react_editor.lazy_parser import later
from react_editor.model import local_changes, local_model_flag, local_timeout, use_local_model
from react_editor.output import progress, version_ref
from trajectory.records import API_STYLES, AgentConfig


def model_flags(p: argparse.ArgumentParser, steps: bool = True) -> None:
    p.add_argument(
        "--model",
        default=None,
        help="model name; `local`: the built-in model on this machine (the default with no endpoint "
        "configured: no OPENAI_API_KEY, OPENAI_BASE_URL or --base-url)",
    )
    local_model_flag(p)
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, ...)")
    p.add_argument("--api-style", choices=API_STYLES, default=None)
    p.add_argument("--style", choices=("react", "act"), default=None)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument(
        "--max-tokens",
        type=token_count,
        default=None,
        help="the most tokens one answer may have (default 100: a paper step; a reasoning model's "
        "reasoning counts too, give it more)",
    )
    p.add_argument(
        "--exemplars",
        default=None,
        help="exemplar set name (default: the environment's built-in set; `react-editor exemplars "
        "list` names the others)",
    )
    p.add_argument("--no-cache", action="store_true", help="do not answer from the response cache")
    p.add_argument(
        "--timeout", type=seconds, default=None, help="seconds to wait for one model answer (default 60, at most 3600)"
    )
    p.add_argument(
        "--max-retries",
        type=retry_count,
        default=None,
        help="retries of a failed model call, rate limits (429) included (default 4, at most 100)",
    )
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
        ("max_tokens", "max_tokens"),
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
    return local_timeout(
        AgentConfig.model_validate({**base.model_dump(), **model_changes(args)}), getattr(args, "timeout", None)
    )


def open_engine(args: argparse.Namespace, *, readonly: bool = False):
    """`readonly` for reading commands: they work on a database they cannot write."""
    from agent.engine import Engine
    from sessions.store import Store

    return Engine(
        Store(db_path(args), readonly=readonly),
        on_retry=lambda n, why: progress(f"  model call failed ({why}); retry {n}"),
    )


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
        raise argparse.ArgumentTypeError(
            f"bad episode reference {text!r}: use EP, EP:N or EP:rN (e.g. 3, 3:2 or 3:r1)"
        ) from None
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


def one_line(text: str, n: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= n else line[: n - 1] + "…"


def families() -> list:
    from envs.registry import loaded

    return loaded()


def _by_flag(items) -> dict[str, tuple[Any, list[str]]]:
    """(first declaration, kinds declaring it) per flag, over every family's `items`."""
    out: dict[str, tuple[Any, list[str]]] = {}
    for fam in families():
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
        (group if f.required else p).add_argument(
            f"--{key.replace('_', '-')}",
            dest=key,
            default=None,
            help=_shared_help("a custom task", key, owners, lambda fam: fam.custom_fields),
        )


def env_options_from(args: argparse.Namespace) -> dict[str, Any]:
    from envs.registry import family

    fam = family(args.env)
    values = {o.key: getattr(args, o.key, None) for o in fam.options}
    for o in fam.options:
        if o.url_name and values[o.key]:  # credentials are refused in any URL a person gives
            from agent.run_settings import check_base_url

            check_base_url(values[o.key], o.url_name)
    return fam.env_options(values)


def custom_task(args: argparse.Namespace, fam):
    """The task a run's custom flags describe, for a family that takes them."""
    mine = {f.key for f in fam.custom_fields}
    for key, (f, owners) in _by_flag(lambda x: x.custom_fields).items():
        if key not in mine and getattr(args, key, None) is not None:
            raise CliError(f"--{key.replace('_', '-')} is for --env {' or '.join(owners)}")
    if fam.custom_task is None or not mine:
        raise CliError(f"{fam.label} has no custom tasks; use --task")
    return fam.custom_task(**{k: getattr(args, k, None) for k in mine})


def version_number(engine, version_id: int) -> int:
    from sessions.numbering import number_of

    return number_of(engine.store, version_id)


def version_label(engine, version_id: int) -> str:
    """ "v3" or "r2", as people read it (sessions.numbering)."""
    from sessions.numbering import label_of

    return label_of(engine.store, version_id)


def ref_text(engine, version_id: int) -> str:
    """A version as people read and type it: `EP:N` (N = its per-episode number)."""
    return version_ref(engine.store, version_id)


def check_model_flags(args: argparse.Namespace, engine, vid: int) -> dict[str, Any]:
    """The settings the model flags change on version `vid`, checked in full (as the
    version's config with them) before anything is written."""
    from agent.run_settings import check_config

    changes = model_changes(args)
    if changes:
        check_config(
            config_from_args(args, engine.store.versions.config(vid)),
            engine.store.episodes.get(engine.store.versions.get(vid).episode_id).task.env,
            engine.store,
        )
    return changes
