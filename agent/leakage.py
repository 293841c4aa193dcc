"""Test-set leakage: an exemplar set that holds a trajectory of a task the experiment
evaluates shows the model the answer. The ONE rule every face uses (the Experiments page,
`experiment run` / `compare`, suggestions): a task leaks when a version entry of the set
belongs to an episode of that task (same task key)."""

from __future__ import annotations

from typing import Iterable

from sessions import exemplar_sets
from sessions.store import Store
from trajectory.records import Task


def set_task_keys(store: Store, exemplar_set: str | None) -> set[str]:
    """Task keys (`env:id`) the set holds a trajectory of; none for the built-in exemplars
    or a set that no longer exists."""
    if not exemplar_set or not exemplar_sets.exists(store, exemplar_set):
        return set()
    keys = set()
    for e in exemplar_sets.entries(store, exemplar_set):
        if e.version_id is not None:
            keys.add(store.episodes.get(store.versions.get(e.version_id).episode_id).task.key)
    return keys


def leaked_tasks(store: Store, exemplar_set: str | None, tasks: Iterable[Task]) -> list[Task]:
    """The tasks (in their order) whose own trajectory is an exemplar of the set."""
    held = set_task_keys(store, exemplar_set)
    return [t for t in tasks if t.key in held] if held else []


def describe(tasks: list[Task], limit: int = 8) -> str:
    """'hp-002, hp-005' (and how many more): the leaked tasks in one line."""
    ids = [t.id for t in tasks]
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more
