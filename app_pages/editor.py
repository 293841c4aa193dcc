"""Editor: the trajectory as the paper shows it, the step/run loop, edits and human mode.

The run loop lives in `st.session_state["run"]`; each rerun of the editor fragment advances
it by ONE `engine.step` (the fragment reruns itself every RUN_TICK_S while a run is on), so
progress is visible and Stop - a button that clears the flag - works mid-run. Nothing long
runs in a button callback. Untrusted text is only ever shown with st.text / st.code."""

from __future__ import annotations

import streamlit as st

from agent.engine import EngineError, ModelCallFailed
from app_pages import state, whatif_panel
from app_pages.annotate_widgets import step_tag_panel, version_annotation_panel
from app_pages.views import outcome_text, provenance, replaced_text, step_lines
from envs.base import EnvError
from sessions.store import StoreError

RUN_TICK_S = 0.2
STEP_ERRORS = (ModelCallFailed, EngineError, EnvError, StoreError)

eng = state.engine()
store = eng.store

st.title("Editor")
ep_id, vid, ep = state.require_episode("No episode selected. Start or open one on the Episodes page.")
if vid is None:
    st.error(f"Episode {ep_id} has no version.")
    st.stop()
state.select(ep_id, vid)

versions = store.versions(ep_id)
by_id = {v.id: v for v in versions}
alf = ep.task.env == "alfworld"
run = st.session_state.get("run")
if run and (run.get("version") != vid):
    st.session_state["run"] = run = None  # the run belonged to a version no longer shown

# ---------------------------------------------------------------------- header
with st.container(key="task_box"):
    state.episode_header(ep)
cols = st.columns([3, 2, 2])
ids = [v.id for v in versions]
labels = {i: state.version_label(by_id[i]) + (" · current" if i == ep.current_version else "") for i in ids}
# the key carries the labels' state, so a finished run or a new version redraws the selector
chosen = cols[0].selectbox("Version", ids, index=ids.index(vid), format_func=labels.get,
                           key=state.widget_key(f"vsel_{ep_id}_{vid}", labels.values()))
if chosen != vid:
    st.session_state["run"] = None
    state.select(ep_id, chosen)
    st.rerun()
cfg = ep.config
cols[1].text(f"Model: {cfg.model}\nStyle: {cfg.style} · {cfg.api_style}")
cols[2].text(f"Endpoint: {cfg.base_url or '(default)'}\nMax steps: {eng.max_steps(ep)}")
state.model_banner(cfg)


# ---------------------------------------------------------------------- helpers


def switch_to(new_vid: int) -> None:
    st.session_state["run"] = None
    st.session_state.pop("edit_at", None)
    state.clear_error("step")
    state.select(ep_id, new_vid)
    st.rerun()


def do_step() -> None:
    state.clear_error("step")
    st.session_state["last_cmd"] = {"kind": "step"}
    try:
        with state.lock():
            rep = eng.step(vid)
    except STEP_ERRORS as exc:
        state.set_error("step", exc)
        return
    if rep.done:
        st.rerun()  # the header shows the outcome too


def start_run(n: int | None) -> None:
    state.clear_error("step")
    st.session_state["last_cmd"] = {"kind": "run", "n": n}
    st.session_state["run"] = {"version": vid, "n": n, "added": 0}
    st.rerun()  # a full rerun so the fragment starts ticking


def tick() -> bool:
    """Advance the run by one step. Returns True when the run ended in this tick."""
    r = st.session_state.get("run")
    v = store.version(vid)
    if v.outcome.done or len(eng.steps(v)) >= eng.max_steps(ep):
        st.session_state["run"] = None
        return True
    try:
        with state.lock():
            rep = eng.step(vid)
    except STEP_ERRORS as exc:
        state.set_error("step", exc)
        st.session_state["run"] = None
        return True
    r["added"] += len(rep.steps)
    if rep.done or (r["n"] is not None and r["added"] >= r["n"]):
        st.session_state["run"] = None
        return True
    return False


def suggestions_for(k: int) -> list[str]:
    """Admissible commands before step k (ALFWorld), via the engine's environment."""
    try:
        with state.lock():
            acts = eng.admissible_actions(vid, before=k)
    except STEP_ERRORS as exc:
        st.caption("No suggestions:")
        st.text(str(exc))
        return []
    return list(acts or [])


def expert_hint_before(k: int) -> str | None:
    with state.lock():
        return eng.expert_hint(vid, 5.0, before=k)


def _fill(target: str, source: str) -> None:
    """Callback: copy a suggestion into the action box (tiny; no engine work here)."""
    value = st.session_state.get(source)
    if value:
        st.session_state[target] = value


# ---------------------------------------------------------------------- edit panel


def edit_panel(v, steps, s) -> None:
    k, n = s.index, len(steps)
    kinds = []
    if s.thought is not None:
        kinds += ["Rewrite thought", "Delete thought"]
    if k < n or not v.outcome.done:  # after the last step only while the version can go on
        kinds.append("Insert thought after")
    if s.action is not None:
        kinds.append("Rewrite action")
    kinds.append("Resume from here")
    with st.container(border=True, key=f"edit_panel_{vid}_{k}"):
        st.caption(f"Edit step {k} — every change makes a new version; v{vid} stays as it is.")
        kind = st.radio("Change", kinds, key=f"ed_kind_{vid}_{k}", horizontal=True)
        text = None
        keep = False
        if kind == "Rewrite thought":
            text = st.text_input("New thought", value=s.thought or "", key=f"ed_thought_{vid}_{k}")
        elif kind == "Insert thought after":
            text = st.text_input("Thought to insert (a hint)", value="", key=f"ed_insert_{vid}_{k}")
        elif kind == "Rewrite action":
            akey = f"ed_action_{vid}_{k}"
            if alf:
                sugg = suggestions_for(k)
                if sugg:
                    st.selectbox("Suggestions (admissible commands)", sugg, index=None, key=f"ed_sugg_{vid}_{k}",
                                 on_change=_fill, args=(akey, f"ed_sugg_{vid}_{k}"), placeholder="pick a command")
                if st.button("Expert hint", key=f"ed_hint_{vid}_{k}"):
                    try:
                        st.session_state[f"ed_hinted_{vid}_{k}"] = expert_hint_before(k) or "(no hint available)"
                    except STEP_ERRORS as exc:
                        st.session_state[f"ed_hinted_{vid}_{k}"] = f"(no hint: {exc})"
                hinted = st.session_state.get(f"ed_hinted_{vid}_{k}")
                if hinted:
                    st.caption("Expert hint:")
                    st.text(hinted)
                    if not hinted.startswith("("):
                        st.button("Use the hint", key=f"ed_use_hint_{vid}_{k}", on_click=_fill,
                                  args=(akey, f"ed_hinted_{vid}_{k}"))
            text = st.text_input("New action (the environment runs it)", value=s.action or "", key=akey)
        if kind in ("Rewrite thought", "Delete thought", "Insert thought after"):
            can_keep = alf or kind != "Insert thought after"
            options = ["Keep the later steps", "Regenerate from here"] if can_keep else ["Regenerate from here"]
            keep = st.radio("Later steps", options, key=f"ed_keep_{vid}_{k}", horizontal=True) == "Keep the later steps"
        state.show_error("edit")
        c = st.columns([2, 1, 5])
        if c[0].button("Apply as new version", key=f"ed_apply_{vid}_{k}", type="primary"):
            state.clear_error("edit")
            try:
                with state.lock():
                    if kind == "Rewrite thought":
                        new = eng.edit(vid, k, "rewrite_thought", text, keep_rest=keep)
                    elif kind == "Delete thought":
                        new = eng.edit(vid, k, "delete_thought", keep_rest=keep)
                    elif kind == "Insert thought after":
                        new = eng.edit(vid, k + 1, "insert_thought", text, keep_rest=keep)
                    elif kind == "Rewrite action":
                        new = eng.edit(vid, k, "rewrite_action", text)
                    else:
                        new = eng.branch(vid, k)
            except STEP_ERRORS as exc:
                state.set_error("edit", exc)
                st.rerun()
            switch_to(new.id)
        if c[1].button("Cancel", key=f"ed_cancel_{vid}_{k}"):
            st.session_state.pop("edit_at", None)
            state.clear_error("edit")
            st.rerun()


# ---------------------------------------------------------------------- human mode


def human_panel(v) -> None:
    with st.container(border=True, key="human_panel"):
        st.caption("Human agent mode: write the next turn yourself (this is how new exemplars are authored).")
        thought = st.text_input("Thought (optional)", key="h_thought")
        if alf:
            sugg = suggestions_for(len(eng.steps(v)) + 1)
            if sugg:
                st.selectbox("Suggestions (admissible commands)", sugg, index=None, key="h_sugg",
                             on_change=_fill, args=("h_action", "h_sugg"), placeholder="pick a command")
            if st.button("Expert hint", key="h_hint"):
                try:
                    with state.lock():
                        st.session_state["h_hinted"] = eng.expert_hint(vid, 5.0) or "(no hint available)"
                except STEP_ERRORS as exc:
                    st.session_state["h_hinted"] = f"(no hint: {exc})"
            if st.session_state.get("h_hinted"):
                st.caption("Expert hint:")
                st.text(st.session_state["h_hinted"])
                if not st.session_state["h_hinted"].startswith("("):
                    st.button("Use the hint as the action", key="h_use_hint", on_click=_fill, args=("h_action", "h_hinted"))
        label = "Action (optional)" if alf else "Action (Search[...], Lookup[...] or Finish[...])"
        action = st.text_input(label, key="h_action")
        state.show_error("human")
        if st.button("Take this step", key="h_submit", type="primary"):
            state.clear_error("human")
            try:
                with state.lock():
                    eng.human_step(vid, thought=thought or None, action=action or None)
            except STEP_ERRORS as exc:
                state.set_error("human", exc)
                st.rerun()
            for key in ("h_thought", "h_action", "h_sugg", "h_hinted"):
                st.session_state.pop(key, None)
            st.rerun()


# ---------------------------------------------------------------------- the body (fragment)


def body() -> None:
    running = bool(st.session_state.get("run"))
    c = st.columns([1, 1, 1, 1.3, 1, 2.2])
    step_clicked = c[0].button("Step", key="btn_step", disabled=running)
    n = c[1].number_input("N", min_value=1, max_value=500, value=5, step=1, key="run_n", label_visibility="collapsed")
    run_n = c[2].button(f"Run {int(n)}", key="btn_run_n", disabled=running)
    run_end = c[3].button("Run to end", key="btn_run_end", disabled=running)
    stop = c[4].button("Stop", key="btn_stop", type="primary" if running else "secondary")
    human = c[5].toggle("Human agent mode", key="human_mode")

    ended = False
    if stop:
        if st.session_state.get("run"):
            st.session_state["run"] = None
            v0 = store.version(vid)
            if not v0.outcome.done:
                store.update_version(vid, status="stopped")
            st.rerun()
    elif step_clicked:
        do_step()
    elif run_n:
        start_run(int(n))
    elif run_end:
        start_run(None)
    elif running:
        ended = tick()

    if state.show_error("step", retry_label="Retry"):
        last = st.session_state.get("last_cmd") or {"kind": "step"}
        state.clear_error("step")
        if last["kind"] == "run":
            start_run(last.get("n"))
        else:
            do_step()
            st.rerun()

    v = store.version(vid)
    steps = eng.steps(v)
    r = st.session_state.get("run")
    limit = eng.max_steps(ep)
    if r:
        total = r["n"] if r["n"] is not None else max(limit - len(steps) + r["added"], 1)
        st.progress(min(r["added"] / max(total, 1), 1.0),
                    text=f"Running… {r['added']} step(s) added, {len(steps)}/{limit} in this version. Press Stop to halt.")
    status = outcome_text(v.outcome, v.status)
    st.caption(f"v{v.id}: {len(steps)} steps · {status}"
               + (f" · reward {v.outcome.reward:g}" if v.outcome.done else ""), help=None)

    edit_at = st.session_state.get("edit_at")
    for s in steps:
        with st.container(border=True, key=f"step_{s.index}", gap="xxsmall"):
            head = st.columns([6, 1])
            head[0].caption(f"Step {s.index} · {provenance(s)}")
            if head[1].button("Edit", key=f"editbtn_{vid}_{s.index}", disabled=bool(r)):
                st.session_state["edit_at"] = (vid, s.index)
                st.rerun()
            for label, text in step_lines(ep.task.env, s):
                st.text(f"{label}: {text}")
            old = replaced_text(s)
            if old:
                st.text(f"({old})")
        if edit_at == (vid, s.index):
            edit_panel(v, steps, s)
            whatif_panel.render(eng, ep, vid, s)
            with st.expander(f"Tags and note for step {s.index}"):
                step_tag_panel(store, s.id, "ed")
    if v.draft_thought is not None:
        st.caption(f"Pending thought for step {len(steps) + 1} (the model writes its action next):")
        st.text(v.draft_thought)
    if v.outcome.done:
        if v.outcome.success:
            st.success(f"Done: success (reward {v.outcome.reward:g}).")
        else:
            st.warning(f"Done: failure (reward {v.outcome.reward:g}). Edit a thought or action above to try another way.")
    elif human and not r:
        human_panel(v)
    with st.expander(f"Annotate v{v.id}: verdict, failure modes, notes, exemplar-ready"):
        version_annotation_panel(store, v.id, "ed")
    if st.toggle("Show the next prompt", key="show_prompt"):
        try:
            st.code(eng.prompt(vid), language=None)
        except STEP_ERRORS as exc:
            st.text(str(exc))

    if ended:
        st.rerun()  # a full rerun: the fragment stops ticking


st.fragment(run_every=RUN_TICK_S if run else None)(body)()
