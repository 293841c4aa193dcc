"""The API styles the app offers wherever one is chosen (agent settings, new episodes and
experiments, a re-run, suggest's critic): `trajectory.records.ApiStyle`'s values, never a list
of the app's own, so a style the records gain is offered everywhere at once."""

from __future__ import annotations

from typing import Any

from trajectory.records import API_STYLES

STYLE_HELP = (
    "completions: the paper's text prompt; chat: that transcript as one user message; messages: a "
    "conversation, one assistant message per step; tools: native tool calls, one per step"
)


def api_style_box(
    where: Any, current: str | None, key: str, *, label: str = "API style", inherit: str | None = None
) -> str | None:
    """A selectbox of every API style in `where` (st or a column), `current` chosen. With
    `inherit` (its label, e.g. "(the version's own)") the first option is None: no change."""
    options: list[str | None] = ([None] if inherit else []) + list(API_STYLES)
    return where.selectbox(
        label,
        options,
        index=options.index(current) if current in options else 0,
        key=key,
        format_func=lambda s: inherit if s is None else s,
        help=STYLE_HELP,
    )
