"""The Editor's body, the fragment that ticks while a run is on: the status line, the
trajectory, the outcome, human mode, the version's annotation and the next prompt; a rerun
takes ONE step and waits for it here, so progress is visible and Stop works mid-run."""

from __future__ import annotations

import time

import streamlit as st

from app_pages import alerts, stepjobs, suggest_panel
from app_pages.annotate_widgets import version_annotation_panel
from app_pages.editor_context import POLL_S, RUN_LEASE_S, STEP_ERRORS, EditorPage
from app_pages.editor_controls import line_of, others_panel
from app_pages.editor_human import human_panel
from app_pages.editor_run import finished_job, renew_run, settle, switcher
from app_pages.editor_steps import StepExtras, overview_strip, render_step, steps_view
from app_pages.page_text import answer_line


def outcome_box(page: EditorPage, v) -> None:
    if v.outcome.success:
        st.success(f"Done: success (reward {v.outcome.reward:g}).")
        return
    head = f"Done: failure (reward {v.outcome.reward:g}). Edit a thought or action above to try another way."
    line = answer_line(page.ep.task.gold, v.outcome.metrics)
    if line:  # the gold answer and the model's come from data: escaped, inside the box
        alerts.alert(line, "warning", headline=head)
    else:
        st.warning(head)


def below_steps(page: EditorPage, v, steps: list, job) -> None:
    """Under the trajectory: a pending thought, the outcome (and suggested fixes) or human
    mode, the version's annotation, the next prompt."""
    n_steps = len(steps)
    if v.draft_thought is not None:
        st.caption(f"Pending thought for step {n_steps + 1} (the model writes its action next):")
        st.text(v.draft_thought)
    if v.outcome.done:
        outcome_box(page, v)
        suggest_panel.render(page.eng, page.vid, v, switcher(page))  # on a failed version: "Suggest fixes"
    elif st.session_state.get("human_mode") and not st.session_state.get("run") and job is None:
        human_panel(page, v, n_steps)
    with st.expander(f"Annotate {page.vname(v.id)}: verdict, failure modes, notes, exemplar-ready"):
        version_annotation_panel(page.store, v.id, "ed", steps=steps, env=page.ep.task.env)
    if st.toggle("Show the next prompt", key="show_prompt"):
        try:
            st.code(page.eng.prompts.prompt(page.vid), language=None, wrap_lines=True)
        except STEP_ERRORS as exc:
            st.text(str(exc))


def await_step(page: EditorPage, job: stepjobs.StepJob, line, box, drawn: int) -> None:
    """Wait for the step in flight (its status in the status line, the model's answer as it
    streams in below the steps), then draw its new steps (past the `drawn` ones: a step the job
    committed before the page read the version is drawn already, and its box again would repeat
    its widget keys)."""
    renewed = time.monotonic()
    with box:
        live = st.empty()  # the thought and action being written, token by token (plain text, never markdown)
    shown = ""
    while not job.finished.wait(POLL_S):  # a click on the controls interrupts this at line.caption
        line.text(job.status())  # the retry reason quotes the server: plain text
        if job.partial != shown:
            shown = job.partial
            if shown:
                live.code(shown, language=None, wrap_lines=True)
            else:  # (a retry starts the answer over)
                live.empty()
        if time.monotonic() - renewed > RUN_LEASE_S / 3:  # a slow call must not let the run's lease lapse
            renewed = time.monotonic()
            renew_run(page)
    live.empty()
    new_steps = [s for s in settle(page, job) if s.index > drawn]
    v = page.store.versions.get(page.vid)
    if not new_steps or v.outcome.done or not st.session_state.get("run"):
        st.rerun()  # a full rerun: the controls and the outcome show the new state
    new_extras = StepExtras(page, v, new_steps)  # read once for all the new steps
    with box:
        for s in new_steps:  # (a deletion marker before them is already drawn at the end)
            render_step(page, s, v, new_extras, markers=False)
    line.caption(line_of(page, v, page.eng.steps(v)))


def body(page: EditorPage, busy: bool, foreign: bool) -> None:
    """`busy`: this tab's step was in flight when the controls were drawn; `foreign`:
    another tab or process runs a job on the episode."""
    renew_run(page)
    job = finished_job(page)
    v = page.store.versions.get(page.vid)
    steps = page.eng.steps(v)
    if st.session_state.get("run") and job is None:
        job = stepjobs.start(page.eng, page.tab, page.vid, in_run=True)
    with st.container(key="status_line"):
        line = st.empty()
    line.caption(line_of(page, v, steps))
    if job is None and not others_panel(page) and foreign:
        st.rerun()  # the other tab's job ended: the controls come back
    extras = StepExtras(page, v, steps)
    overview_strip(v, steps, extras)
    if st.session_state.get("run"):
        with st.container(key="follow_newest"):  # the page script brings the newest step into view
            st.caption("Running: the newest step is kept in view.")

    box = st.container(key="steps_box")  # the trajectory flows in the page (no inner scroll box)
    edit_at = st.session_state.get("edit_at")
    with box:
        steps_view(page, v, steps, extras, tuple(edit_at) if edit_at else None, st.session_state.get("focus_step"))
    below_steps(page, v, steps, job)
    if job is None:
        if busy:  # the step ended between drawing the controls (disabled) and here
            st.rerun()
        return
    await_step(page, job, line, box, len(steps))
