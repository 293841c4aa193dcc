"""Experiments: create one (fixed config, method and task list; `create`, `rerun`), and what
the other experiment modules share (a kind's task types, model prices, `ExperimentError`).
They run in `agent.experiment_runner`, are scored and compared in `agent.experiment_scores`,
and the app follows their jobs through `agent.experiment_background`.

Each worker thread has its own Store connection and Engine (sqlite connections and the
engine's live environments are not shared across threads); writes are short transactions.
An item whose episode fails is recorded with its error and retried by `resume`.
"""

from __future__ import annotations

import datetime
from typing import Any

from agent import leakage, methods
from agent.engine import EngineError
from envs.base import EnvError
from envs.registry import family
from sessions import experiments
from sessions.store import Store
from trajectory.records import AgentConfig, Task


def family_or_none(env: str):
    """The kind's family, or None when it is not installed here (its results still show)."""
    try:
        return family(env)
    except EnvError:
        return None


def task_types(env: str) -> tuple[str, ...]:
    """The kind's task types in its results order (the paper's table columns)."""
    fam = family_or_none(env)
    return tuple(t for t, _ in fam.task_types) if fam else ()


def type_label(env: str, task_type: str) -> str:
    """A task type's column title (ALFWorld's `Pick`, `Clean`, ...); else the type itself."""
    fam = family_or_none(env)
    return dict(fam.task_types).get(task_type, task_type) if fam else task_type


# USD per million (prompt, completion) tokens, unless Settings stores a price for the model
# (setting "model_prices": {model: {"prompt": $, "completion": $}}); other models cost 0.
PRICES_SETTING = "model_prices"
PRICES = {
    "gpt-3.5-turbo-instruct": (1.5, 2.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4o": (2.5, 10.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1": (2.0, 8.0),
}


class ExperimentError(EngineError):
    """A one-line problem with an experiment (e.g. the batch stopped on failures)."""


# ---------------------------------------------------------------------------- create


def create(
    store: Store,
    *,
    env: str,
    method: str,
    config: AgentConfig,
    tasks: list[Task],
    name: str | None = None,
    env_options: dict | None = None,
    params: dict | None = None,
) -> experiments.Experiment:
    """A new experiment; the method's prompt style is fixed into the config."""
    family(env)
    methods.check_method(env, method)
    methods.check_exemplars(env, method, config.exemplar_set, store)
    update: dict[str, Any] = {"style": methods.prompt_style(method)}
    if method == "react-cot-sc" and config.max_steps is None:  # the back-off budget, not the loop's 7
        update["max_steps"] = methods.backoff_steps(env)
    config = config.model_copy(update=update)
    params = dict(params or {})
    if "sc" in method.replace("-", " ").split():
        params.setdefault("samples", methods.DEFAULT_SAMPLES)
        params.setdefault("sc_temperature", methods.SC_TEMPERATURE)
        if params["samples"] < 1:
            raise ExperimentError("--samples must be at least 1")
    # recorded as it is at launch: the set may change later, the run saw this one
    params[LEAKED_KEY] = [t.key for t in leakage.leaked_tasks(store, config.exemplar_set, tasks)]
    return experiments.create(
        store,
        name=name or _default_name(store, env, method),
        env=env,
        method=method,
        config=config,
        tasks=tasks,
        env_options=env_options,
        params=params,
    )


LEAKED_KEY = "leaked"  # params: task keys whose own trajectory was an exemplar of the run
RERUN_KEY = "rerun_of"  # params: the experiment this one re-ran with a change


def leaked_keys(store: Store, exp: experiments.Experiment) -> list[str]:
    """The experiment's leaked task keys: recorded at creation, else (older rows) the
    set as it is now."""
    if LEAKED_KEY in exp.params:
        return list(exp.params[LEAKED_KEY])
    return [
        t.key
        for t in leakage.leaked_tasks(
            store, exp.config.exemplar_set, [it.task for it in experiments.items(store, exp.id)]
        )
    ]


def rerun(
    store: Store,
    ref: int | str,
    *,
    config: dict[str, Any] | None = None,
    method: str | None = None,
    name: str | None = None,
    leave_out_leaked: bool = False,
) -> experiments.Experiment:
    """A new experiment on the source's tasks with the same settings but the changes
    given (`config`: AgentConfig fields, e.g. {"exemplar_set": "fixed"}); it names its
    source so its paired comparison can open by itself."""
    src = experiments.get(store, ref)
    cfg = src.config.model_validate({**src.config.model_dump(), **(config or {})})
    tasks = [it.task for it in experiments.items(store, src.id)]
    if leave_out_leaked:
        out = {t.key for t in leakage.leaked_tasks(store, cfg.exemplar_set, tasks)}
        tasks = [t for t in tasks if t.key not in out]
    if not tasks:
        raise ExperimentError("no task left to run")
    keep = {k: v for k, v in src.params.items() if k not in (LEAKED_KEY, RERUN_KEY)}
    return create(
        store,
        env=src.env,
        method=method or src.method,
        config=cfg,
        tasks=tasks,
        name=name,
        env_options=src.env_options,
        params={**keep, RERUN_KEY: src.id},
    )


def _default_name(store: Store, env: str, method: str) -> str:
    base = f"{env}-{method}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}"
    taken = {e.name for e in experiments.list_all(store)}
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name
