"""Experiments: create a batch (env, tasks, method, model, concurrency) and launch it in a
background thread (a long batch never blocks this or any other session), follow its
progress with Stop / Resume, read the paper-style results, compare experiments per type and
paired, and open failed episodes in the Editor. Same library calls as `react-editor experiment`."""

from __future__ import annotations

import os
from typing import Any

import streamlit as st

from agent import experiment as X
from agent.methods import DEFAULT_SAMPLES, methods_of
from agent.run_settings import check_base_url, check_config
from agent.task_selection import SOURCES, select_tasks
from app_pages import state
from app_pages import suggest_panel
from app_pages.experiment_views import (PARTIAL_NOTE, TABLE_NOTE, chart_spec, compare_rows, is_partial, paper_row, signal_rows,
                                        table_caption)
from sessions import experiments as xs
from sessions.search import signal_counts
from envs.registry import kinds
from trajectory.records import AgentConfig


@st.cache_resource(show_spinner=False)
def _background(path: str) -> X.Background:
    return X.Background(path)


bg = _background(state.db_path())
store = state.store()


def launch(exp_id: int, concurrency: int) -> None:
    # the key comes from the environment only and is handed to the clients, never stored
    bg.start(exp_id, concurrency=concurrency, api_key=os.environ.get("OPENAI_API_KEY") or None)


st.title("Experiments")
state.model_banner()

with st.expander("New experiment", expanded=not xs.list_all(store)):
    d = state.defaults()
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
    api_style = a[2].selectbox("API style", ["completions", "chat"], key="x_api_style",
                               index=["completions", "chat"].index(d.get("api_style", "completions")))
    max_steps = int(a[3].number_input("Max steps (0 = default)", min_value=0, max_value=500, value=0, key="x_steps"))
    name = st.text_input("Name (optional)", key="x_name")
    state.show_error("x_new")
    if st.button("Create and launch", key="x_create", type="primary"):
        state.clear_error("x_new")
        try:
            spec_ = spec.strip() or "builtin"
            tasks = select_tasks(env, spec_, source=None, limit=limit or None, sample=sample.strip() or None, seed=seed)
            check_base_url(base_url.strip() or None)  # credentials are refused, not silently stripped
            cfg = AgentConfig.model_validate({**d, "base_url": base_url.strip() or None, "model": model.strip() or d["model"],
                                              "api_style": api_style, "max_steps": max_steps or None})
            check_config(cfg, env, store)
            params = {"tasks": spec_, "limit": limit or None, "sample": sample.strip() or None, "samples": samples}
            exp = X.create(store, env=env, method=method, config=cfg, tasks=tasks, name=name.strip() or None,
                           params={k: v for k, v in params.items() if v is not None})
        except state.USER_ERRORS as exc:
            state.set_error("x_new", exc)
            st.rerun()
        launch(exp.id, concurrency)
        st.session_state["x_sel"] = st.session_state["x_pick"] = exp.id  # the selector shows the new run
        st.rerun()
    st.caption(f"Task sources: {', '.join(SOURCES)}. 'paper' reproduces the notebooks' subsets.")

exps = xs.list_all(store)
if not exps:
    st.caption("No experiments yet: create one above.")
    st.stop()
ids = [e.id for e in exps]
labels = {e.id: f"{e.id} · {e.name} ({e.method} on {e.env})" for e in exps}
if st.session_state.get("x_pick") not in ids:
    st.session_state["x_pick"] = st.session_state.get("x_sel") if st.session_state.get("x_sel") in ids else ids[-1]
sel = st.selectbox("Experiment", ids, format_func=labels.get, key="x_pick")
st.session_state["x_sel"] = sel
env_of = {e.id: e.env for e in exps}


@st.cache_data(show_spinner=False, max_entries=1000)
def _summary(db: str, exp_id: int, changed: tuple) -> dict:
    """An experiment's summary, recomputed only when the experiment changed (`changed`)."""
    return X.summary(state.store(), exp_id)


@st.cache_data(show_spinner=False, max_entries=200)
def _compare(db: str, a: int, b: int, changed: tuple) -> dict:
    return X.compare(state.store(), a, b)


@st.cache_data(show_spinner=False, max_entries=200)
def _failures(db: str, exp_id: int, changed: tuple) -> tuple[list, Any]:
    """The failed items and their signal counts, recomputed only when the experiment changed."""
    failed = X.failures(state.store(), exp_id)
    return failed, signal_counts(state.store(), [it.episode_id for it in failed if it.episode_id])


def summaries(keys: dict[int, tuple] | None = None) -> dict[int, dict]:
    """Every experiment's (cached) summary; keys: xs.changes(store) when already read."""
    keys = xs.changes(store) if keys is None else keys
    return {i: _summary(state.db_path(), i, keys.get(i, ())) for i in ids}


def live(s: dict) -> dict:
    """The summary with what the page knows now: running (this process runs it) and partial."""
    running = bg.running(s["experiment"])
    partial = is_partial(s)
    return {**s, "running": running, "partial": partial, "status": status_label(s["status"], running, partial, s["done"])}


def status_label(status: str, running: bool, partial: bool, done: int) -> str:
    """One status for the bar and the table: live runs say running; unfinished ones say partial."""
    if running:
        return "running"
    if not partial:
        return status
    if status == "created" and not done:
        return "not started"
    return f"{'stopped' if status in ('running', 'created') else status} (partial)"


def any_running() -> bool:
    return any(bg.running(i) for i in ids)


@st.fragment(run_every=1.0 if any_running() else None)
def live_panel() -> None:
    """Progress, results, chart and failures: redrawn together while a run moves, and once
    more when it ends, so the table, the bar and the chart never disagree."""
    keys = xs.changes(store)  # read once per tick: the summaries, comparison and failures share it
    sums = {i: live(s) for i, s in summaries(keys).items()}
    progress_panel(sel, sums[sel])
    results_tables(sums)
    chart_panel(sums)
    compare_panel(sums, keys)
    failures_panel(keys)
    was = st.session_state.get("x_was_running")
    now = any_running()
    st.session_state["x_was_running"] = now
    if was and not now:
        st.rerun()  # the run ended: one full rerun stops the ticking and shows the final numbers


def progress_panel(exp_id: int, s: dict) -> None:
    total, done = s["episodes"], s["done"]
    running = s["running"]
    p = bg.progress(exp_id)
    eta = f", ETA {int(p.eta_s)} s" if running and p and p.eta_s is not None else ""
    errors = xs.counts(store, exp_id).get("error", 0)
    st.progress(done / total if total else 1.0,
                text=f"{done}/{total} done, {s['success']} successes, {errors} failed{eta} · {s['status']}")
    cols = st.columns([1, 1, 6])
    if running and cols[0].button("Stop", key="x_stop"):
        bg.stop(exp_id)
        st.rerun()
    if not running and done < total and cols[1].button("Resume", key="x_resume", type="primary"):
        launch(exp_id, int(st.session_state.get("x_conc", 4)))
        st.rerun()
    err = bg.error(exp_id)
    if err:
        st.error("The batch stopped:")
        st.text(err)


def results_tables(sums: dict[int, dict]) -> None:
    st.subheader("Results")
    for env_kind in dict.fromkeys([*kinds(), *(s["env"] for s in sums.values())]):  # plugins' too
        rows = [paper_row(s) for s in sums.values() if s["env"] == env_kind]
        if rows:
            st.caption(table_caption(env_kind) + TABLE_NOTE + PARTIAL_NOTE * any(s["partial"] for s in sums.values()
                                                                                    if s["env"] == env_kind))
            st.dataframe(rows, hide_index=True, key=f"x_results_{env_kind}")


def chart_panel(sums: dict[int, dict]) -> None:
    st.subheader("By task type")
    same_env = [i for i in ids if env_of[i] == env_of[sel]]
    chosen = st.multiselect("Experiments to chart", same_env, default=[sel], format_func=labels.get,
                            key=f"x_chart_{sel}")  # follows the selected experiment
    scored = [sums[i] for i in chosen if sums[i]["done"]]
    if not scored:
        st.caption("Nothing to chart yet: no task of these experiments has finished.")
        return
    st.vega_lite_chart(chart_spec(scored), width="stretch")
    if any(s["partial"] for s in scored):
        st.caption("Partial: rates are over the finished tasks only.")


def compare_panel(sums: dict[int, dict], keys: dict[int, tuple] | None = None) -> None:
    st.subheader("Paired comparison")
    others = [i for i in ids if env_of[i] == env_of[sel] and i != sel]
    if not others:
        st.caption("Run another experiment on the same environment to compare task by task.")
        return
    b = st.selectbox("Compare with", others, format_func=labels.get, key="x_compare")
    unfinished = [x for x in (sel, b) if sums[x]["running"] or sums[x]["partial"]]
    if unfinished:
        st.caption("Partial: " + " and ".join(f"{labels[x]} ({sums[x]['done']}/{sums[x]['episodes']} done"
                                             f"{', running' if sums[x]['running'] else ''})" for x in unfinished)
                   + ". A comparison now pairs only the tasks finished on both sides.")
        if not st.toggle("Compare anyway", key="x_compare_partial"):
            return
    keys = xs.changes(store) if keys is None else keys
    c = _compare(state.db_path(), sel, b, (keys.get(sel), keys.get(b)))
    excluded = c.get("excluded")
    st.text(f"A = {labels[sel]}; B = {labels[b]}; {c['common']} tasks in common"
            + (f", {excluded} excluded (not finished on both sides)" if excluded else ""))
    st.dataframe(compare_rows(c, env_of[sel]), hide_index=True, key="x_compare_table")


def failures_by_signal(counts, versions: dict[int, int | None]) -> None:
    """The failed episodes counted per task type and signal; a count opens its episodes."""
    table = counts.counts()
    if not table:
        st.caption("No failure carries an automatic signal.")
        return
    st.dataframe(signal_rows(table), hide_index=True, key="x_signal_table")
    cells = [(t, name) for t, by in table.items() for name in by]
    cell = st.selectbox("Episodes with", cells, key="x_signal_cell",
                        format_func=lambda c: f"{c[0] or '(no type)'} · {c[1]} ({table[c[0]][c[1]]})")
    ids = counts.episodes[cell[0]][cell[1]]
    g = st.columns([3, 1])
    pick = g[0].selectbox("Episode", ids, format_func=lambda i: f"#{i}", key="x_signal_pick")
    if g[1].button("Open in Editor", key="x_signal_open"):
        state.open_in("editor", pick, versions.get(pick))


def failures_panel(keys: dict[int, tuple] | None = None) -> None:
    st.subheader("Failed episodes")
    keys = xs.changes(store) if keys is None else keys
    failed, counts = _failures(state.db_path(), sel, keys.get(sel, ()))
    if not failed:
        st.caption("No failures.")
        return
    st.dataframe([{"task": it.task.id, "type": it.task.type or "", "episode": it.episode_id, "status": it.status,
                   "answer": str(it.metrics.get("answer", "")), "error": it.error or ""} for it in failed],
                 hide_index=True, key="x_failed_table")
    by_ep = {it.episode_id: it for it in failed if it.episode_id}
    if by_ep:
        f = st.columns([3, 1])
        pick = f[0].selectbox("Failed episode", list(by_ep), format_func=lambda i: f"#{i} · {by_ep[i].task.id}",
                              key="x_fail_pick")
        if f[1].button("Open in Editor", key="x_open", type="primary"):
            state.open_in("editor", pick, by_ep[pick].version_id)
    st.subheader("Failure signals")
    failures_by_signal(counts, {it.episode_id: it.version_id for it in failed if it.episode_id})
    suggest_panel.experiment_panel(state.engine(), sel)  # `suggest --experiment`: fixes, accept all proven


live_panel()
