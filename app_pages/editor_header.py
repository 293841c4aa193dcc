"""The top of the Editor: the task, its experiment, the version selector, the model and
endpoint the version runs with, imported references awaiting an OK, and new settings."""

from __future__ import annotations

import os

import streamlit as st

from agent import local_model
from agent.client import public_url, resolve_base_url
from app_pages import alerts, app_engine, selection, version_names
from app_pages.api_styles import api_style_box
from app_pages.editor_context import EditorPage
from app_pages.editor_run import close_run
from app_pages.page_text import endpoint_problem
from sessions import experiments, rollouts


def task_box(page: EditorPage) -> None:
    """The task; a batch episode links back to its experiment's results."""
    with st.container(key="task_box"):
        version_names.episode_header(page.ep)
        if (exp := experiments.of_episode(page.store, page.ep_id)) is not None:
            xc = st.columns([5, 1])
            xc[0].text(f"Part of experiment {exp.id} “{exp.name}” ({exp.method} on {exp.env})")
            if xc[1].button("Open experiment", key="ed_open_exp"):
                st.session_state["x_sel"] = exp.id
                st.switch_page(selection.page_path("experiments"))


def version_row(page: EditorPage, versions: list) -> None:
    """The version selector, then the model, style, endpoint and step limit of the version."""
    ep, vid = page.ep, page.vid
    # rollouts are picked from the Versions page (a group is opened there), not listed here: an episode
    # with a thousand rollouts would send them all to the browser on every rerun (the one shown stays)
    member = rollouts.group_of_versions(page.store, page.ep_id)
    versions = [v for v in versions if v.id not in member or v.id == vid]
    by_id = {v.id: v for v in versions}
    cols = st.columns([3, 2, 3])
    ids = [v.id for v in versions]
    statuses = version_names.version_statuses(versions)  # one jobs query for the whole selector
    labels = {
        i: version_names.version_label(by_id[i], page.nums.get(i), statuses[i])
        + (" · current" if i == ep.current_version else "")
        for i in ids
    }
    # the key carries the labels' state, so a finished run or a new version redraws the selector
    chosen = cols[0].selectbox(
        "Version",
        ids,
        index=ids.index(vid),
        format_func=labels.get,
        key=version_names.widget_key(f"vsel_{page.ep_id}_{vid}", labels.values()),
    )
    if chosen != vid:
        close_run(page.store, "stopped")
        selection.select(page.ep_id, chosen)
        st.rerun()
    cfg = ep.config
    endpoint = public_url(resolve_base_url(cfg))
    where = (
        ""
        if cfg.base_url
        else (" (from OPENAI_BASE_URL)" if os.environ.get("OPENAI_BASE_URL") else " (OpenAI default)")
    )
    if local_model.wanted(cfg):
        endpoint, where = "built in, on this machine", ""
    cols[1].text(f"Model: {cfg.model}\nStyle: {cfg.style} · {cfg.api_style}")
    cols[2].text(f"Endpoint: {endpoint}{where}\nMax steps: {page.eng.max_steps(ep)}")
    app_engine.model_banner(cfg)


def confirm_references(page: EditorPage) -> None:
    """An import points outside the data folders: nothing is opened before an OK."""
    unconfirmed = page.eng.envs.unconfirmed_references(page.ep)
    if unconfirmed:
        with st.container(border=True, key="confirm_refs"):
            st.warning(
                "This episode was imported and points at files, URLs or a model endpoint you did not choose. "
                "Nothing is opened and no request (or key) is sent there until you confirm them:"
            )
            st.text("\n".join(unconfirmed))
            if st.button("Confirm and open them", key="confirm_refs_btn"):
                page.eng.envs.confirm_references(page.ep_id)
                st.rerun()


def model_settings(page: EditorPage) -> None:
    """Another model or endpoint for the steps that follow: a new version from here."""
    cfg, ep_id = page.ep.config, page.ep_id
    with st.expander("Use another model or endpoint for the steps that follow"):
        c = st.columns(3)
        new_url = c[0].text_input(
            "Endpoint (base URL; blank = OPENAI_BASE_URL or OpenAI)", value=cfg.base_url or "", key=f"cfg_url_{ep_id}"
        )
        new_model = c[1].text_input("Model", value=cfg.model, key=f"cfg_model_{ep_id}")
        new_api = api_style_box(c[2], cfg.api_style, f"cfg_api_{ep_id}")
        alerts.show_error("config")
        if st.button("Use it from here (a new version)", key="cfg_apply"):
            problem = endpoint_problem(new_url)
            if problem:
                alerts.set_error("config", problem)
                st.rerun()
            alerts.clear_error("config")
            changed = app_engine.reconfigure(
                page.vid,
                {
                    "base_url": new_url.strip() or None,
                    "model": local_model.resolved_name(new_model.strip() or cfg.model),
                    "api_style": new_api,
                },
            )
            close_run(page.store, "stopped")
            selection.select(ep_id, changed.id)
            st.rerun()


def header(page: EditorPage, versions: list) -> None:
    """Everything above the run controls, in the page's order."""
    task_box(page)
    version_row(page, versions)
    confirm_references(page)
    model_settings(page)
