"""The Engine and Store this process's pages share (one per database file), the errors a page
shows as one line (`USER_ERRORS`), and the model defaults from Settings with what a page says
about the model. Only calls the public Store / Engine API."""

from __future__ import annotations

import os
from typing import Any

import streamlit as st

from agent import local_model
from agent.engine import Engine, EngineError
from envs.base import EnvError
from sessions.store import Store, StoreError, default_db_path
from trajectory.records import AgentConfig, without_credentials

DEFAULTS_SETTING = "model_defaults"
# A person is waiting on the page: give up on a hung server sooner than the CLI does.
APP_MODEL_DEFAULTS = {"timeout_s": 20.0, "max_retries": 2}
PRICES_SETTING = "model_prices"
USER_ERRORS = (EngineError, EnvError, StoreError, ValueError)


def db_path() -> str:
    return default_db_path()


@st.cache_resource(show_spinner=False)
def _engine_for(path: str) -> Engine:
    # The key comes from the environment only, is handed to the client and never stored.
    return Engine(Store(path), api_key=os.environ.get("OPENAI_API_KEY") or None)


def engine() -> Engine:
    """One Engine per process and database file: it keeps environments alive across
    reruns, so stepping or resuming a visited step is cheap. It is shared by every browser
    session: it locks each episode around environment and database work (never around a
    model call), and the store serialises its transactions."""
    return _engine_for(db_path())


def store() -> Store:
    return engine().store


# ---------------------------------------------------------------------- model defaults


def defaults() -> dict[str, Any]:
    """Model defaults from Settings (never a key), over the AgentConfig defaults and the
    environment (OPENAI_BASE_URL, REACT_EDITOR_MODEL)."""
    base = {**AgentConfig().model_dump(), **APP_MODEL_DEFAULTS}
    saved = store().settings.get(DEFAULTS_SETTING, {}) or {}
    # REACT_EDITOR_MODEL, else the built-in model when no endpoint is configured, else the OpenAI default
    base["model"] = local_model.default_model(saved.get("base_url"), base["model"])
    for k, v in saved.items():
        if k in base:
            base[k] = v
    if local_model.named(base["model"]) and not base.get("base_url") and "timeout_s" not in saved:
        base["timeout_s"] = max(base["timeout_s"], local_model.TIMEOUT_S)  # prompts evaluated on this CPU
    if base.get("base_url"):  # saved by an older version: never shown with credentials
        try:
            base["base_url"] = without_credentials(base["base_url"])
        except ValueError:  # not an http(s) URL: not used
            base["base_url"] = None
    return base


def default_config() -> AgentConfig:
    try:
        return AgentConfig.model_validate(defaults())
    except ValueError:
        return AgentConfig()


def model_banner(config: AgentConfig | None = None) -> None:
    """The 'no model configured' banner (everything but model steps works without one), or
    the built-in model's: what it is and that it makes mistakes."""
    from agent.client import model_available

    config = config or default_config()
    ok, msg = model_available(config)
    if not ok:
        st.info(msg + " Human mode, browsing, editing and comparing work without a model.")
    elif local_model.wanted(config):
        st.info(msg + " Another model or endpoint: Settings, or the agent settings of an episode.")


def queue_caption(model: str, base_url: str | None, concurrency: int) -> None:
    """Say that runs at once on the built-in model queue for it (it answers one request at a time)."""
    note = local_model.queue_note(AgentConfig(model=model), concurrency) if not base_url else None
    if note:
        st.caption(note[0].upper() + note[1:] + ".")


def no_model_reason(config: AgentConfig) -> str | None:
    """Why Step and Run cannot work for this config (the built-in model is not installed), else None."""
    if not local_model.wanted(config):
        return None
    ok, msg = local_model.availability()
    return None if ok else msg.removeprefix("No model: ").rstrip(".")


def reconfigure(version_id: int, changes: dict[str, Any]) -> Any:
    """Point the steps that follow at another model / endpoint: a new child version of
    `version_id` (same steps) that runs with `changes`; earlier versions keep theirs."""
    return engine().editor.reconfigure(version_id, changes)
