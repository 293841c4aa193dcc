"""Experiments: create a batch (env, tasks, method, model, concurrency) and launch it in a
background thread (a long batch never blocks this or any other session), follow its
progress with Stop / Resume, read the paper-style results, compare experiments per type and
paired, and open failed episodes in the Editor. Same library calls as `react-editor experiment`."""

from __future__ import annotations

import os

import streamlit as st

from agent import experiment as X
from agent.methods import DEFAULT_SAMPLES, METHODS
from agent.run_settings import check_base_url, check_config
from agent.task_selection import SOURCES, select_tasks
from app_pages import state
from app_pages.experiment_views import chart_data, compare_rows, paper_row, signal_rows
from sessions import experiments as xs
from sessions.search import signal_counts
from trajectory.records import ENV_KINDS, AgentConfig


@st.cache_resource(show_spinner=False)
def _background(path: str) -> X.Background:
    return X.Background(path)


bg = _background(state.db_path())
store = state.store()


def launch(exp_id: int, concurrency: int) -> None:
    # the key comes from the environment only and is handed to the clients, never stored
    bg.start(state.db_path(), exp_id, concurrency=concurrency, api_key=os.environ.get("OPENAI_API_KEY") or None)


st.title("Experiments")
state.model_banner()

with st.expander("New experiment", expanded=not xs.list_all(store)):
    d = state.defaults()
    c = st.columns(4)
    env = c[0].selectbox("Environment", ENV_KINDS, key="x_env")
    method = c[1].selectbox("Method", METHODS[env], index=METHODS[env].index("react"), key=f"x_method_{env}")
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
        st.session_state["x_sel"] = exp.id
        st.rerun()
    st.caption(f"Task sources: {', '.join(SOURCES)}. 'paper' reproduces the notebooks' subsets.")

exps = xs.list_all(store)
if not exps:
    st.caption("No experiments yet: create one above.")
    st.stop()
summaries = {e.id: X.summary(store, e.id) for e in exps}

st.subheader("Results")
for env_kind in ENV_KINDS:
    rows = [paper_row(s) for s in summaries.values() if s["env"] == env_kind]
    if rows:
        st.caption({"alfworld": "ALFWorld: success rate % per task type (paper layout, as Table 3)",
                    "hotpotqa": "HotpotQA: exact match and F1 % (paper layout, as Table 1)",
                    "fever": "FEVER: accuracy % (paper layout, as Table 1)"}[env_kind]
                   + "; each row names the task set it ran on")
        st.dataframe(rows, hide_index=True, key=f"x_results_{env_kind}")

ids = [e.id for e in exps]
labels = {e.id: f"{e.id} · {e.name} ({e.method} on {e.env})" for e in exps}
default = st.session_state.get("x_sel") if st.session_state.get("x_sel") in ids else ids[-1]
sel = st.selectbox("Experiment", ids, index=ids.index(default), format_func=labels.get, key="x_pick")
st.session_state["x_sel"] = sel


@st.fragment(run_every=1.0 if bg.running(sel) else None)
def progress_panel(exp_id: int) -> None:
    counts = xs.counts(store, exp_id)
    total = sum(counts.values())
    done = counts.get("done", 0)
    s = X.summary(store, exp_id)
    running = bg.running(exp_id)
    p = bg.progress(exp_id)
    eta = f", ETA {int(p.eta_s)} s" if running and p and p.eta_s is not None else ""
    st.progress(done / total if total else 1.0,
                text=f"{done}/{total} done, {s['success']} successes, {counts.get('error', 0)} failed{eta} · "
                     f"{'running' if running else s['status']}")
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


progress_panel(sel)

st.subheader("By task type")
same_env = [e.id for e in exps if e.env == summaries[sel]["env"]]
chosen = st.multiselect("Experiments to chart", same_env, default=[sel], format_func=labels.get, key="x_chart")
if chosen:
    st.bar_chart(chart_data([summaries[i] for i in chosen]), stack=False)

st.subheader("Paired comparison")
others = [i for i in same_env if i != sel]
if others:
    b = st.selectbox("Compare with", others, format_func=labels.get, key="x_compare")
    c = X.compare(store, sel, b)
    st.text(f"A = {labels[sel]}; B = {labels[b]}; {c['common']} tasks in common")
    st.dataframe(compare_rows(c, summaries[sel]["env"]), hide_index=True, key="x_compare_table")
else:
    st.caption("Run another experiment on the same environment to compare task by task.")

st.subheader("Failed episodes")
failed = X.failures(store, sel)
if not failed:
    st.caption("No failures.")
else:
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


def failures_by_signal(store, episode_ids: list[int], versions: dict[int, int | None]) -> None:
    """The failed episodes counted per task type and signal; a count opens its episodes."""
    counts = signal_counts(store, episode_ids)
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


st.subheader("Failure signals")
failures_by_signal(store, [it.episode_id for it in failed if it.episode_id],
                   {it.episode_id: it.version_id for it in failed if it.episode_id})
