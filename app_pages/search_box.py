"""The Episodes page's search box: full-text search over every version (sessions.search).
A hit shows where it is and its snippet with the match highlighted; every piece of text is
escaped before the highlight markup is added, so nothing from the data becomes HTML.
"Open" lands in the Editor at the hit's version and step."""

from __future__ import annotations

import html
from typing import Any

import streamlit as st

from app_pages import selection
from envs.registry import kinds
from sessions import numbering
from sessions.search import OUTCOMES, SearchError, search
from trajectory.signals import SIGNALS


def hit_html(snippet: str, marks: list[tuple[int, int]]) -> str:
    """The snippet as escaped HTML with each match in <mark>."""
    out, pos = [], 0
    for start, end in marks:
        out.append(html.escape(snippet[pos:start]))
        out.append(f"<mark>{html.escape(snippet[start:end])}</mark>")
        pos = end
    out.append(html.escape(snippet[pos:]))
    return '<div style="font-family: monospace; white-space: pre-wrap">' + "".join(out) + "</div>"


def hit_place(hit: Any, label: str | None = None) -> str:
    """Where a hit is, with the per-episode version label people read (v1, v2, ..., r1 ...)."""
    where = f"step {hit.step} · " if hit.step is not None else ""
    return f"episode {hit.episode} · {label or f'v{hit.version}'} · {where}{hit.field}"


def _open(hit: Any) -> None:
    if hit.step is not None:
        st.session_state["edit_at"] = (hit.version, hit.step)  # the Editor opens that step, in view
        selection.focus_step(hit.version, hit.step)
    selection.open_in("editor", hit.episode, hit.version)


def render(store: Any) -> None:
    """Search box, filters and hits."""
    with st.container(border=True, key="search_box"):
        c = st.columns([4, 1.3, 1.3, 1.6, 0.8])
        query = c[0].text_input(
            "Search every trajectory", key="search_q", placeholder='words, "a phrase", prefix*, observation: word'
        )
        env = c[1].selectbox("Environment", ["all", *kinds()], key="search_env")
        outcome = c[2].selectbox("Outcome", ["all", *OUTCOMES], key="search_outcome")
        signal = c[3].selectbox("Signal", ["any", *SIGNALS], key="search_signal")
        limit = c[4].number_input("Max", min_value=1, max_value=200, value=20, key="search_limit")
        if not query.strip():
            return
        try:
            hits = search(
                store,
                query,
                env=None if env == "all" else env,
                outcome=None if outcome == "all" else outcome,
                signal=None if signal == "any" else signal,
                limit=int(limit),
            )
        except SearchError as exc:
            st.text(str(exc))
            return
        if not hits:
            st.caption("No matches.")
        nums = {e: numbering.labels(store, e) for e in {hit.episode for hit in hits}}  # one read per episode
        for n, hit in enumerate(hits):
            row = st.columns([6, 1])
            row[0].text(hit_place(hit, nums[hit.episode].get(hit.version)))
            row[0].html(hit_html(hit.snippet, hit.marks))
            if row[1].button("Open", key=f"search_open_{n}"):
                _open(hit)
