"""The original ReAct prompt-file layout, the part every environment shares: a version
becomes an exemplar (its trajectory in its kind's text), exemplars become a prompt dict, and
a prompt file's entries become importable items. How a kind files its exemplars (ALFWorld
keys `react_<v>_<i>`, Wikipedia blocks `webthink_simpleN`, ...) is its transcript's
(`trajectory.kinds.Transcript`: `assemble`, `next_key`, `parse_prompt_file`).

Imported Wikipedia examples remember their block key, position, the block's header and
their trailer (in `Task.data`), so re-assembling unchanged imports gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from trajectory.records import Episode, Step


class ExemplarError(ValueError):
    """No usable exemplars for a task (one line)."""


class PromptFileError(ValueError):
    """A prompt file or exemplar that cannot be used (one line)."""


@dataclass
class Exemplar:
    """One trajectory in prompt-file form plus what placing it in a prompt dict needs."""

    env: str
    style: str  # react | act
    text: str
    task_type: str | None = None
    key: str | None = None  # the entry key (command layout) or block key (numbered layout); None: automatic
    header: str | None = None  # numbered layout: the block's header (imported), else the kind's default
    trailer: str | None = None  # numbered layout: what follows the example in its block


@dataclass
class RawEntry:
    """A prompt-file entry that is not a trajectory (cotqa_*, webqa_*): kept as text."""

    key: str
    text: str


def exemplar_style(episode: Episode, steps: Sequence[Step]) -> str:
    return "react" if any(s.thought is not None for s in steps) else episode.config.style


def exemplar_from(transcript: Any, episode: Episode, steps: Sequence[Step], key: str | None = None) -> Exemplar:
    """A version as an exemplar in its kind's layout (`transcript`: the kind's Transcript)."""
    task = episode.task
    data = task.data or {}
    return Exemplar(
        env=task.env,
        style=exemplar_style(episode, steps),
        text=transcript.exemplar_text(task.text, steps),
        task_type=task.type,
        key=key if key is not None else data.get("prompt_key"),
        header=data.get("header"),
        trailer=data.get("trailer"),
    )


# ---------------------------------------------------------------------- parsing prompt files


@dataclass
class ParsedTrajectory:
    """One trajectory read from a prompt file: the episode it becomes."""

    env: str
    name: str  # the JSON key (command layout) or key#position (numbered layout)
    task_id: str
    task_type: str | None
    task_text: str
    style: str
    steps: list[Step]
    data: dict[str, Any] = field(default_factory=dict)
    gold: str | None = None


@dataclass
class ParsedEntry:
    key: str
    trajectories: list[ParsedTrajectory]  # empty: a raw entry
    raw: str | None = None
