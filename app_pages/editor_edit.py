"""The edit panel under a step: rewrite or delete a thought, insert one, rewrite an action,
or only branch; then stay, or resume the run from the new version."""

from __future__ import annotations

import streamlit as st

from app_pages import alerts
from app_pages.editor_context import STEP_ERRORS, EditorPage
from app_pages.editor_hints import hint_controls, suggestion_box, suggestions_for
from app_pages.editor_run import switch_to
from app_pages.page_text import EDIT_CHOICES, applicable_edits, one_line

RESUME_HERE = "Resume from here"
INSERTS = ("insert_thought", "insert_after")


def edit_text(page: EditorPage, s, kind: str | None) -> str | None:
    """The text box the chosen change needs (None for a deletion or a plain branch)."""
    vid, k = page.vid, s.index
    if kind == "rewrite_thought":
        return st.text_area("New thought", value=s.thought or "", key=f"ed_thought_{vid}_{k}", height=100)
    if kind in INSERTS:
        return st.text_area("Thought to insert (a hint)", value="", key=f"ed_insert_{vid}_{k}", height=100)
    if kind == "rewrite_reasoning":
        return st.text_area("New reasoning", value=s.reasoning or "", key=f"ed_reasoning_{vid}_{k}", height=150)
    if kind == "rewrite_action":
        akey = f"ed_action_{vid}_{k}"
        if page.alf:
            suggestion_box(suggestions_for(page, k), f"ed_sugg_{vid}_{k}", akey)
            hint_controls(page, f"ed_{vid}_{k}", akey, k)
        label = "New action (the environment runs it)"
        if getattr(s, "tool_call", None) is not None:
            label += ': its text form, or the call as JSON {"name": ..., "arguments": {...}}'
        return st.text_area(label, value=s.action or "", key=akey, height=68)
    return None


def keep_later(page: EditorPage, k: int, kind: str | None) -> bool:
    """Whether the later steps stay after a thought changes (they followed the old text)."""
    if kind not in ("rewrite_thought", "delete_thought", "rewrite_reasoning", *INSERTS):
        return False
    can_keep = page.alf or kind not in INSERTS
    options = ["Regenerate from here", "Keep the later steps"] if can_keep else ["Regenerate from here"]
    return (
        st.radio("Later steps (they followed the old text)", options, key=f"ed_keep_{page.vid}_{k}", horizontal=True)
        == "Keep the later steps"
    )


def apply_edit(
    page: EditorPage, k: int, kind: str | None, text: str | None, keep: bool, resume: bool, steps_n: int
) -> None:
    """Make the new version (an edit, or a plain branch) and show it, resuming if asked."""
    alerts.clear_error("edit")
    text = None if text is None else text.strip() if kind == "rewrite_reasoning" else one_line(text)
    try:
        if kind is None:
            new = page.eng.editor.branch(page.vid, k)
        else:
            at = k + 1 if kind == "insert_after" else k
            new = page.eng.editor.edit(
                page.vid, at, "insert_thought" if kind in INSERTS else kind, text, keep_rest=keep
            )
    except STEP_ERRORS as exc:
        alerts.set_error("edit", exc)
        st.rerun()
    switch_to(page, new.id, (int(steps_n) or None) if resume and not new.outcome.done else False)


def close_edit() -> None:
    """Cancel's callback: the panels close in the run the click starts (no second run)."""
    st.session_state.pop("edit_at", None)
    alerts.clear_error("edit")


def edit_panel(page: EditorPage, v, steps, s) -> None:
    vid, k, n = page.vid, s.index, len(steps)
    kinds = applicable_edits(
        s,
        can_insert_after=k < n or not v.outcome.done,  # after the last step only while it can go on
        allowed=page.fam.edit_kinds,
        reasoning=True,
    )
    labels = {EDIT_CHOICES[x]: x for x in kinds}
    with st.container(border=True, key=f"edit_panel_{vid}_{k}"):
        st.caption(f"Edit step {k} — every change makes a new version; {page.vname(vid)} stays as it is.")
        kind = labels.get(st.radio("Change", [*labels, RESUME_HERE], key=f"ed_kind_{vid}_{k}", horizontal=True))
        text = edit_text(page, s, kind)
        keep = keep_later(page, k, kind)
        alerts.show_error("edit")
        c = st.columns([1.3, 1.6, 1.4, 1, 3])
        apply = c[0].button("Edit only" if kind else "Branch only", key=f"ed_apply_{vid}_{k}")
        resume = c[1].button(
            "Edit and resume" if kind else "Branch and resume", key=f"ed_resume_{vid}_{k}", type="primary"
        )
        steps_n = c[2].number_input(
            "then run N steps (0 = to the end)", min_value=0, max_value=500, value=0, key=f"ed_resume_n_{vid}_{k}"
        )
        if apply or resume:
            apply_edit(page, k, kind, text, keep, resume, steps_n)
        c[3].button("Cancel", key=f"ed_cancel_{vid}_{k}", on_click=close_edit)
