"""What a step and a run report (`StepReport`, `RunReport`, why a version is frozen, a version's
name in messages) and the small pure helpers the engine's parts share (an outcome, a person's
one-line text, the Standard/CoT method of a version)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.engine_errors import EngineError
from envs.registry import family
from trajectory.records import MAX_TEXT, ModelCall, Outcome, Step, Version

FROZEN = {
    "annotated": "annotated",
    "exemplar": "used by an exemplar set",
    "child": "it has a child version",
    "judged": "judged against another version",
}
QA_METHODS = ("standard", "cot", "cot-sc")


def qa_method_of(v: Version, steps: list[Step]) -> str | None:
    """The Standard / CoT method a version answers with: its answer step says so; an
    unanswered version is known by the phase name an experiment gave it."""
    if steps:
        method = steps[-1].info.get("method") if len(steps) == 1 else None
        return method if method in QA_METHODS else None
    return v.name if v.name in QA_METHODS else None


@dataclass
class StepReport:
    """What one `Engine.step` added."""

    version: Version  # where the steps went: the stepped version, or its new child
    steps: list[Step]
    calls: list[ModelCall] = field(default_factory=list)
    frozen: str | None = None  # why the stepped version could not grow (a FROZEN key)
    continued_from: int | None = None  # the frozen version the new child continues

    @property
    def done(self) -> bool:
        return self.version.outcome.done

    @property
    def notice(self) -> str | None:
        """The line a face shows when the steps went to a new child version."""
        if self.frozen is None:
            return None
        return f"version {self.continued_from} is frozen ({FROZEN[self.frozen]}); continuing in new version {self.version.id}"


def version_name(store, v: Version) -> str:
    """A version in a message people read: `EP:N`, its per-episode number (docs/versions.md),
    never the global id."""
    from sessions.numbering import labels, ref_part

    have = labels(store, v.episode_id)
    return f"{v.episode_id}:{ref_part(have[v.id])}" if v.id in have else str(v.id)


@dataclass
class RunReport:
    episode: int
    version: int
    done: bool
    success: bool | None
    steps: int  # steps in the version after the run
    added: int = 0
    stopped: bool = False
    error: str | None = None
    continued_from: int | None = None  # set when the run went on in a new child of a frozen version
    row: Version | None = field(default=None, repr=False, compare=False)  # the version as the run left it

    def as_json(self) -> dict[str, Any]:
        out = {
            "episode": self.episode,
            "version": self.version,
            "done": self.done,
            "success": self.success,
            "steps": self.steps,
        }
        if self.continued_from is not None:
            out["continued_from"] = self.continued_from
        if self.error:
            out["error"] = self.error
        return out


def _outcome(kind: str, reward: float, info: dict[str, Any], done: bool) -> Outcome:
    """How the kind scores a finished step (won, exact match, the right label, ...)."""
    success = family(kind).success(reward, info)
    return Outcome(done=done, success=success, reward=float(reward or 0.0), metrics=dict(info))


def _outcome_text(o: Outcome) -> str:
    return "success" if o.success else "failure"


def _clean_text(text: str | None, what: str, *, allow_none: bool = False) -> str | None:
    if text is None:
        if allow_none:
            return None
        raise EngineError(f"the new {what} is missing")
    if not isinstance(text, str):
        raise EngineError(f"the {what} must be text")
    if "\n" in text.strip() or "\r" in text.strip():
        raise EngineError(f"a {what} is one line (it contains a line break)")
    if len(text) > MAX_TEXT:
        raise EngineError(f"the {what} is too long ({len(text):,} characters; the limit is {MAX_TEXT:,})")
    stripped = text.strip()
    if not stripped:
        if allow_none:
            return None
        raise EngineError(f"the new {what} is empty")
    return stripped
