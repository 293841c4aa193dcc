"""Signal badges on the Editor's steps: small, plain-text flags (trajectory.signals) - a
suggestion of where a failure is, never a label. Fixed vocabulary only: nothing from the
data is rendered here."""

from __future__ import annotations

from typing import Iterable


def badge_text(signals: Iterable[str]) -> str:
    """`⚑ repeated action · no effect`, or "" for none."""
    names = [s.replace("_", " ") for s in signals]
    return "⚑ " + " · ".join(names) if names else ""


HELP = "Automatic signals: suggestions of where a failure may be, never labels."
