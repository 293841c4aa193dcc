"""The app as `react-editor app` serves it: app.py behind `agent.gate.Gate`, which
refuses requests with a foreign Host (DNS rebinding) and, unless `--no-token`, any without
the access token the launcher made. `streamlit run app_server.py` finds `app` (st.App)."""

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config

from agent.gate import Gate

app = st.App("app.py", middleware=[Middleware(Gate, address=lambda: config.get_option("server.address"))])
