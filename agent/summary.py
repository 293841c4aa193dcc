"""Plain summaries of versions, shared by the CLI's tables and the app's pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajectory.records import Version

if TYPE_CHECKING:  # (any reader with `steps(version)`: the CLI's reading commands load no Engine)
    from agent.engine import Engine


def version_summary(engine: Engine, v: Version) -> dict[str, Any]:
    """One version as a plain dict: what the versions list and tree show (`engine`: the
    Engine, or any reader with `steps(version)`)."""
    steps = engine.steps(v)
    human = sum(1 for s in steps if s.source == "human" and s.edit is None)
    return {
        "version": v.id,
        "parent_version": v.parent_version,
        "name": v.name,
        "status": v.status,
        "steps": len(steps),
        "done": v.outcome.done,
        "success": v.outcome.success,
        "reward": v.outcome.reward,
        "human_edits": len(v.edits) + human,
        "draft_thought": v.draft_thought,
        "error": v.error,
    }
