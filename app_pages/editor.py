"""Editor: the trajectory as the paper shows it, the step/run loop, edits and human mode.

A model step runs beside the page as a job of this tab (`app_pages.stepjobs`): the page shows
the call in flight, Step is disabled while it runs, and Stop cancels it (the version stays as
it was); a job another tab or process runs on the episode shows as progress with Stop. A run lives
in `st.session_state["run"]`; each rerun of the editor fragment (every RUN_TICK_S while a run
is on) takes ONE step, so progress is visible and Stop works mid-run. The run controls, the
step count and the outcome stay at the top of the window (sticky); the trajectory flows in the
page under an overview strip of the whole version (`app_pages.overview`), and a run brings
its newest step into view. Untrusted text is only ever shown with st.text / st.code, or as
escaped HTML (the word diff of an edit)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

import streamlit as st

from agent.client import public_url, resolve_base_url
from agent import jobs
from agent.engine import FROZEN, EngineError, ModelCallFailed
from agent.stop_conditions import first_hit, parse_all
from app_pages import overview, signal_badges, state, stepjobs, stop_panel, whatif_panel
from app_pages import suggest_panel
from app_pages.views import origin_text
from app_pages.annotate_widgets import step_tag_panel, version_annotation_panel
from app_pages.textdiff import inline_diff_html
from app_pages.views import (EDIT_CHOICES, action_warning, answer_line, applicable_edits, deleted_here, endpoint_problem, one_line,
                             outcome_text, plural, provenance, replaced_text, step_lines, thoughts_are_turns)
from envs.base import EnvError
from envs.registry import family
from sessions import annotations
from sessions import experiments, numbering
import sessions.jobs
from sessions.store import StoreError
from trajectory.records import MAX_TEXT
from trajectory.signals import version_step_signals

RUN_TICK_S = 0.2
LIVE_STEPS = 30  # the newest steps are interactive; earlier ones are one block of escaped HTML
POLL_S = 0.25
STEP_ERRORS = (ModelCallFailed, EngineError, EnvError, StoreError)
EDITOR_CSS = """<style>
.st-key-run_controls { position: sticky; top: 3.75rem; z-index: 10; background: var(--background-color, #fff);
  padding: 0.25rem 0; box-shadow: 0 -1rem 0 #ffffff; }
.st-key-status_line { position: sticky; top: calc(3.75rem + 58px); z-index: 9; background: var(--background-color, #fff);
  box-shadow: 0 -1.1rem 0 #ffffff; border-bottom: 1px solid #d0d7de; }
[data-testid="stLayoutWrapper"]:has(> .st-key-run_controls) { position: sticky; top: 3.75rem; z-index: 10;
  background: var(--background-color, #ffffff); background-color: #ffffff; box-shadow: 0 -1rem 0 #ffffff; }
[data-testid="stLayoutWrapper"]:has(> .st-key-status_line) { position: sticky; top: calc(3.75rem + 58px); z-index: 9;
  background-color: #ffffff; box-shadow: 0 -1.1rem 0 #ffffff; }
del.rd-del { background: #ffd7d5; text-decoration: line-through; }
ins.rd-ins { background: #ccffd8; text-decoration: none; }
.rd-was { white-space: pre-wrap; word-break: break-word; font-size: 0.9rem; }
[class*="st-key-step_"] { scroll-margin-top: calc(3.75rem + 100px); }
</style>"""
# Warn before a reload or a closed tab loses edit text that was typed but not applied.
UNSAVED_GUARD = """<script>
if (!window.__reactEditorGuard) {
  window.__reactEditorGuard = true;
  const panels = '[class*="st-key-edit_panel_"], [class*="st-key-human_panel"]';
  document.addEventListener('input', (e) => {
    if (e.target.closest && e.target.closest(panels)) { window.__reactEditorDirty = true; }
  }, true);
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest(panels) && e.target.closest('button')) { window.__reactEditorDirty = false; }
  }, true);
  window.addEventListener('beforeunload', (e) => {
    if (window.__reactEditorDirty) { e.preventDefault(); e.returnValue = ''; }
  });
  // a mark of the overview strip scrolls its step into view (no anchor elements per step needed)
  document.addEventListener('click', (e) => {
    const a = e.target.closest && e.target.closest('a.ov-mark');
    if (!a) { return; }
    const n = (a.getAttribute('href') || '').replace('#step-', '');
    const box = document.querySelector('.st-key-step_' + n) || document.querySelector('[data-step="' + n + '"]');
    if (box) { e.preventDefault(); box.scrollIntoView({block: 'start', behavior: 'smooth'}); }
  }, true);
  // while a run is on (a "follow_newest" marker is drawn), bring the newest step into view
  let newest = 0;
  new MutationObserver(() => {
    if (!document.querySelector('[class*="st-key-follow_newest"]')) { newest = 0; return; }
    const boxes = document.querySelectorAll('[class*="st-key-step_"]');
    const last = boxes[boxes.length - 1];
    const n = last ? parseInt((last.className.match(/st-key-step_(\\d+)/) || [0, 0])[1]) : 0;
    if (n > newest) { newest = n; last.scrollIntoView({block: 'end', behavior: 'smooth'}); }
  }).observe(document.body, {childList: true, subtree: true});
  // a focus marker (an opened panel, a search hit, a stop condition, a finished run) brings its step into view, once
  const seen = new Set();
  new MutationObserver(() => {
    document.querySelectorAll('[class*="st-key-focus_step_"]').forEach((m) => {
      const k = m.className.match(/st-key-focus_step_(\\d+)_(\\d+)/);
      const box = k && !seen.has(k[0]) && document.querySelector('.st-key-step_' + k[1]);
      if (box) { seen.add(k[0]); box.scrollIntoView({block: 'start'}); }
    });
  }).observe(document.body, {childList: true, subtree: true});
}
</script>"""

eng = state.engine()
store = eng.store
TAB = st.session_state.setdefault("tab_id", uuid.uuid4().hex)  # whose step results this tab collects
RUN_LEASE_S = 5.0  # a run's job lives while this tab ticks; a reload or a closed tab lets it lapse: "stopped"


def open_run(version_id: int, n: int | None, kind: str = "run") -> dict:
    """A run is a job of the database (kind "run", or "edit-and-resume"), renewed by each
    tick of this tab."""
    ep_of = store.versions.get(version_id).episode_id
    job = sessions.jobs.create(store, kind, episode_id=ep_of, version_id=version_id, session=TAB, lease_s=RUN_LEASE_S,
                               target=f"episode {ep_of} v{numbering.number_of(store, version_id)}")  # as people read it
    return {"version": version_id, "n": n, "added": 0, "job": job.id}


def close_run(how: str = "done") -> None:
    """The run is over: its job says how (done, stopped or failed) - the version's status
    comes from it; nothing is written on the version."""
    r = st.session_state.get("run")
    st.session_state["run"] = None
    if r and r.get("job") is not None:
        sessions.jobs.finish(store, r["job"], how, done=r["added"])

st.title("Editor")
ep_id, vid, ep = state.require_episode("No episode selected. Start or open one on the Episodes page.")
if vid is None:
    st.error(f"Episode {ep_id} has no version.")
    st.stop()
state.select(ep_id, vid)
ep = ep.model_copy(update={"config": store.versions.config(vid)})  # the settings this version runs with
if notice := st.session_state.pop("notice", None):  # e.g. "v3 is frozen (annotated): continued in v7"
    st.info(notice)
st.html(EDITOR_CSS)
st.sidebar.html(UNSAVED_GUARD, unsafe_allow_javascript=True)  # our one script, kept out of the page body

versions = store.versions.of_episode(ep_id)
by_id = {v.id: v for v in versions}
fam = family(ep.task.env)
alf = fam.transcript.thoughts_are_turns  # a thought is its own turn; an action is optional
nums = numbering.numbers(store, ep_id)  # people read per-episode numbers (v1, v2, ...)


def vname(version_id: int) -> str:
    return f"v{nums.get(version_id, version_id)}"
run = st.session_state.get("run")
if run and (run.get("version") != vid):
    close_run("stopped")  # the run belonged to a version no longer shown
    run = None

# ---------------------------------------------------------------------- header
with st.container(key="task_box"):
    state.episode_header(ep)
    if (exp := experiments.of_episode(store, ep_id)) is not None:  # a batch episode: back to its results
        xc = st.columns([5, 1])
        xc[0].text(f"Part of experiment {exp.id} “{exp.name}” ({exp.method} on {exp.env})")
        if xc[1].button("Open experiment", key="ed_open_exp"):
            st.session_state["x_sel"] = exp.id
            st.switch_page(state.page_path("experiments"))
cols = st.columns([3, 2, 3])
ids = [v.id for v in versions]
statuses = state.version_statuses(versions)  # one jobs query for the whole selector
labels = {i: state.version_label(by_id[i], nums.get(i), statuses[i]) + (" · current" if i == ep.current_version else "")
          for i in ids}
# the key carries the labels' state, so a finished run or a new version redraws the selector
chosen = cols[0].selectbox("Version", ids, index=ids.index(vid), format_func=labels.get,
                           key=state.widget_key(f"vsel_{ep_id}_{vid}", labels.values()))
if chosen != vid:
    close_run("stopped")
    state.select(ep_id, chosen)
    st.rerun()
cfg = ep.config
endpoint = public_url(resolve_base_url(cfg))
where = "" if cfg.base_url else (" (from OPENAI_BASE_URL)" if os.environ.get("OPENAI_BASE_URL") else " (OpenAI default)")
cols[1].text(f"Model: {cfg.model}\nStyle: {cfg.style} · {cfg.api_style}")
cols[2].text(f"Endpoint: {endpoint}{where}\nMax steps: {eng.max_steps(ep)}")
state.model_banner(cfg)
unconfirmed = eng.envs.unconfirmed_references(ep)
if unconfirmed:  # an import points outside the data folders: nothing is opened before an OK
    with st.container(border=True, key="confirm_refs"):
        st.warning("This episode was imported and points at files, URLs or a model endpoint you did not choose. "
                   "Nothing is opened and no request (or key) is sent there until you confirm them:")
        st.text("\n".join(unconfirmed))
        if st.button("Confirm and open them", key="confirm_refs_btn"):
            eng.envs.confirm_references(ep_id)
            st.rerun()
with st.expander("Use another model or endpoint for the steps that follow"):
    c = st.columns(3)
    new_url = c[0].text_input("Endpoint (base URL; blank = OPENAI_BASE_URL or OpenAI)", value=cfg.base_url or "",
                              key=f"cfg_url_{ep_id}")
    new_model = c[1].text_input("Model", value=cfg.model, key=f"cfg_model_{ep_id}")
    new_api = c[2].selectbox("API style", ["completions", "chat"], index=["completions", "chat"].index(cfg.api_style),
                             key=f"cfg_api_{ep_id}")
    state.show_error("config")
    if st.button("Use it from here (a new version)", key="cfg_apply"):
        problem = endpoint_problem(new_url)
        if problem:
            state.set_error("config", problem)
            st.rerun()
        state.clear_error("config")
        changed = state.reconfigure(vid, {"base_url": new_url.strip() or None, "model": new_model.strip() or cfg.model,
                                          "api_style": new_api})
        close_run("stopped")
        state.select(ep_id, changed.id)
        st.rerun()


# ---------------------------------------------------------------------- helpers


def switch_to(new_vid: int, resume: int | None | bool = False) -> None:
    """Show another version; `resume` (N steps, or None for "to the end") starts a run there."""
    close_run("stopped")
    st.session_state["run"] = None if resume is False else open_run(new_vid, resume, "edit-and-resume")
    st.session_state.pop("edit_at", None)
    state.clear_error("step")
    state.select(ep_id, new_vid)
    st.rerun()


def start_step() -> None:
    """Step button callback: runs before the page, so the page draws Step disabled."""
    state.clear_error("step")
    st.session_state["last_cmd"] = {"kind": "step"}
    stepjobs.start(eng, TAB, vid)


def start_run(n: int | None, until: list[str] | None = None) -> None:
    """A run of n steps (None: to the end) that also stops where a condition of `until`
    (stop-condition specs, as `--until` takes them) first holds."""
    state.clear_error("step")
    st.session_state["last_cmd"] = {"kind": "run", "n": n, "until": until or []}
    close_run("stopped")
    st.session_state["run"] = {**open_run(vid, n), "until": until or []}


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
    state.focus_step(rep.version.id, step.index)  # the page shows the step it stopped at
    return True


def settle(job: stepjobs.StepJob) -> list:
    """Take a finished step job's result: its new steps, or an inline error."""
    stepjobs.collect(job)
    if job.cancelled:
        return []
    if job.error is not None:
        if not isinstance(job.error, STEP_ERRORS):
            raise job.error
        msg = f"model call failed: {job.unreachable}" if job.unreachable else str(job.error)
        state.set_error("step", msg)
        close_run("failed")  # the run ended on the error (the message is the version's error)
        return []
    rep = job.result
    r = st.session_state.get("run")
    if rep.version.id != vid:  # a frozen version: the steps went to a new child, shown from now on
        st.session_state["notice"] = frozen_notice(rep)
        state.select(ep_id, rep.version.id)
        if r:
            r["version"] = rep.version.id
            r["added"] += len(rep.steps)
        st.rerun()
    if r:
        r["added"] += len(rep.steps)
        if hit_condition(r, rep):
            close_run("stopped")
        elif rep.done or (r["n"] is not None and r["added"] >= r["n"]):
            close_run("done")
            if rep.steps:  # after Run N the newest step is in view
                state.focus_step(rep.version.id, rep.steps[-1].index)
    return rep.steps


def frozen_notice(rep) -> str:
    """The engine's notice in the numbers people read (the new child is not numbered yet here)."""
    new = numbering.numbers(store, ep_id)
    why = FROZEN.get(rep.frozen or "", "relied on")
    return (f"v{new.get(rep.continued_from, rep.continued_from)} is frozen ({why}); continuing in new version "
            f"v{new.get(rep.version.id, rep.version.id)}")


def suggestions_for(k: int) -> list[str]:
    """Admissible commands before step k (ALFWorld), via the engine's environment."""
    try:
        acts = eng.envs.admissible_actions(vid, before=k)
    except STEP_ERRORS as exc:
        st.caption("No suggestions:")
        st.text(str(exc))
        return []
    return list(acts or [])


def expert_hint_before(k: int | None) -> str | None:
    return eng.envs.expert_hint(vid, 5.0, before=k)


def _fill(target: str, source: str) -> None:
    """Callback: copy a suggestion into the action box (tiny; no engine work here)."""
    value = st.session_state.get(source)
    if value:
        st.session_state[target] = value


def hint_controls(prefix: str, target: str, before: int | None) -> None:
    """The expert's next action (ALFWorld) and a button that puts it in the action box."""
    if st.button("Expert hint", key=f"{prefix}_hint"):
        try:
            st.session_state[f"{prefix}_hinted"] = expert_hint_before(before) or "(no hint available)"
        except STEP_ERRORS as exc:
            st.session_state[f"{prefix}_hinted"] = f"(no hint: {exc})"
    hinted = st.session_state.get(f"{prefix}_hinted")
    if hinted:
        st.caption("Expert hint:")
        st.text(hinted)
        if not hinted.startswith("("):
            st.button("Use the hint as the action", key=f"{prefix}_use_hint", on_click=_fill,
                      args=(target, f"{prefix}_hinted"))


class StepExtras:
    """What the steps of a version show besides their text, read once per draw: signals,
    model calls (timing, tokens), tags and notes."""

    def __init__(self, v, steps) -> None:
        self.signals = dict(zip((s.id for s in steps), version_step_signals(steps, v.outcome)))
        ids = [cid for s in steps if s.source == "model" for cid in s.call_ids]
        self.calls = {c.id: c for c in store.calls.read(ids)} if ids else {}
        self.tags = annotations.step_annotations(store, [s.id for s in steps])
        self.cards = suggest_panel.by_step(eng, v.id, v)  # a failed version's suggested fixes, per step
        self.timing = bool(st.session_state.get("show_timing"))


def render_step(s, v, extras: StepExtras, markers: bool = True) -> None:
    """One step's box, always the same number of elements (an empty slot where a step has
    nothing): past LIVE_STEPS each new step moves every box up one place, and a box takes
    over the elements of the one that was there; an element it did not overwrite stayed,
    a ghost line of another step, until the page's run ended."""
    for e in deleted_here(ep.task.env, v.edits, s.index) if markers else []:
        deleted_marker(e)
    with st.container(border=True, key=f"step_{s.index}", gap="xxsmall"):
        head = st.columns([6, 1])
        head[0].caption(f"Step {s.index} · {provenance(s)}")
        sig = extras.signals.get(s.id)
        slot(sig, lambda: st.caption(signal_badges.badge_text(sig), help=signal_badges.HELP))
        if head[1].button("Edit", key=f"editbtn_{vid}_{s.index}", disabled=bool(st.session_state.get("run"))):
            st.session_state["edit_at"] = (vid, s.index)
            state.focus_step(vid, s.index)  # the panels open under the step, in view
            st.rerun()
        lines = step_lines(ep.task.env, s)
        for i in range(STEP_LINES):
            slot(i < len(lines), lambda: st.text(f"{lines[i][0]}: {lines[i][1]}"))
        # the old text once, as a word diff (escaped words, diff markup only)
        slot(replaced_text(s), lambda: st.html(edit_diff_html(s)))
        origin = s.edit is not None and s.edit.origin  # a suggested fix: where it came from (plain text)
        slot(origin, lambda: st.text(origin_text(s.edit.origin)))
        calls = [c for c in (extras.calls.get(i) for i in s.call_ids) if c]
        cuts = [f"(the model's completion was cut to {MAX_TEXT:,} of its {c.cut_from:,} characters)"
                for c in calls if c.cut_from] if s.source == "model" else []
        slot(cuts, lambda: st.text("\n".join(cuts)))
        timing = extras.timing and s.source == "model" and not s.info.get("carried_from")
        slot(timing, lambda: st.caption(overview.call_line(calls)))
        a = extras.tags.get(s.id)
        slot(a is not None and (a.tags or a.note),
             lambda: st.text("Tags: " + (", ".join(a.tags) or "-") + (f" · Note: {a.note}" if a.note else "")))


STEP_LINES = 3  # at most: thought, action, observation (views.step_lines)


def slot(show: object, draw: Callable[[], object]) -> None:
    """One fixed place in a step's box: `draw()` when `show`, else an empty element."""
    if show:
        draw()
    else:
        st.empty()


def edit_diff_html(s) -> str:
    """A person's edit of the step as one line: what it replaced struck, what it wrote marked."""
    action = s.edit.kind == "rewrite_action"
    was, now = (s.edit.old_action, s.action) if action else (s.edit.old_thought, s.thought)
    return f'<div class="rd-was"><b>{"action" if action else "thought"} edited:</b> {inline_diff_html(was, now)}</div>'


def deleted_marker(e) -> None:
    with st.expander("Thought deleted here by a person (show it)", key=f"deleted_{vid}_{e.index}"):
        st.text(e.old_thought or "")


# ---------------------------------------------------------------------- edit panel


RESUME_HERE = "Resume from here"
INSERTS = ("insert_thought", "insert_after")


def edit_panel(v, steps, s) -> None:
    k, n = s.index, len(steps)
    kinds = applicable_edits(s, can_insert_after=k < n or not v.outcome.done,  # after the last step only while it can go on
                             allowed=fam.edit_kinds)
    labels = {EDIT_CHOICES[x]: x for x in kinds}
    with st.container(border=True, key=f"edit_panel_{vid}_{k}"):
        st.caption(f"Edit step {k} — every change makes a new version; {vname(vid)} stays as it is.")
        kind = labels.get(st.radio("Change", [*labels, RESUME_HERE], key=f"ed_kind_{vid}_{k}", horizontal=True))
        text = None
        keep = False
        if kind == "rewrite_thought":
            text = st.text_area("New thought", value=s.thought or "", key=f"ed_thought_{vid}_{k}", height=100)
        elif kind in INSERTS:
            text = st.text_area("Thought to insert (a hint)", value="", key=f"ed_insert_{vid}_{k}", height=100)
        elif kind == "rewrite_action":
            akey = f"ed_action_{vid}_{k}"
            if alf:
                sugg = suggestions_for(k)
                if sugg:
                    st.selectbox("Suggestions (admissible commands)", sugg, index=None, key=f"ed_sugg_{vid}_{k}",
                                 on_change=_fill, args=(akey, f"ed_sugg_{vid}_{k}"), placeholder="pick a command")
                hint_controls(f"ed_{vid}_{k}", akey, k)
            text = st.text_area("New action (the environment runs it)", value=s.action or "", key=akey, height=68)
        if kind in ("rewrite_thought", "delete_thought", *INSERTS):
            can_keep = alf or kind not in INSERTS
            options = ["Regenerate from here", "Keep the later steps"] if can_keep else ["Regenerate from here"]
            keep = st.radio("Later steps (they followed the old text)", options, key=f"ed_keep_{vid}_{k}",
                            horizontal=True) == "Keep the later steps"
        state.show_error("edit")
        c = st.columns([1.3, 1.6, 1.4, 1, 3])
        apply = c[0].button("Edit only" if kind else "Branch only", key=f"ed_apply_{vid}_{k}")
        resume = c[1].button("Edit and resume" if kind else "Branch and resume",
                             key=f"ed_resume_{vid}_{k}", type="primary")
        steps_n = c[2].number_input("then run N steps (0 = to the end)", min_value=0, max_value=500, value=0,
                                    key=f"ed_resume_n_{vid}_{k}")
        if apply or resume:
            state.clear_error("edit")
            text = None if text is None else one_line(text)
            try:
                if kind is None:
                    new = eng.editor.branch(vid, k)
                else:
                    at = k + 1 if kind == "insert_after" else k
                    new = eng.editor.edit(vid, at, "insert_thought" if kind in INSERTS else kind, text, keep_rest=keep)
            except STEP_ERRORS as exc:
                state.set_error("edit", exc)
                st.rerun()
            switch_to(new.id, (int(steps_n) or None) if resume and not new.outcome.done else False)
        if c[3].button("Cancel", key=f"ed_cancel_{vid}_{k}"):
            st.session_state.pop("edit_at", None)
            state.clear_error("edit")
            st.rerun()


# ---------------------------------------------------------------------- human mode


def human_panel(v, n: int) -> None:
    """Keys carry the version and its step count: a taken step (or another version) starts
    from empty boxes, so nothing typed earlier can be sent twice."""
    sfx = f"{vid}_{n}"
    akey = f"h_action_{sfx}"
    with st.container(border=True, key="human_panel"):
        st.caption("Human agent mode: write the next turn yourself (this is how new exemplars are authored).")
        thought = st.text_area("Thought (optional)", key=f"h_thought_{sfx}", height=68)
        sugg: list[str] = []
        if alf:
            sugg = suggestions_for(n + 1)
            if sugg:
                st.selectbox("Suggestions (admissible commands)", sugg, index=None, key=f"h_sugg_{sfx}",
                             on_change=_fill, args=(akey, f"h_sugg_{sfx}"), placeholder="pick a command")
            hint_controls(f"h_{sfx}", akey, None)
        label = "Action (optional)" if alf else f"Action ({fam.action_hint})" if fam.action_hint else "Action"
        action = one_line(st.text_area(label, key=akey, height=68) or "")
        state.show_error("human")
        warning = action_warning(ep.task.env, action, sugg if alf else None)
        confirmed = st.session_state.get(f"h_confirm_{sfx}") == action
        take = st.button("Take this step", key="h_submit", type="primary")
        if warning and st.session_state.get(f"h_warned_{sfx}") == action and not confirmed:
            state.alert(warning, "warning", headline="Check the action before it uses a step:")
            if st.button("Take it anyway", key="h_confirm"):
                st.session_state[f"h_confirm_{sfx}"] = action
                take = True
        if not take:
            return
        if warning and st.session_state.get(f"h_confirm_{sfx}") != action:
            st.session_state[f"h_warned_{sfx}"] = action
            st.rerun()
        state.clear_error("human")
        try:
            rep = eng.human_step(vid, thought=one_line(thought or "") or None, action=action or None)
        except STEP_ERRORS as exc:
            state.set_error("human", exc)
            st.rerun()
        if rep.version.id != vid:  # a frozen version: the step went to a new child
            st.session_state["notice"] = frozen_notice(rep)
            state.select(ep_id, rep.version.id)
        st.rerun()


# ---------------------------------------------------------------------- the body (fragment)


def controls(v, steps, busy: bool):
    """The run controls. They sit outside the ticking fragment: a click on them is a full
    rerun, which interrupts a page waiting for a model call (fragment reruns would queue)."""
    limit = eng.max_steps(ep)
    finished = v.outcome.done or len(steps) >= limit
    running = bool(st.session_state.get("run"))
    with st.container(key="run_controls"):
        c = st.columns([1, 1, 1, 1.3, 1, 2.2])
        off = running or busy or finished
        c[0].button("Step", key="btn_step", disabled=off, on_click=start_step)
        n = c[1].number_input("N", min_value=1, max_value=500, value=5, step=1, key="run_n",
                              label_visibility="collapsed", disabled=off)
        run_n = c[2].button(f"Run {int(n)}", key="btn_run_n", disabled=off)
        run_end = c[3].button("Run to end", key="btn_run_end", disabled=off)
        stop = c[4].button("Stop", key="btn_stop", type="primary" if running or busy else "secondary",
                           disabled=not (running or busy))
        c[5].toggle("Human agent mode", key="human_mode", disabled=finished)
    if finished:  # below the sticky row, which stays one row high (it hid the status line)
        why = "it is finished" if v.outcome.done else f"it has reached its step limit ({limit})"
        st.caption(f"Step and Run are off for {vname(v.id)}: {why}. Branch from an earlier step to try another way.")
        b = st.columns([1, 2, 5])
        k = b[0].number_input("Branch from step", min_value=0, max_value=len(steps), value=max(len(steps) - 1, 0),
                              key=f"branch_k_{vid}", label_visibility="collapsed")
        if b[1].button(f"Branch from step {int(k)}", key="btn_branch"):
            new = eng.editor.branch(vid, int(k))
            switch_to(new.id)
    until, problem = stop_panel.form(disabled=running or finished)  # below the sticky row: it can be tall
    if stop:  # a single step in flight is dropped (the version stays as it was); a run ends stopped
        stepjobs.cancel(store, TAB, vid)
        close_run("stopped")
        st.rerun()
    if (run_n or run_end) and not problem:
        start_run(int(n) if run_n else None, [c.spec for c in until])
        st.rerun()  # a full rerun: the fragment starts ticking
    if state.show_error("step", retry_label="Retry"):
        last = st.session_state.get("last_cmd") or {"kind": "step"}
        state.clear_error("step")
        if last["kind"] == "run":
            start_run(last.get("n"), last.get("until"))
        else:
            start_step()
        st.rerun()


def status_line(v, steps, name: str, r: dict | None, status: str, stop_at: dict | None) -> str:
    """"v3: 14 steps · stopped at step 14: repeated action": the version's one status word,
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


def finished_job() -> stepjobs.StepJob | None:
    """The version's step job still in flight (one that ended meanwhile is settled first)."""
    job = stepjobs.current(store, TAB, vid)
    if job is not None and job.finished.is_set():
        settle(job)
        return None
    return job


def renew_run() -> None:
    """Each tick renews the run's job; Stop from another tab or process ends the run here."""
    r = st.session_state.get("run")
    if r and r.get("job") is not None and sessions.jobs.beat(store, r["job"], lease_s=RUN_LEASE_S, done=r["added"],
                                                             version_id=r["version"]):
        stepjobs.cancel(store, TAB, vid)
        close_run("stopped")
        st.rerun()


def overview_strip(v, steps, extras: StepExtras) -> None:
    """The whole version at a glance; its marks link to the steps below."""
    if not steps:
        return
    edited = [s.index for s in steps if s.edit is not None]  # a person's edit (not every hand-written step)
    st.html(overview.strip_html(steps, [extras.signals.get(s.id, []) for s in steps], v.outcome)
            + overview.edited_css(edited))
    t = st.columns([2, 5])
    t[0].toggle("Timing and tokens per step", key="show_timing")
    if extras.timing:
        t[1].caption(overview.version_timing(extras.calls.values()))


def windows(last: int, size: int = LIVE_STEPS) -> list[tuple[int, int]]:
    """Steps 1..last in windows of `size`: [(1, 30), (31, 60), ...]."""
    return [(a, min(a + size - 1, last)) for a in range(1, last + 1, size)]


def window_label(w: tuple[int, int]) -> str:
    return f"{w[0]}–{w[1]}"


def earlier_steps(v, steps, extras: StepExtras, edit_at: tuple | None, focus: tuple | None) -> None:
    """Steps before the newest LIVE_STEPS: one window of them at a time in full (Edit
    buttons, timing, panels at their step), the others as one fast block each. A focus
    on an earlier step (a search hit, an opened panel) shows its window."""
    older = steps[:-LIVE_STEPS]
    if thoughts_are_turns(ep.task.env):  # as deleted_here: a numbered step keeps its place, no marker
        for e in v.edits:
            if e.kind == "delete_thought" and e.index <= older[-1].index:
                deleted_marker(e)
    wins = windows(older[-1].index)
    key = f"older_win_{vid}"
    if focus and focus[0] == vid and focus[1] <= older[-1].index and st.session_state.get("older_for") != focus:
        st.session_state[key] = next(window_label(w) for w in wins if w[0] <= focus[1] <= w[1])
        st.session_state["older_for"] = focus
    pick = st.segmented_control("Earlier steps in full (Edit, timing)", [window_label(w) for w in wins], key=key)
    for w in wins:
        part = older[w[0] - 1: w[1]]
        if window_label(w) != pick:
            st.html(overview.steps_html(ep.task.env, part, extras.signals, extras.tags))
            for s in part:  # a suggested fix at a step drawn in this block: its card under the block
                suggest_panel.at_step(eng, vid, extras.cards, s.index, switch_to)
            continue
        for s in part:
            render_step(s, v, extras)
            suggest_panel.at_step(eng, vid, extras.cards, s.index, switch_to)
            if edit_at == (vid, s.index):
                step_panels(v, steps, s)


def outcome_box(v) -> None:
    if v.outcome.success:
        st.success(f"Done: success (reward {v.outcome.reward:g}).")
        return
    head = f"Done: failure (reward {v.outcome.reward:g}). Edit a thought or action above to try another way."
    line = answer_line(ep.task.gold, v.outcome.metrics)
    if line:  # the gold answer and the model's come from data: escaped, inside the box
        state.alert(line, "warning", headline=head)
    else:
        st.warning(head)


def step_panels(v, steps, s) -> None:
    """The edit, what-if and tag panels of a step, drawn under the step they belong to."""
    edit_panel(v, steps, s)
    whatif_panel.render(eng, ep, vid, s)
    with st.expander(f"Tags and note for step {s.index}"):
        step_tag_panel(store, s.id, "ed")


def focus_marker(focus: tuple | None, n_steps: int) -> None:
    """The page script scrolls the focused step into view when this marker first appears."""
    if focus and focus[0] == vid and 1 <= focus[1] <= n_steps:
        with st.container(key=f"focus_step_{focus[1]}_{focus[2]}", height=1, border=False):
            st.html("<span></span>")


def steps_view(v, steps, extras: StepExtras, edit_at: tuple | None, focus: tuple | None) -> None:
    """Every step; the panels of the step being edited open under it."""
    live = steps[-LIVE_STEPS:]
    if len(steps) > LIVE_STEPS:
        earlier_steps(v, steps, extras, edit_at, focus)
    for s in live:
        render_step(s, v, extras)
        suggest_panel.at_step(eng, vid, extras.cards, s.index, switch_to)  # suggested fixes at their step
        if edit_at == (vid, s.index):
            step_panels(v, steps, s)
    for e in deleted_here(ep.task.env, v.edits, len(steps) + 1):
        deleted_marker(e)
    focus_marker(focus, len(steps))


def body() -> None:
    renew_run()
    job = finished_job()
    v = store.versions.get(vid)
    steps = eng.steps(v)
    if st.session_state.get("run") and job is None:
        job = stepjobs.start(eng, TAB, vid, in_run=True)
    with st.container(key="status_line"):
        line = st.empty()
    line.caption(line_of(v, steps))
    if job is None and not others_panel() and foreign:
        st.rerun()  # the other tab's job ended: the controls come back
    extras = StepExtras(v, steps)
    overview_strip(v, steps, extras)
    if st.session_state.get("run"):
        with st.container(key="follow_newest"):  # the page script brings the newest step into view
            st.caption("Running: the newest step is kept in view.")

    box = st.container(key="steps_box")  # the trajectory flows in the page (no inner scroll box)
    edit_at = st.session_state.get("edit_at")
    with box:
        steps_view(v, steps, extras, tuple(edit_at) if edit_at else None, st.session_state.get("focus_step"))
    if v.draft_thought is not None:
        st.caption(f"Pending thought for step {len(steps) + 1} (the model writes its action next):")
        st.text(v.draft_thought)
    if v.outcome.done:
        outcome_box(v)
        suggest_panel.render(eng, vid, v, switch_to)  # on a failed version: "Suggest fixes"
    elif st.session_state.get("human_mode") and not st.session_state.get("run") and job is None:
        human_panel(v, len(steps))
    with st.expander(f"Annotate {vname(v.id)}: verdict, failure modes, notes, exemplar-ready"):
        version_annotation_panel(store, v.id, "ed")
    if st.toggle("Show the next prompt", key="show_prompt"):
        try:
            st.code(eng.prompts.prompt(vid), language=None, wrap_lines=True)
        except STEP_ERRORS as exc:
            st.text(str(exc))

    if job is None:
        if busy:  # the step ended between drawing the controls (disabled) and here
            st.rerun()
        return
    renewed = time.monotonic()
    while not job.finished.wait(POLL_S):  # a click on the controls interrupts this at line.caption
        line.text(job.status())  # the retry reason quotes the server: plain text
        if time.monotonic() - renewed > RUN_LEASE_S / 3:  # a slow call must not let the run's lease lapse
            renewed = time.monotonic()
            renew_run()
    new_steps = settle(job)
    v = store.versions.get(vid)
    if not new_steps or v.outcome.done or not st.session_state.get("run"):
        st.rerun()  # a full rerun: the controls and the outcome show the new state
    new_extras = StepExtras(v, new_steps)  # read once for all the new steps
    with box:
        for s in new_steps:  # (a deletion marker before them is already drawn at the end)
            render_step(s, v, new_extras, markers=False)
    line.caption(line_of(v, eng.steps(v)))


def line_of(v, steps) -> str:
    return status_line(v, steps, vname(v.id), st.session_state.get("run"), state.version_status(v),
                       st.session_state.get("stop_at"))


def others_panel() -> bool:
    """Jobs on this episode that another tab or process runs: progress, with Stop."""
    live = stepjobs.others(store, ep_id, TAB)
    for j in live:
        c = st.columns([6, 1])
        done = f" · {j.done}/{j.total}" if j.total else ""
        c[0].caption(f"Job {j.id} ({j.kind}, {j.target}) is {j.state} in another tab or process{done}")
        if c[1].button("Stop", key=f"stop_job_{j.id}", disabled=j.stop):
            jobs.stop(store, j.id)
            st.rerun()
    return bool(live)


busy = finished_job() is not None
foreign = bool(stepjobs.others(store, ep_id, TAB))
now = store.versions.get(vid)
controls(now, eng.steps(now), busy or foreign)
st.fragment(run_every=RUN_TICK_S if st.session_state.get("run") or foreign else None)(body)()
