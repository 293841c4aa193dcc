"""The Editor's step and run loop: a run is a job of the database (`st.session_state["run"]`),
a single step a job of this tab (`app_pages.stepjobs`); this module opens, renews, settles and
closes them and switches the page to another version."""

from __future__ import annotations

import streamlit as st

from agent.engine import FROZEN
from agent.stop_conditions import first_hit, parse_all
from app_pages import alerts, selection, stepjobs
from app_pages.editor_context import RUN_LEASE_S, STEP_ERRORS, EditorPage
from sessions import jobs, numbering
from trajectory.signals import version_step_signals


def open_run(page: EditorPage, version_id: int, n: int | None, kind: str = "run") -> dict:
    """A run is a job of the database (kind "run", or "edit-and-resume"), renewed by each
    tick of this tab."""
    store = page.store
    ep_of = store.versions.get(version_id).episode_id
    job = jobs.create(
        store,
        kind,
        episode_id=ep_of,
        version_id=version_id,
        session=page.tab,
        lease_s=RUN_LEASE_S,
        target=f"episode {ep_of} {numbering.label_of(store, version_id)}",
    )  # as people read it
    return {"version": version_id, "n": n, "added": 0, "job": job.id}


def close_run(store, how: str = "done") -> None:
    """The run is over: its job says how (done, stopped or failed) - the version's status
    comes from it; nothing is written on the version."""
    r = st.session_state.get("run")
    st.session_state["run"] = None
    if r and r.get("job") is not None:
        jobs.finish(store, r["job"], how, done=r["added"])


def switch_to(page: EditorPage, new_vid: int, resume: int | None | bool = False) -> None:
    """Show another version; `resume` (N steps, or None for "to the end") starts a run there."""
    close_run(page.store, "stopped")
    st.session_state["run"] = None if resume is False else open_run(page, new_vid, resume, "edit-and-resume")
    st.session_state.pop("edit_at", None)
    alerts.clear_error("step")
    selection.select(page.ep_id, new_vid)
    st.rerun()


def switcher(page: EditorPage):
    """`switch_to` for a panel that takes a callback of (version id, resume)."""
    return lambda new_vid, resume=False: switch_to(page, new_vid, resume)


def start_step(page: EditorPage) -> None:
    """Step button callback: runs before the page, so the page draws Step disabled."""
    alerts.clear_error("step")
    st.session_state["last_cmd"] = {"kind": "step"}
    stepjobs.start(page.eng, page.tab, page.vid)


def start_run(page: EditorPage, n: int | None, until: list[str] | None = None) -> None:
    """A run of n steps (None: to the end) that also stops where a condition of `until`
    (stop-condition specs, as `--until` takes them) first holds."""
    alerts.clear_error("step")
    st.session_state["last_cmd"] = {"kind": "run", "n": n, "until": until or []}
    close_run(page.store, "stopped")
    st.session_state["run"] = {**open_run(page, page.vid, n), "until": until or []}


def hit_condition(r: dict, rep) -> bool:
    """True (and a notice saying where and why) when a new step meets a stop condition."""
    if not r.get("until"):
        return False
    found = first_hit(parse_all(r["until"]), rep.steps, version_step_signals(rep.steps, rep.version.outcome))
    if found is None:
        return False
    cond, step = found
    st.session_state["notice"] = f"Run stopped at step {step.index}: {cond.describe()} ({cond.spec})."
    why = str(cond.value).replace("_", " ") if cond.kind == "signal" else cond.describe()
    st.session_state["stop_at"] = {"version": rep.version.id, "index": step.index, "why": why}
    selection.focus_step(rep.version.id, step.index)  # the page shows the step it stopped at
    return True


def settle(page: EditorPage, job: stepjobs.StepJob) -> list:
    """Take a finished step job's result: its new steps, or an inline error."""
    stepjobs.collect(job)
    if job.cancelled:
        return []
    if job.error is not None:
        if not isinstance(job.error, STEP_ERRORS):
            raise job.error
        msg = f"model call failed: {job.unreachable}" if job.unreachable else str(job.error)
        alerts.set_error("step", msg)
        close_run(page.store, "failed")  # the run ended on the error (the message is the version's error)
        return []
    rep = job.result
    r = st.session_state.get("run")
    if rep.version.id != page.vid:  # a frozen version: the steps went to a new child, shown from now on
        st.session_state["notice"] = frozen_notice(page, rep)
        selection.select(page.ep_id, rep.version.id)
        if r:
            r["version"] = rep.version.id
            r["added"] += len(rep.steps)
        st.rerun()
    if r:
        r["added"] += len(rep.steps)
        if hit_condition(r, rep):
            close_run(page.store, "stopped")
        elif rep.done or (r["n"] is not None and r["added"] >= r["n"]):
            close_run(page.store, "done")
            if rep.steps:  # after Run N the newest step is in view
                selection.focus_step(rep.version.id, rep.steps[-1].index)
    return rep.steps


def frozen_notice(page: EditorPage, rep) -> str:
    """The engine's notice in the numbers people read (the new child is not numbered yet here)."""
    new = numbering.labels(page.store, page.ep_id)
    why = FROZEN.get(rep.frozen or "", "relied on")
    return (
        f"{new.get(rep.continued_from, rep.continued_from)} is frozen ({why}); continuing in new version "
        f"{new.get(rep.version.id, rep.version.id)}"
    )


def finished_job(page: EditorPage) -> stepjobs.StepJob | None:
    """The version's step job still in flight (one that ended meanwhile is settled first)."""
    job = stepjobs.current(page.store, page.tab, page.vid)
    if job is not None and job.finished.is_set():
        settle(page, job)
        return None
    return job


def renew_run(page: EditorPage) -> None:
    """Each tick renews the run's job; Stop from another tab or process ends the run here."""
    r = st.session_state.get("run")
    if (
        r
        and r.get("job") is not None
        and jobs.beat(page.store, r["job"], lease_s=RUN_LEASE_S, done=r["added"], version_id=r["version"])
    ):
        stepjobs.cancel(page.store, page.tab, page.vid)
        close_run(page.store, "stopped")
        st.rerun()
