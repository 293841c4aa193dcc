"""Help for writing an action where the environment has it (ALFWorld): its admissible
commands before a step and the expert's next action, each a click away from the action box."""

from __future__ import annotations

import streamlit as st

from app_pages.editor_context import STEP_ERRORS, EditorPage


def suggestions_for(page: EditorPage, k: int) -> list[str]:
    """Admissible commands before step k (ALFWorld), via the engine's environment."""
    try:
        acts = page.eng.envs.admissible_actions(page.vid, before=k)
    except STEP_ERRORS as exc:
        st.caption("No suggestions:")
        st.text(str(exc))
        return []
    return list(acts or [])


def expert_hint_before(page: EditorPage, k: int | None) -> str | None:
    return page.eng.envs.expert_hint(page.vid, 5.0, before=k)


def fill(target: str, source: str) -> None:
    """Callback: copy a suggestion into the action box (tiny; no engine work here)."""
    value = st.session_state.get(source)
    if value:
        st.session_state[target] = value


def suggestion_box(sugg: list[str], key: str, target: str) -> None:
    """The admissible commands as a pick list that fills the action box `target`."""
    if sugg:
        st.selectbox(
            "Suggestions (admissible commands)",
            sugg,
            index=None,
            key=key,
            on_change=fill,
            args=(target, key),
            placeholder="pick a command",
        )


def hint_controls(page: EditorPage, prefix: str, target: str, before: int | None) -> None:
    """The expert's next action (ALFWorld) and a button that puts it in the action box."""
    if st.button("Expert hint", key=f"{prefix}_hint"):
        try:
            st.session_state[f"{prefix}_hinted"] = expert_hint_before(page, before) or "(no hint available)"
        except STEP_ERRORS as exc:
            st.session_state[f"{prefix}_hinted"] = f"(no hint: {exc})"
    hinted = st.session_state.get(f"{prefix}_hinted")
    if hinted:
        st.caption("Expert hint:")
        st.text(hinted)
        if not hinted.startswith("("):
            st.button(
                "Use the hint as the action", key=f"{prefix}_use_hint", on_click=fill, args=(target, f"{prefix}_hinted")
            )
