"""Signal badges on the Editor's steps: small, plain-text flags (trajectory.signals) - a
suggestion of where a failure is, never a label. Fixed vocabulary only: nothing from the
data is rendered here."""

from __future__ import annotations

from typing import Any, Iterable

import streamlit as st

from trajectory.signals import version_step_signals


def badge_text(signals: Iterable[str]) -> str:
    """`⚑ repeated action · no effect`, or "" for none."""
    names = [s.replace("_", " ") for s in signals]
    return "⚑ " + " · ".join(names) if names else ""


HELP = "Automatic signals: suggestions of where a failure may be, never labels."


def show(step: Any, version: Any) -> None:
    """The badges of one step of a version (`step_limit` on its last step)."""
    text = badge_text(version_step_signals([step], version.outcome)[0] if step.id == version.leaf_step_id
                      else step.signals or [])
    if text:
        st.caption(text, help=HELP)
