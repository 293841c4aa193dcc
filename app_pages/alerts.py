"""The boxes a page says things in: coloured alerts and captions with every word escaped
(never markdown), and the inline error box with Dismiss and an optional Retry."""

from __future__ import annotations

import html

import streamlit as st

_ALERT_HEADLINES = {"error": "That did not work:", "success": "Done:", "info": "Note:", "warning": "Check this:"}
_ALERT_COLOURS = {
    "error": ("#ffebe9", "#cf222e"),
    "success": ("#dafbe1", "#1a7f37"),
    "info": ("#ddf4ff", "#0969da"),
    "warning": ("#fff8c5", "#9a6700"),
}


def alert_html(text: str, kind: str = "error", headline: str | None = None) -> str:
    """A coloured box with its headline AND its message inside, all escaped: st.error & co.
    render markdown, and messages carry imported names, model output and server text."""
    bg, fg = _ALERT_COLOURS[kind]
    head = html.escape(headline if headline is not None else _ALERT_HEADLINES[kind])
    return (
        f'<div class="re-alert re-alert-{kind}" role="alert" style="background:{bg};border-left:4px solid {fg};'
        f'border-radius:6px;padding:0.6rem 0.9rem;"><div style="color:{fg};font-weight:600">{head}</div>'
        f'<div style="white-space:pre-wrap;word-break:break-word">{html.escape(text)}</div></div>'
    )


def alert(text: str, kind: str = "error", headline: str | None = None) -> None:
    st.html(alert_html(text, kind, headline))


def plain_caption(text: str) -> None:
    """A caption shown exactly as written: st.caption renders markdown (links, images,
    emphasis), and captions carry names people and imported files chose (experiments, exemplar
    sets, models, a signed-in person's e-mail). Escaped, as alert() does."""
    st.html(
        f'<div class="re-caption" style="font-size:0.875rem;opacity:0.6;white-space:pre-wrap;'
        f'word-break:break-word">{html.escape(text)}</div>'
    )


def set_error(where: str, exc: BaseException | str) -> None:
    st.session_state[f"err_{where}"] = str(exc)


def clear_error(where: str) -> None:
    st.session_state.pop(f"err_{where}", None)


def show_error(where: str, *, retry_label: str | None = None) -> bool:
    """An inline error: a fixed headline, the message as plain text, and optionally a
    Retry button (returns True when pressed). Nothing on screen or stored is lost."""
    msg = st.session_state.get(f"err_{where}")
    if not msg:
        return False
    with st.container(border=True, key=f"errbox_{where}"):
        st.error("That did not work — nothing was lost. Details:")
        st.text(msg)
        cols = st.columns([1, 1, 6])
        pressed = bool(retry_label) and cols[0].button(retry_label, key=f"retry_{where}")
        if cols[1].button("Dismiss", key=f"dismiss_{where}"):
            clear_error(where)
            st.rerun()
    return pressed
