"""The Experiments page's new-experiment form: every run setting the CLI has, the exemplar set, the
leakage check, then the experiment created and launched in the background (`launch`: also the reruns')."""

from __future__ import annotations

import os
from typing import Any

import streamlit as st

from agent import experiment, experiment_background, leakage
from agent.methods import DEFAULT_SAMPLES, methods_of
from agent.run_settings import check_base_url, check_config
from agent.task_selection import SOURCES, select_tasks
from app_pages import alerts, app_engine
from app_pages.api_styles import api_style_box
from envs.registry import kinds
from sessions import exemplar_sets
from trajectory.records import AgentConfig


def launch(bg: experiment_background.Background, exp_id: int, concurrency: int) -> None:
    # the key comes from the environment only and is handed to the clients, never stored
    bg.start(exp_id, concurrency=concurrency, api_key=os.environ.get("OPENAI_API_KEY") or None)


BUILTIN_SET = "(built-in)"


def exemplar_choice(store, where: Any, env: str, key: str, current: str | None = None) -> str | None:
    """The exemplar set to run with (None: the built-in exemplars), from this env's sets."""
    names = [BUILTIN_SET, *(x.name for x in exemplar_sets.list_sets(store, env))]
    pick = where.selectbox("Exemplar set", names, index=names.index(current) if current in names else 0, key=key)
    return None if pick == BUILTIN_SET else pick


def leak_offer(store, exemplar_set: str | None, tasks: list, key: str) -> bool:
    """Name the evaluated tasks the set holds a trajectory of and offer to leave them out
    (checked by default); True when they are to be left out."""
    leaked = leakage.leaked_tasks(store, exemplar_set, tasks)
    if not leaked:
        return False
    alerts.alert(
        f"Leakage: exemplar set {exemplar_set!r} holds the trajectory of {len(leaked)} task(s) this "
        "experiment evaluates; their scores would measure a copied answer:",
        "warning",
    )  # the name: plain
    st.text(leakage.describe(leaked))  # task ids come from data: plain text
    return st.checkbox(f"Leave out the {len(leaked)} leaked task(s)", value=True, key=key)


def form_tasks(env: str, spec: str, limit: int, sample: str, seed: int) -> list:
    """The tasks the form selects, or [] while the spec cannot be read (the error shows on launch)."""
    try:
        return select_tasks(
            env, spec.strip() or "builtin", source=None, limit=limit or None, sample=sample.strip() or None, seed=seed
        )
    except app_engine.USER_ERRORS:
        return []


def new_experiment_form(store, bg: experiment_background.Background) -> None:
    """Every run setting the CLI has; the leakage check before the launch."""
    d = app_engine.defaults()
    c = st.columns(4)
    env = c[0].selectbox("Environment", list(kinds()), key="x_env")
    method = c[1].selectbox("Method", methods_of(env), index=methods_of(env).index("react"), key=f"x_method_{env}")
    spec = c[2].text_input("Tasks (builtin, official, react, or ids a,b,c)", value="builtin", key="x_tasks")
    concurrency = int(c[3].number_input("Concurrency", min_value=1, max_value=64, value=4, key="x_conc"))
    s = st.columns(4)
    limit = int(s[0].number_input("Limit (0 = all)", min_value=0, value=0, key="x_limit"))
    sample = s[1].text_input("Sample (N or 'paper'; blank = all)", key="x_sample")
    seed = int(s[2].number_input("Seed", min_value=0, value=0, key="x_seed"))
    samples = int(s[3].number_input("CoT-SC samples", min_value=1, max_value=64, value=DEFAULT_SAMPLES, key="x_n"))
    a = st.columns(4)
    base_url = a[0].text_input("Endpoint (base URL)", value=d.get("base_url") or "", key="x_base_url")
    model = a[1].text_input("Model", value=d["model"], key="x_model")
    api_style = api_style_box(a[2], d.get("api_style", "completions"), "x_api_style")
    max_steps = int(a[3].number_input("Max steps (0 = default)", min_value=0, max_value=500, value=0, key="x_steps"))
    e = st.columns(4)
    ex_set = exemplar_choice(store, e[0], env, f"x_exemplars_{env}")
    temperature = float(
        e[1].number_input(
            "Temperature",
            min_value=0.0,
            max_value=2.0,
            value=float(d.get("temperature") or 0.0),
            step=0.1,
            key="x_temp",
        )
    )
    name = e[2].text_input("Name (optional)", key="x_name")
    app_engine.queue_caption(model.strip() or d["model"], base_url.strip() or None, concurrency)
    leave_out = leak_offer(store, ex_set, form_tasks(env, spec, limit, sample, seed) if ex_set else [], "x_leave_out")
    alerts.show_error("x_new")
    if st.button("Create and launch", key="x_create", type="primary"):
        settings = {
            "base_url": base_url.strip() or None,
            "model": model.strip() or d["model"],
            "api_style": api_style,
            "max_steps": max_steps or None,
            "exemplar_set": ex_set,
            "temperature": temperature,
        }
        params = {
            "tasks": spec.strip() or "builtin",
            "limit": limit or None,
            "sample": sample.strip() or None,
            "samples": samples,
            "seed": seed,
        }
        create_and_launch(store, bg, env, method, settings, params, name, leave_out, concurrency)
    st.caption(f"Task sources: {', '.join(SOURCES)}. 'paper' reproduces the notebooks' subsets.")


def create_and_launch(
    store,
    bg: experiment_background.Background,
    env: str,
    method: str,
    settings: dict,
    params: dict,
    name: str,
    leave_out: bool,
    concurrency: int,
) -> None:
    alerts.clear_error("x_new")
    d = app_engine.defaults()
    try:
        tasks = select_tasks(
            env, params["tasks"], source=None, limit=params["limit"], sample=params["sample"], seed=params.pop("seed")
        )
        check_base_url(settings["base_url"])  # credentials are refused, not silently stripped
        cfg = AgentConfig.model_validate({**d, **settings})
        check_config(cfg, env, store)
        if leave_out:
            out = {t.key for t in leakage.leaked_tasks(store, cfg.exemplar_set, tasks)}
            tasks = [t for t in tasks if t.key not in out]
            if not tasks:
                raise ValueError("every task leaks: nothing left to run")
        exp = experiment.create(
            store,
            env=env,
            method=method,
            config=cfg,
            tasks=tasks,
            name=name.strip() or None,
            params={k: v for k, v in params.items() if v is not None},
        )
    except app_engine.USER_ERRORS as exc:
        alerts.set_error("x_new", exc)
        st.rerun()
    launch(bg, exp.id, concurrency)
    st.session_state["x_sel"] = st.session_state["x_pick"] = exp.id  # the selector shows the new run
    st.rerun()
