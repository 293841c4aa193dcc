"""What every Editor component reads, read once per full run of the page (`app_pages/editor.py`):
the engine, this tab's id, the episode and the version shown. The components take it as their
first parameter instead of reading page globals, so each can be read (and called) on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.engine import Engine, EngineError, ModelCallFailed
from envs.base import EnvError
from sessions.store import StoreError

RUN_TICK_S = 0.2
LIVE_STEPS = 30  # the newest steps are interactive; earlier ones are one block of escaped HTML
POLL_S = 0.25
STEP_ERRORS = (ModelCallFailed, EngineError, EnvError, StoreError)
RUN_LEASE_S = 5.0  # a run's job lives while this tab ticks; a reload or a closed tab lets it lapse: "stopped"


@dataclass(frozen=True)
class EditorPage:
    """The page state: `ep` carries the settings version `vid` runs with; `nums` the
    per-episode labels people read (v1, v2, ...; rollouts r1, r2, ...); `fam` the episode's environment family."""

    eng: Engine
    tab: str  # whose step results this tab collects
    ep_id: int
    vid: int
    ep: Any
    fam: Any
    nums: dict[int, str]

    @property
    def store(self) -> Any:
        return self.eng.store

    @property
    def alf(self) -> bool:
        """A thought is its own turn; an action is optional."""
        return self.fam.transcript.thoughts_are_turns

    def vname(self, version_id: int) -> str:
        return self.nums.get(version_id, f"v{version_id}")
