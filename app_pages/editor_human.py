"""Human agent mode: a person writes the next turn (how new exemplars are authored); an
action the family warns about needs a second click."""

from __future__ import annotations

import streamlit as st

from app_pages import alerts, selection
from app_pages.editor_context import STEP_ERRORS, EditorPage
from app_pages.editor_hints import hint_controls, suggestion_box, suggestions_for
from app_pages.editor_run import frozen_notice
from app_pages.page_text import action_warning, one_line


def human_turn(page: EditorPage, sfx: str, n: int) -> tuple[str, str, list[str]]:
    """The thought and action boxes (with ALFWorld's suggestions and hint): what was typed."""
    akey = f"h_action_{sfx}"
    thought = st.text_area("Thought (optional)", key=f"h_thought_{sfx}", height=68)
    sugg: list[str] = []
    if page.alf:
        sugg = suggestions_for(page, n + 1)
        suggestion_box(sugg, f"h_sugg_{sfx}", akey)
        hint_controls(page, f"h_{sfx}", akey, None)
    fam = page.fam
    # a turn of a family whose thoughts are turns is a thought, an action, or both
    label = (
        f"Action ({fam.action_hint})"
        if fam.action_hint
        else "Action (a command; leave it empty to write a thought alone)"
        if page.alf
        else "Action"
    )
    action = one_line(st.text_area(label, key=akey, height=68) or "")
    return thought, action, sugg


def take_step(page: EditorPage, thought: str, action: str) -> None:
    """The person's step, on this version or (a frozen one) on a new child."""
    alerts.clear_error("human")
    try:
        rep = page.eng.human_step(page.vid, thought=one_line(thought or "") or None, action=action or None)
    except STEP_ERRORS as exc:
        alerts.set_error("human", exc)
        st.rerun()
    if rep.version.id != page.vid:  # a frozen version: the step went to a new child
        st.session_state["notice"] = frozen_notice(page, rep)
        selection.select(page.ep_id, rep.version.id)
    st.rerun()


def human_panel(page: EditorPage, v, n: int) -> None:
    """Keys carry the version and its step count: a taken step (or another version) starts
    from empty boxes, so nothing typed earlier can be sent twice."""
    sfx = f"{page.vid}_{n}"
    with st.container(border=True, key="human_panel"):
        st.caption("Human agent mode: write the next turn yourself (this is how new exemplars are authored).")
        thought, action, sugg = human_turn(page, sfx, n)
        alerts.show_error("human")
        warning = action_warning(page.ep.task.env, action, sugg if page.alf else None)
        confirmed = st.session_state.get(f"h_confirm_{sfx}") == action
        warned = bool(warning) and st.session_state.get(f"h_warned_{sfx}") == action and not confirmed
        take = take_buttons(sfx, action, warning if warned else None)
        if not take:
            return
        if warning and st.session_state.get(f"h_confirm_{sfx}") != action:
            st.session_state[f"h_warned_{sfx}"] = action
            st.session_state[f"h_warns_{sfx}"] = st.session_state.get(f"h_warns_{sfx}", 0) + 1
            st.rerun()
        take_step(page, thought, action)


def take_buttons(sfx: str, action: str, warning: str | None) -> bool:
    """ "Take this step", and once it was pressed on an action the family warns about, the
    warning ABOVE the buttons with "Take it anyway" beside it (drawn under the button, it fell
    below the window's edge); each warning's box is a new key the page script brings into view.
    True when the step is to be taken."""
    key = f"h_check_{sfx}_{st.session_state.get(f'h_warns_{sfx}', 0)}" if warning else "h_take"
    with st.container(key=key):
        if warning:
            alerts.alert(warning, "warning", headline="Check the action before it uses a step:")
        row = st.container(horizontal=True)
        take = row.button("Take this step", key="h_submit", type="primary")
        if warning and row.button("Take it anyway", key="h_confirm"):
            st.session_state[f"h_confirm_{sfx}"] = action
            take = True
    return take
