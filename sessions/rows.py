"""Plain rows of bulk reads (export, search): tuples with the records' field names, cheaper
than a pydantic record per row, and an episode's version tree for search and signals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

from trajectory.records import EditInfo, Outcome
from trajectory.signals import version_signals

class StepRow(NamedTuple):
    """A stored step as plain attributes: `trajectory.records.Step`'s fields, for bulk reads."""

    id: int
    episode_id: int
    parent_id: int | None
    index: int
    thought: str | None
    action: str | None
    observation: str | None
    done: bool
    reward: float
    info: dict
    source: str
    edit: EditInfo | None
    call_ids: list
    snapshot: dict | None
    created_at: str
    signals: list

    def model_copy(self, *, update: dict[str, Any]) -> "StepRow":
        """As `Step.model_copy` (the prompt writers copy a step to drop its observation)."""
        return self._replace(**update)


class UsageRow(NamedTuple):
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_prompt_tokens: int | None


class CallRow(NamedTuple):
    """A recorded model call as plain attributes: `ModelCall`'s fields, for bulk reads."""

    id: int
    episode_id: int | None
    created_at: str
    model: str
    api_style: str
    purpose: str
    params: dict
    prompt_hash: str
    prompt_chars: int
    completion: str | None
    usage: UsageRow
    latency_ms: float | None
    attempts: int | None
    cached: bool
    error: str | None
    cache_key: str | None
    cut_from: int | None


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
        """The versions whose path holds the step, preferred first."""
        return self.preferred(v for v in self.versions if step_id in self.path(v))

    def signals(self, version_id: int) -> set[str]:
        return version_signals((self.steps[s][2] for s in self.path(version_id)), self.versions[version_id][1])
