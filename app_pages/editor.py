"""Editor: the trajectory as the paper shows it, the step/run loop, edits and human mode.

A model step runs beside the page as a job of this tab (`app_pages.stepjobs`): the page shows
the call in flight, Step is disabled while it runs, and Stop cancels it (the version stays as
it was); a job another tab or process runs on the episode shows as progress with Stop. A run lives
in `st.session_state["run"]`; each rerun of the editor fragment (every RUN_TICK_S while a run
is on) takes ONE step, so progress is visible and Stop works mid-run. The run controls, the
step count and the outcome stay at the top of the window (sticky); the trajectory flows in the
page under an overview strip of the whole version (`app_pages.overview`), and a run brings
its newest step into view. Untrusted text is only ever shown with st.text / st.code, or as
escaped HTML (the word diff of an edit).

This script reads the page state once (`EditorPage`) and composes the components:
`editor_header` (task, version, model), `editor_controls` (run controls, status line),
`editor_body` (the ticking fragment: `editor_steps`, `editor_edit`, `editor_human`), with the
run loop in `editor_run`."""

from __future__ import annotations

import uuid

import streamlit as st

from app_pages import app_engine, selection, stepjobs
from app_pages.editor_assets import EDITOR_CSS, UNSAVED_GUARD
from app_pages.editor_body import body
from app_pages.editor_context import RUN_TICK_S, EditorPage
from app_pages.editor_controls import controls
from app_pages.editor_header import header
from app_pages.editor_run import close_run, finished_job
from envs.registry import family
from sessions import numbering

eng = app_engine.engine()
store = eng.store
tab = st.session_state.setdefault("tab_id", uuid.uuid4().hex)  # whose step results this tab collects

st.title("Editor")
ep_id, vid, ep = selection.require_episode("No episode selected. Start or open one on the Episodes page.")
if vid is None:
    st.error(f"Episode {ep_id} has no version.")
    st.stop()
selection.select(ep_id, vid)
ep = ep.model_copy(update={"config": store.versions.config(vid)})  # the settings this version runs with
if notice := st.session_state.pop("notice", None):  # e.g. "v3 is frozen (annotated): continued in v7"
    st.info(notice)
st.html(EDITOR_CSS)
st.sidebar.html(UNSAVED_GUARD, unsafe_allow_javascript=True)  # our one script, kept out of the page body

versions = store.versions.of_episode(ep_id)
page = EditorPage(
    eng=eng, tab=tab, ep_id=ep_id, vid=vid, ep=ep, fam=family(ep.task.env), nums=numbering.labels(store, ep_id)
)  # people read per-episode numbers (v1, v2, ...)
run = st.session_state.get("run")
if run and (run.get("version") != vid):
    close_run(store, "stopped")  # the run belonged to a version no longer shown

header(page, versions)
busy = finished_job(page) is not None
foreign = bool(stepjobs.others(store, ep_id, tab))
now = store.versions.get(vid)
controls(page, now, eng.steps(now), busy or foreign)
st.fragment(run_every=RUN_TICK_S if st.session_state.get("run") or foreign else None)(body)(page, busy, foreign)
