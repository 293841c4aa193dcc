"""Stop conditions for a run ("run until something happens", a debugger's breakpoints).

One condition per spec string, shared by the CLI (`resume EP --until SPEC`, several allowed)
and the Editor's "Run to end":

    signal:NAME       the first step that raises this failure signal (trajectory.signals)
    obs:/REGEX/       an observation matching REGEX (`/.../i`: ignore case)
    action:/REGEX/    an action matching REGEX
    step:K            step K has been taken

Pure functions: parsing and matching a recorded step; the caller decides to stop."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from trajectory.signals import SIGNALS
from trajectory.user_regex import PatternError, UserPattern, compile_pattern

KINDS = ("signal", "obs", "action", "step")
SPEC_HELP = "signal:NAME, 'obs:/REGEX/', 'action:/REGEX/' or step:K"


class ConditionError(ValueError):
    """A stop condition that does not parse (one line, says what would)."""


@dataclass(frozen=True)
class StopCondition:
    kind: str
    value: str | int
    pattern: UserPattern | None = None  # RE2 (trajectory.user_regex): linear time

    @property
    def spec(self) -> str:
        if self.kind in ("obs", "action"):
            flags = "i" if self.pattern is not None and self.pattern.ignore_case else ""
            return f"{self.kind}:/{self.value}/{flags}"
        return f"{self.kind}:{self.value}"

    def describe(self) -> str:
        if self.kind == "signal":
            return f"a step raises {str(self.value).replace('_', ' ')}"
        if self.kind == "step":
            return f"step {self.value} is taken"
        return f"the {'observation' if self.kind == 'obs' else 'action'} matches /{self.value}/"

    def matches(self, step: Any, signals: Iterable[str] = ()) -> bool:
        if self.kind == "signal":
            return self.value in set(signals)
        if self.kind == "step":
            return int(step.index) >= int(self.value)
        text = step.observation if self.kind == "obs" else step.action
        return text is not None and self.pattern is not None and self.pattern.search(text) is not None


def parse(spec: str) -> StopCondition:
    """`signal:repeated_action`, `obs:/Nothing happens/`, `action:/^take/i`, `step:12`."""
    kind, sep, rest = str(spec).strip().partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in KINDS or not rest.strip():
        raise ConditionError(f"bad stop condition {spec!r}: use {SPEC_HELP}")
    rest = rest.strip()
    if kind == "signal":
        if rest not in SIGNALS:
            raise ConditionError(f"unknown signal {rest!r} in {spec!r}: one of {', '.join(SIGNALS)}")
        return StopCondition("signal", rest)
    if kind == "step":
        if not (rest.isascii() and rest.isdigit()) or len(rest) > 18 or int(rest) < 1:  # not `²`
            raise ConditionError(f"bad step number in {spec!r}: use step:K with K >= 1")
        return StopCondition("step", int(rest))
    return _regex(kind, rest, spec)


def _regex(kind: str, rest: str, spec: str) -> StopCondition:
    ignore_case = False
    if rest.startswith("/") and (rest.endswith("/") or rest.endswith("/i")) and len(rest) >= 2:
        if rest.endswith("/i") and len(rest) > 2 and rest != "/i":
            ignore_case, body = True, rest[1:-2]
        else:
            body = rest[1:-1]
    else:  # plain text: matched literally
        body = re.escape(rest)  # a literal (RE2 reads these escapes as Python does)
    if not body:
        raise ConditionError(f"empty pattern in {spec!r}")
    try:
        pattern = compile_pattern(body, ignore_case)
    except PatternError as exc:
        raise ConditionError(f"bad pattern in {_short(spec)}: {exc}") from None
    return StopCondition(kind, body, pattern)


def _short(spec: str) -> str:
    return repr(spec[:60] + ("..." if len(spec) > 60 else ""))


def parse_all(specs: Iterable[str]) -> list[StopCondition]:
    return [parse(s) for s in specs]


def first_hit(
    conditions: Sequence[StopCondition], steps: Sequence[Any], signals: Sequence[Sequence[str]]
) -> tuple[StopCondition, Any] | None:
    """The first (condition, step) among newly taken `steps` (with their `signals`) that
    matches any condition, or None."""
    for step, sig in zip(steps, signals):
        for c in conditions:
            if c.matches(step, sig):
                return c, step
    return None
