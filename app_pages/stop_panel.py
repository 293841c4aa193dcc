"""The Editor's stop conditions for "Run N" / "Run to end" (a debugger's breakpoints): stop at
the first step that raises a chosen signal, whose observation or action matches a pattern,
or at a step number. Parsing and matching are the library's (agent.stop_conditions), the
same as `react-editor resume EP --until ...`."""

from __future__ import annotations

import streamlit as st

from agent.stop_conditions import ConditionError, StopCondition, parse_all
from trajectory.signals import SIGNALS


def specs_from(signals: list[str], obs: str, action: str, step: int) -> list[str]:
    """The CLI spec strings for what the form holds (the same text `--until` takes)."""
    out = [f"signal:{s}" for s in signals]
    if obs.strip():
        out.append(f"obs:/{obs.strip()}/")
    if action.strip():
        out.append(f"action:/{action.strip()}/")
    if step:
        out.append(f"step:{int(step)}")
    return out


def form(disabled: bool) -> tuple[list[StopCondition], str | None]:
    """The conditions set on the page (empty: none) and a one-line problem, if any."""
    on = any(st.session_state.get(k) for k in ("until_signals", "until_obs", "until_action", "until_step"))
    label = "Stop conditions" + (" (on)" if on else "")
    # the label changes with the first condition (a new expander to Streamlit): it stays open then
    with st.expander(label + ": Run stops at the first step where one holds", expanded=on):
        c = st.columns([3, 2, 2, 1])
        sigs = c[0].multiselect(
            "A step raises",
            list(SIGNALS),
            key="until_signals",
            format_func=lambda s: s.replace("_", " "),
            disabled=disabled,
        )
        obs = c[1].text_input(
            "Observation matches (regex)", key="until_obs", disabled=disabled, placeholder="Nothing happens"
        )
        act = c[2].text_input("Action matches (regex)", key="until_action", disabled=disabled, placeholder="^put ")
        k = c[3].number_input(
            "At step (0 = off)", min_value=0, max_value=500, value=0, key="until_step", disabled=disabled
        )
        specs = specs_from(sigs or [], obs or "", act or "", int(k or 0))
        try:
            conds = parse_all(specs)
        except ConditionError as exc:
            st.text(str(exc))
            return [], str(exc)
        if conds:
            st.text("Same as the command line: " + " ".join(f"--until '{c.spec}'" for c in conds))  # patterns: plain
    return conds, None
