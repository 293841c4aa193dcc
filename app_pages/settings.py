"""Settings: endpoint and model defaults (stored in the database, never a key), prices for
the cost column, the response cache, and which database file is in use."""

from __future__ import annotations

import os

import streamlit as st

from agent import local_model
from agent.client import model_available, public_url
from app_pages import alerts, app_engine
from app_pages.api_styles import api_style_box
from app_pages.page_text import endpoint_problem

store = app_engine.store()
st.title("Settings")

d = app_engine.defaults()
ok, msg = model_available(app_engine.default_config())
alerts.alert(msg, "info", headline="Model: ready" if ok else "Model: none configured")  # a status, not a "Done"
st.caption(
    "The API key is read from the OPENAI_API_KEY environment variable only; it is never stored "
    "or shown. For vLLM / Ollama / llama.cpp set OPENAI_BASE_URL or an endpoint below. Model `local` is the "
    "built-in model (on this machine; the default with no endpoint): to switch to an endpoint, give its base URL "
    "and its model name."
)
st.text(f"OPENAI_API_KEY: {'set' if os.environ.get('OPENAI_API_KEY') else 'not set'}")
env_base = os.environ.get("OPENAI_BASE_URL")
st.text(f"OPENAI_BASE_URL: {public_url(env_base) if env_base else 'not set'}")

st.subheader("Model defaults for new episodes")
c = st.columns(3)
base_url = c[0].text_input("Endpoint (base URL)", value=d.get("base_url") or "", key="set_base_url")
model = c[1].text_input("Model", value=d["model"], key="set_model")
api_style = api_style_box(c[2], d["api_style"], "set_api_style")
c2 = st.columns(3)
style = c2[0].selectbox("Prompt style", ["react", "act"], index=["react", "act"].index(d["style"]), key="set_style")
temperature = c2[1].number_input(
    "Temperature", min_value=0.0, max_value=2.0, value=float(d["temperature"]), step=0.1, key="set_temperature"
)
max_steps = c2[2].number_input(
    "Max steps (0 = environment default)",
    min_value=0,
    max_value=500,
    value=int(d.get("max_steps") or 0),
    key="set_max_steps",
)
alerts.show_error("settings")
if st.button("Save defaults", key="set_save", type="primary"):
    url = base_url.strip()
    problem = endpoint_problem(url)
    if problem:
        alerts.set_error("settings", problem)
    else:
        alerts.clear_error("settings")
        store.settings.set(
            app_engine.DEFAULTS_SETTING,
            {
                "base_url": url or None,
                "model": local_model.resolved_name(model.strip() or d["model"]),
                "api_style": api_style,
                "style": style,
                "temperature": float(temperature),
                "max_steps": int(max_steps) or None,
            },
        )
        st.toast("Saved.")
    st.rerun()

st.subheader("Prices (for the cost column)")
prices = store.settings.get(app_engine.PRICES_SETTING, {}) or {}
p = st.columns(3)
p_model = p[0].text_input("Model", value=d["model"], key="price_model")
cur = prices.get(p_model.strip(), {})
p_in = p[1].number_input(
    "$ per 1M prompt tokens", min_value=0.0, value=float(cur.get("prompt", 0.0)), key=f"price_in_{p_model}"
)
p_out = p[2].number_input(
    "$ per 1M completion tokens", min_value=0.0, value=float(cur.get("completion", 0.0)), key=f"price_out_{p_model}"
)
if st.button("Save price", key="price_save"):
    prices[p_model.strip()] = {"prompt": p_in, "completion": p_out}
    store.settings.set(app_engine.PRICES_SETTING, prices)
    st.rerun()
if prices:
    st.dataframe([{"model": m, **v} for m, v in prices.items()], hide_index=True, key="prices_table")

st.subheader("Response cache")
st.caption("Identical temperature-0 requests are answered from the local cache (per agent config).")
if st.button("Clear the response cache", key="cache_clear"):
    n = store.calls.clear_cache()
    st.session_state["cache_cleared"] = n
if "cache_cleared" in st.session_state:
    st.text(f"Cleared {st.session_state['cache_cleared']} cached response(s); the calls stay in the history.")

st.subheader("Database")
st.text(f"In use: {store.file}")
st.caption("Choose another file with the REACT_EDITOR_DB environment variable before launching.")
