"""One episode's version tree as search and the signals need it (`EpisodeTree`): versions,
their leaf steps and outcomes, and each step's parent, index and signals."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable

from trajectory.records import Outcome
from trajectory.signals import version_signals


@dataclass
class EpisodeTree:
    """One episode's version tree as search needs it: versions (id -> leaf step, outcome)
    and steps (id -> parent, index, signals)."""

    id: int
    env: str
    type: str | None
    current: int | None
    versions: dict[int, tuple[int | None, Outcome]] = field(default_factory=dict)
    steps: dict[int, tuple[int | None, int, list[str]]] = field(default_factory=dict)

    def path(self, version_id: int) -> list[int]:
        """Step ids of a version, leaf first."""
        out, sid = [], self.versions[version_id][0]
        while sid is not None:
            out.append(sid)
            sid = self.steps[sid][0]
        return out

    def preferred(self, version_ids: Iterable[int]) -> list[int]:
        """The current version first, then the newest first."""
        return sorted(version_ids, key=lambda v: (v != self.current, -v))

    def holding(self, step_id: int) -> list[int]:
        """The versions whose path holds the step, preferred first: those whose leaf is the
        step or below it (a walk of the step's subtree, not of every version's path: an
        episode with a thousand rollouts sharing a prefix)."""
        children, at_leaf = self._below
        found: list[int] = []
        todo = [step_id]
        while todo:
            sid = todo.pop()
            found += at_leaf.get(sid, ())
            todo += children.get(sid, ())
        return self.preferred(found)

    @functools.cached_property
    def _below(self) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        """(step -> its child steps, step -> the versions whose leaf it is), made once per tree."""
        children: dict[int, list[int]] = {}
        for sid, (parent, _, _) in self.steps.items():
            if parent is not None:
                children.setdefault(parent, []).append(sid)
        at_leaf: dict[int, list[int]] = {}
        for vid, (leaf, _) in self.versions.items():
            if leaf is not None:
                at_leaf.setdefault(leaf, []).append(vid)
        return children, at_leaf

    def signals(self, version_id: int) -> set[str]:
        return version_signals((self.steps[s][2] for s in self.path(version_id)), self.versions[version_id][1])
