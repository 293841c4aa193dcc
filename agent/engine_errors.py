"""The engine's errors: one line a face shows (`EngineError`), a failed or cancelled model call,
a step whose answer the database refused."""

from __future__ import annotations

from sessions.store import StoreError
from trajectory.records import ModelCall


class EngineError(Exception):
    """A user-facing problem with a step, an edit or a run (one line)."""


class ModelCallFailed(EngineError):
    def __init__(self, message: str, call: ModelCall | None = None):
        super().__init__(message)
        self.call = call


class WriteBlocked(StoreError):
    """A step's model answer came back but the database refused the write (one line; the
    answer is kept beside the database and recorded by the next writer)."""


class StepCancelled(ModelCallFailed):
    """The caller cancelled the step (Stop in the UI): nothing was added to the version."""
