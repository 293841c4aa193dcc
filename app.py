"""ReAct Editor in the browser: `streamlit run app.py` (database: $REACT_EDITOR_DB or
./react_editor.db; model key: $OPENAI_API_KEY only, never stored).

Pages live in app_pages/; they only call the library (agent/, envs/, sessions/)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent
PAGES = HERE / "app_pages"

st.set_page_config(page_title="ReAct Editor", page_icon=":material/edit_note:", layout="wide")

pages = [
    st.Page(PAGES / "episodes.py", title="Episodes", icon=":material/list:", url_path="episodes", default=True),
    st.Page(PAGES / "editor.py", title="Editor", icon=":material/edit_note:", url_path="editor"),
    st.Page(PAGES / "versions.py", title="Versions", icon=":material/account_tree:", url_path="versions"),
    st.Page(PAGES / "compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page(PAGES / "experiments.py", title="Experiments", icon=":material/science:", url_path="experiments"),
    st.Page(PAGES / "export.py", title="Export", icon=":material/ios_share:", url_path="export"),
    st.Page(PAGES / "settings.py", title="Settings", icon=":material/settings:", url_path="settings"),
]

st.navigation(pages).run()
