"""What every page shares: the database and Engine of this process, the selected
episode/version (mirrored in the URL so it can be shared), model defaults, and the inline
error box. Only calls the public Store / Engine API."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import streamlit as st

from agent import local_model
from agent.engine import Engine, EngineError
from envs.base import EnvError
from trajectory.records import AgentConfig, without_credentials
from sessions.store import Store, StoreError, default_db_path

DEFAULTS_SETTING = "model_defaults"
# A person is waiting on the page: give up on a hung server sooner than the CLI does.
APP_MODEL_DEFAULTS = {"timeout_s": 20.0, "max_retries": 2}
PRICES_SETTING = "model_prices"
USER_ERRORS = (EngineError, EnvError, StoreError, ValueError)

PAGES_DIR = Path(__file__).resolve().parent


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


# ---------------------------------------------------------------------- selection / deep links


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


# ---------------------------------------------------------------------- errors


_ALERT_HEADLINES = {"error": "That did not work:", "success": "Done:", "info": "Note:", "warning": "Check this:"}
_ALERT_COLOURS = {"error": ("#ffebe9", "#cf222e"), "success": ("#dafbe1", "#1a7f37"),
                  "info": ("#ddf4ff", "#0969da"), "warning": ("#fff8c5", "#9a6700")}


def alert_html(text: str, kind: str = "error", headline: str | None = None) -> str:
    """A coloured box with its headline AND its message inside, all escaped: st.error & co.
    render markdown, and messages carry imported names, model output and server text."""
    bg, fg = _ALERT_COLOURS[kind]
    head = html.escape(headline if headline is not None else _ALERT_HEADLINES[kind])
    return (f'<div class="re-alert re-alert-{kind}" role="alert" style="background:{bg};border-left:4px solid {fg};'
            f'border-radius:6px;padding:0.6rem 0.9rem;"><div style="color:{fg};font-weight:600">{head}</div>'
            f'<div style="white-space:pre-wrap;word-break:break-word">{html.escape(text)}</div></div>')


def alert(text: str, kind: str = "error", headline: str | None = None) -> None:
    st.html(alert_html(text, kind, headline))


def plain_caption(text: str) -> None:
    """A caption shown exactly as written: st.caption renders markdown (links, images,
    emphasis), and captions carry names people and imported files chose (experiments, exemplar
    sets, models, a signed-in person's e-mail). Escaped, as alert() does."""
    st.html(f'<div class="re-caption" style="font-size:0.875rem;opacity:0.6;white-space:pre-wrap;'
            f'word-break:break-word">{html.escape(text)}</div>')


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


def version_status(v: Any) -> str:
    """One status everywhere: "running" while a job (of any tab or process) or this tab's
    run works on the version, "stopped" when its last job was stopped or its runner died,
    else what the engine recorded (open, done)."""
    return version_statuses([v])[v.id]


def version_statuses(versions: Any) -> dict[int, str]:
    """version_status for many versions at once (one jobs query): version id -> status."""
    from sessions import jobs

    versions = list(versions)
    states = jobs.version_states(store(), [v.id for v in versions], {v.id: v.updated_at for v in versions})
    run = st.session_state.get("run")
    mine = run.get("version") if run else None
    return {v.id: "running" if v.id == mine and not v.outcome.done else states.get(v.id, v.status)
            for v in versions}


def version_label(v: Any, label: str | None = None, status: str | None = None) -> str:
    """"v3 my-fix (success)": the per-episode label people read (v3, r2; the global id if none given).
    status: the version's version_status when already known (see version_statuses)."""
    from app_pages.page_text import outcome_text

    name = f" {v.name}" if v.name else ""
    return f"{label or f'v{v.id}'}{name} ({outcome_text(v.outcome, status if status is not None else version_status(v))})"


def widget_key(prefix: str, labels: Any) -> str:
    """A selector's key that changes with its option labels: Streamlit keeps a keyed
    widget's drawn labels otherwise (e.g. a version that just finished or was renamed)."""
    return f"{prefix}_{abs(hash(tuple(labels))) % 10**8}"


def episode_header(ep: Any) -> None:
    """Which episode this is and its task, as plain text (task type, names and task text
    can come from imported files: never markdown)."""
    name = f" “{ep.name}”" if ep.name else ""
    st.text(f"Episode {ep.id}{name} · {ep.task.env} · {ep.task.type or 'custom task'} · {ep.task.id}")
    st.text(ep.task.text)
