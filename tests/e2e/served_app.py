"""The app as `react-editor app` serves it (app.py behind app_server.py's gate), for the one
Streamlit server each test worker shares (not tests), plus one route only tests have:
POST /api/e2e/env points the process at a test's own database and settings. The app reads
them from the environment at each run and keeps one Engine per database file, so each test
gets the app over a fresh database without paying for a new server and a cold first page."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agent import client
from app_server import app as served

ROOT = Path(__file__).resolve().parents[2]
# What a test may set; anything it leaves out goes back to the server's start value.
KEYS = ("REACT_EDITOR_DB", "OPENAI_BASE_URL", "REACT_EDITOR_MODEL", "REACT_EDITOR_CACHE")
START = {k: os.environ.get(k) for k in KEYS}


async def point_at(request):
    """The next test's environment; what a new process would not have kept is dropped."""
    given = await request.json()
    for k in KEYS:
        value = given.get(k, START[k])
        if value is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = str(value)
    client.ENDPOINT_KEYS = None  # installed again from this environment at the next run
    st.cache_resource.clear()  # the Engines and experiment runners of earlier databases
    st.cache_data.clear()
    return PlainTextResponse("ok")


app = st.App(
    ROOT / "app.py", middleware=served._user_middleware, routes=[Route("/api/e2e/env", point_at, methods=["POST"])]
)
