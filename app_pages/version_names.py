"""How the pages name versions and episodes: one status everywhere (running, stopped, open,
done), the `v3 name (outcome)` label, a selector's key that follows its labels, the episode
header (plain text)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages.app_engine import store


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
    return {v.id: "running" if v.id == mine and not v.outcome.done else states.get(v.id, v.status) for v in versions}


def version_label(v: Any, label: str | None = None, status: str | None = None) -> str:
    """ "v3 my-fix (success)": the per-episode label people read (v3, r2; the global id if none given).
    status: the version's version_status when already known (see version_statuses)."""
    from app_pages.page_text import outcome_text

    name = f" {v.name}" if v.name else ""
    return (
        f"{label or f'v{v.id}'}{name} ({outcome_text(v.outcome, status if status is not None else version_status(v))})"
    )


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
