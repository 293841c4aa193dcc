"""The Editor's run controls (Step, Run N, Run to end, Stop, human mode; Branch when the
version cannot go on; stop conditions), the status line, and other tabs' jobs with Stop."""

from __future__ import annotations

import streamlit as st

from agent import jobs
from app_pages import alerts, app_engine, stepjobs, stop_panel, version_names
from app_pages.editor_context import EditorPage
from app_pages.editor_run import close_run, start_run, start_step, switch_to
from app_pages.page_text import outcome_text, plural


def branch_row(page: EditorPage, v, steps, limit: int) -> None:
    """Below the sticky row (which stays one row high: it hid the status line): why Step
    and Run are off, and a branch from an earlier step."""
    why = "it is finished" if v.outcome.done else f"it has reached its step limit ({limit})"
    st.caption(f"Step and Run are off for {page.vname(v.id)}: {why}. Branch from an earlier step to try another way.")
    b = st.columns([1, 2, 5])
    k = b[0].number_input(
        "Branch from step",
        min_value=0,
        max_value=len(steps),
        value=max(len(steps) - 1, 0),
        key=f"branch_k_{page.vid}",
        label_visibility="collapsed",
    )
    if b[1].button(f"Branch from step {int(k)}", key="btn_branch"):
        new = page.eng.editor.branch(page.vid, int(k))
        switch_to(page, new.id)


def retry_last(page: EditorPage) -> None:
    """The step error's Retry: the last command again."""
    if alerts.show_error("step", retry_label="Retry"):
        last = st.session_state.get("last_cmd") or {"kind": "step"}
        alerts.clear_error("step")
        if last["kind"] == "run":
            start_run(page, last.get("n"), last.get("until"))
        else:
            start_step(page)
        st.rerun()


def controls(page: EditorPage, v, steps, busy: bool):
    """The run controls. They sit outside the ticking fragment: a click on them is a full
    rerun, which interrupts a page waiting for a model call (fragment reruns would queue)."""
    limit = page.eng.max_steps(page.ep)
    finished = v.outcome.done or len(steps) >= limit
    running = bool(st.session_state.get("run"))
    with st.container(key="run_controls"):
        c = st.columns([1, 1, 1, 1.3, 1, 2.2])
        no_model = app_engine.no_model_reason(page.ep.config)  # the built-in model is not installed: say so
        off = running or busy or finished or bool(no_model)
        c[0].button("Step", key="btn_step", disabled=off, on_click=start_step, args=(page,))
        n = c[1].number_input(
            "N", min_value=1, max_value=500, value=5, step=1, key="run_n", label_visibility="collapsed", disabled=off
        )
        run_n = c[2].button(f"Run {int(n)}", key="btn_run_n", disabled=off)
        run_end = c[3].button("Run to end", key="btn_run_end", disabled=off)
        stop = c[4].button(
            "Stop", key="btn_stop", type="primary" if running or busy else "secondary", disabled=not (running or busy)
        )
        c[5].toggle("Human agent mode", key="human_mode", disabled=finished)
    if finished:
        branch_row(page, v, steps, limit)
    elif no_model:
        st.caption(f"Step and Run are off: {no_model}. Human agent mode works, or choose an endpoint below.")
    until, problem = stop_panel.form(disabled=running or finished)  # below the sticky row: it can be tall
    if stop:  # a single step in flight is dropped (the version stays as it was); a run ends stopped
        stepjobs.cancel(page.store, page.tab, page.vid)
        close_run(page.store, "stopped")
        st.rerun()
    if (run_n or run_end) and not problem:
        start_run(page, int(n) if run_n else None, [c.spec for c in until])
        st.rerun()  # a full rerun: the fragment starts ticking
    retry_last(page)


def status_line(v, steps, name: str, r: dict | None, status: str, stop_at: dict | None) -> str:
    """ "v3: 14 steps · stopped at step 14: repeated action": the version's one status word,
    with where and why a stop condition ended its run."""
    word = "running" if r else outcome_text(v.outcome, status)
    if word == "stopped" and stop_at and stop_at.get("version") == v.id and stop_at["index"] <= len(steps):
        word = f"stopped at step {stop_at['index']}: {stop_at['why']}"
    text = f"{name}: {plural(len(steps), 'step')} · {word}"
    if v.outcome.done:
        text += f" · reward {v.outcome.reward:g}"
    if r:
        text += f" · {r['added']} added by this run"
    return text


def line_of(page: EditorPage, v, steps) -> str:
    return status_line(
        v,
        steps,
        page.vname(v.id),
        st.session_state.get("run"),
        version_names.version_status(v),
        st.session_state.get("stop_at"),
    )


def others_panel(page: EditorPage) -> bool:
    """Jobs on this episode that another tab or process runs: progress, with Stop."""
    live = stepjobs.others(page.store, page.ep_id, page.tab)
    for j in live:
        c = st.columns([6, 1])
        done = f" · {j.done}/{j.total}" if j.total else ""
        c[0].caption(f"Job {j.id} ({j.kind}, {j.target}) is {j.state} in another tab or process{done}")
        if c[1].button("Stop", key=f"stop_job_{j.id}", disabled=j.stop):
            jobs.stop(page.store, j.id)
            st.rerun()
    return bool(live)
