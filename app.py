"""ReAct Editor in the browser: `streamlit run app.py` (database: $REACT_EDITOR_DB or
./react_editor.db; model key: $OPENAI_API_KEY only, never stored).

Pages live in app_pages/; they only call the library (agent/, envs/, sessions/). Nothing on a
page loads from off the machine: the favicon is a file here and no page uses Material icon
shortcodes (Streamlit fetches their favicons from a public CDN)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages import access
from app_pages.selection import link_params
from envs import registry
from sessions.store import StoreError

HERE = Path(__file__).resolve().parent
PAGES = HERE / "app_pages"

st.set_page_config(page_title="ReAct Editor", page_icon=str(PAGES / "icon.png"), layout="wide")


# Episodes, keys in the environment and the database are one person's: beyond loopback a
# person presents REACT_EDITOR_TOKEN or signs in (OIDC) before any page shows.
access.gate()
registry.refresh()  # a plugin `pip install`ed while the app runs shows from this page load on

episodes = st.Page(PAGES / "episodes.py", title="Episodes", url_path="episodes")


def _home() -> None:
    """The app's root opens the Episodes page at /episodes: Streamlit serves its default page
    only at the root, so a default Episodes page answered /episodes with "Page not found"."""
    st.switch_page(episodes, query_params=st.query_params.to_dict())


SHOW_EPISODE = ("editor", "versions", "compare")  # pages that show the selected episode
pages = {  # url path -> page (read from here, not from the Page: its url_path exists only under a running app,
    # and a worker process of a --processes batch re-imports this file bare)
    "episodes": episodes,
    "editor": st.Page(PAGES / "editor.py", title="Editor", url_path="editor"),
    "versions": st.Page(PAGES / "versions.py", title="Versions", url_path="versions"),
    "compare": st.Page(PAGES / "compare.py", title="Compare", url_path="compare"),
    "experiments": st.Page(PAGES / "experiments.py", title="Experiments", url_path="experiments"),
    "export": st.Page(PAGES / "export.py", title="Export", url_path="export"),
    "settings": st.Page(PAGES / "settings.py", title="Settings", url_path="settings"),
}

# The menu is ours: Streamlit's links are bare page addresses, so a page opened from one in a
# new tab (middle click) said "No episode selected". Ours carry the episode (and version) shown.
nav = st.navigation(
    [st.Page(_home, title="Episodes", url_path="home", default=True), *pages.values()], position="hidden"
)
with st.sidebar.container(key="page_menu"):
    selected = link_params()
    for name, p in pages.items():
        st.page_link(p, query_params=selected if name in SHOW_EPISODE and selected else None)
access.endpoint_keys()  # the launch key never follows a base URL typed here to another endpoint

try:
    nav.run()
except StoreError as exc:  # the database said no (locked, disk full, ...): one line, nothing lost
    st.error("The database refused that — nothing was lost. Details:")
    st.text(str(exc))
