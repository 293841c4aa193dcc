"""What the engine's parts share: its errors, the reports of a step and a run, the live
environment of an episode, and small pure helpers (an outcome, a person's one-line text)."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from agent.client import public_url
from envs.base import Environment
from envs.registry import family
from sessions.store import StoreError
from trajectory.records import MAX_TEXT, ModelCall, Outcome, Step, Version

PATH_CACHE = 256  # versions whose paths the engine keeps in memory
FROZEN = {"annotated": "annotated", "exemplar": "used by an exemplar set", "child": "it has a child version"}
QA_METHODS = ("standard", "cot", "cot-sc")


def qa_method_of(v: Version, steps: list[Step]) -> str | None:
    """The Standard / CoT method a version answers with: its answer step says so; an
    unanswered version is known by the phase name an experiment gave it."""
    if steps:
        method = steps[-1].info.get("method") if len(steps) == 1 else None
        return method if method in QA_METHODS else None
    return v.name if v.name in QA_METHODS else None


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
        out = {"episode": self.episode, "version": self.version, "done": self.done, "success": self.success, "steps": self.steps}
        if self.continued_from is not None:
            out["continued_from"] = self.continued_from
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class _Live:
    """An environment instance kept alive for one episode, with state tokens per step."""

    env: Environment
    at: int | None = None  # id of the step the env is after (0 = just reset)
    tokens: dict[int, Any] = field(default_factory=dict)


class _Held:
    """`EpisodeLocks.hold(eid)`: the context manager (a plain object: a step takes it two or
    three times)."""

    __slots__ = ("locks", "eid", "entry")

    def __init__(self, locks: "EpisodeLocks", eid: int):
        self.locks, self.eid = locks, eid

    def __enter__(self) -> threading.RLock:
        entry = self.entry = self.locks._enter(self.eid)
        try:
            entry[0].acquire()
        except BaseException:
            self.locks._leave(self.eid, entry)
            raise
        return entry[0]

    def __exit__(self, *exc: Any) -> bool:
        try:
            self.entry[0].release()
        finally:
            self.locks._leave(self.eid, self.entry)
        return False


class EpisodeLocks:
    """The engine's per-episode locks, each kept only while a thread holds or waits for it:
    a long-running app that touches thousands of episodes keeps none of them afterwards.
    `hold(eid)` is a context manager (re-entrant in a thread, as an RLock)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._table: dict[int, list] = {}  # episode id -> [RLock, threads holding or waiting]

    def __len__(self) -> int:
        return len(self._table)

    def _enter(self, eid: int) -> list:
        with self._guard:
            entry = self._table.get(eid)
            if entry is None:  # (not setdefault: that would make and drop an RLock at every hold)
                entry = self._table[eid] = [threading.RLock(), 0]
            entry[1] += 1
        return entry

    def _leave(self, eid: int, entry: list) -> None:
        with self._guard:
            entry[1] -= 1
            if entry[1] == 0 and self._table.get(eid) is entry:
                del self._table[eid]

    def hold(self, eid: int) -> "_Held":
        """The episode's lock, held inside the `with` (a plain object, not a generator:
        a step takes it three times)."""
        return _Held(self, eid)

    @contextlib.contextmanager
    def try_hold(self, eid: int) -> Iterator[bool]:
        """Without waiting: True inside when the episode was free (now held), else False."""
        entry = self._enter(eid)
        got = entry[0].acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                entry[0].release()
            self._leave(eid, entry)


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


def _strip_echo(text: str, prompt: str) -> str:
    """Chat models often repeat the cue ('Thought 3:', '>'); drop it so parsing matches."""
    cue = prompt[prompt.rfind("\n") + 1 :].strip()
    t = text.lstrip()
    if cue and t.startswith(cue):
        t = t[len(cue) :]
        return t if t.startswith(" ") else " " + t
    if cue == ">" and t.startswith(">"):
        return t[1:]
    return text


def _same_endpoint(a: str, b: str) -> bool:
    return public_url(a).rstrip("/").lower() == public_url(b).rstrip("/").lower()
