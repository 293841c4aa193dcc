"""The episode and version a page shows: the URL's (`?episode=N&version=M`, so a link can be
shared), else the session's last choice; and moving to another page with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from app_pages.app_engine import store
from sessions.store import StoreError

PAGES_DIR = Path(__file__).resolve().parent


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def selection() -> tuple[int | None, int | None]:
    """The episode/version to show: the URL (`?episode=N&version=M`) wins, then the
    session's last choice, then the episode's current version."""
    ep, ver, _ = _selected()
    return ep, ver


def _selected() -> tuple[int | None, int | None, Any]:
    """`selection()` and the Episode it read (None when there is none or it cannot be read)."""
    qp = st.query_params
    ep = _int(qp.get("episode"))
    ver = _int(qp.get("version"))
    if ep is None:
        ep = st.session_state.get("sel_episode")
        if ver is None and ep is not None:
            ver = st.session_state.get("sel_version")
    if ep is None:
        return None, None, None
    s = store()
    try:
        episode = s.episodes.get(ep)
    except StoreError:
        return ep, None, None
    if ver is not None:
        try:
            s.versions.get(ver, ep)
        except StoreError:
            ver = None
    if ver is None:
        ver = episode.current_version
    return ep, ver, episode


def require_episode(missing: str) -> tuple[int, int | None, Any]:
    """(episode id, version id, Episode) of the selection; otherwise say why and stop the page."""
    ep_id, vid, ep = _selected()
    if ep_id is None:
        st.info(missing)
        st.page_link(page_path("episodes"), label="Go to Episodes")
        st.stop()
    try:
        ep = ep if ep is not None else store().episodes.get(ep_id)  # read once (_selected) when it could be
    except StoreError as exc:
        st.error("Cannot open that episode:")
        st.text(str(exc))
        st.stop()
    return ep_id, vid, ep


def select(episode_id: int | None, version_id: int | None) -> None:
    """Remember the choice in the session and the URL (so the link can be shared)."""
    st.session_state["sel_episode"] = episode_id
    st.session_state["sel_version"] = version_id
    if episode_id is None:
        st.query_params.clear()
        return
    params = {"episode": str(episode_id)}
    if version_id is not None:
        params["version"] = str(version_id)
    st.query_params.from_dict(params)


def link_params() -> dict[str, str]:
    """`?episode=N&version=M` of the selection this tab shows (the URL's, else the session's),
    for links to the pages that show one: opened in a new tab, they open the same episode."""
    qp = st.query_params
    ep, ver = _int(qp.get("episode")), _int(qp.get("version"))
    if ep is None:
        ep, ver = st.session_state.get("sel_episode"), st.session_state.get("sel_version")
    if ep is None:
        return {}
    return {"episode": str(ep), **({"version": str(ver)} if ver is not None else {})}


def page_path(name: str) -> str:
    return str(PAGES_DIR / f"{name}.py")


def focus_step(version_id: int, index: int) -> None:
    """Ask the Editor to bring step `index` of the version into view (once: each request
    is a new marker the page script scrolls to)."""
    n = (st.session_state.get("focus_step") or (0, 0, 0))[2] + 1
    st.session_state["focus_step"] = (version_id, index, n)


def open_in(page: str, episode_id: int, version_id: int | None) -> None:
    """Switch page with the selection in the URL."""
    select(episode_id, version_id)
    qp = {"episode": str(episode_id)}
    if version_id is not None:
        qp["version"] = str(version_id)
    st.switch_page(page_path(page), query_params=qp)
