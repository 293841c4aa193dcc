"""Failure signals: automatic flags on a step (design.md "Signal") - suggestions for a
person, never labels. Pure: a step's signals follow from the step, the earlier steps of its
path, the opening observation and what the environment knew (ALFWorld's admissible
commands). A step's earlier steps are its ancestors in the tree, so its signals are the
same in every version that holds it; `step_limit` ends a version, not a step, and comes
from the version's outcome (`metrics.limit`, set when the engine stops at the limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from trajectory import kinds
from trajectory.kinds import SignalRules

SIGNALS: tuple[str, ...] = (
    "repeated_action",
    "no_effect",
    "invalid_action",
    "search_miss",
    "lookup_miss",
    "step_limit",
    "hallucinated_object",
)
STEP_LIMIT = "step_limit"

# The paper's Table 2 failure mode each signal suggests (sessions.annotations.FAILURE_MODES).
SUGGESTS: dict[str, str] = {
    "repeated_action": "reasoning_error",
    "search_miss": "search_result_error",
    "lookup_miss": "search_result_error",
    "hallucinated_object": "hallucination",
}


class NoRules:
    """The generic signals only (a kind without rules of its own, or none loaded)."""

    def mentions(self, text: str | None) -> set[str]:
        return set()

    def flags(self, action: str | None, observation: str) -> set[str]:
        return set()

    def changes(self, action: str, observation: str) -> bool:
        return False


GENERIC: SignalRules = NoRules()


def rules_of(kind: str) -> SignalRules:
    """The kind's signal rules as its family publishes them (trajectory.kinds); the generic
    ones when no registry is loaded or the kind is unknown here."""
    try:
        return kinds.transcript(kind).signals
    except Exception:  # noqa: BLE001 - an unloadable plugin still gets the generic signals
        return GENERIC


def _norm(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def _ordered(found: set[str]) -> list[str]:
    if not found:  # (most steps)
        return []
    return [s for s in SIGNALS if s in found] + sorted(found - _KNOWN)


_KNOWN = frozenset(SIGNALS)


@dataclass(frozen=True)
class PathState:
    """What the earlier steps of a path tell the signals: the (action, observation) pairs
    taken since the world last changed and the objects seen. `then(step)` is the state one
    step further (a new object, so a tree is walked without recomputing each path). `rules`
    are the kind's own (what it flags, the objects it tracks, what changes its world)."""

    rules: Any = GENERIC
    taken: frozenset[tuple[str, str]] = frozenset()
    seen: frozenset[str] = frozenset()

    @classmethod
    def start(cls, rules: "SignalRules | str", task_text: str = "") -> "PathState":
        rules = rules_of(rules) if isinstance(rules, str) else rules
        return cls(rules, frozenset(), frozenset(rules.mentions(task_text)))

    def then(self, step: Any) -> "PathState":
        taken = self.taken
        if step.action is not None:
            pair = (_norm(step.action), _norm(step.observation))
            taken = frozenset({pair}) if self._changes(step) else taken | {pair}
        mentioned = self.rules.mentions(step.observation)
        return PathState(self.rules, taken, self.seen | mentioned if mentioned else self.seen)

    def _changes(self, step: Any) -> bool:
        """The step changed the state a later identical visit would see (the kind says: an
        ALFWorld action that moves or alters an object, a Wikipedia search that opened a
        page). Going somewhere and looking do not."""
        changed: bool = self.rules.changes((step.action or "").strip(), (step.observation or "").strip())
        return changed

    def signals(self, step: Any, admissible: Sequence[str] | None = None) -> list[str]:
        """The step's signals, in `SIGNALS` order (`step_limit` is a version's, see below)."""
        action, obs = step.action, (step.observation or "").strip()
        out: set[str] = set(self.rules.flags(action, obs))
        if action is not None:
            if self.taken and (_norm(action), _norm(obs)) in self.taken:  # (nothing taken yet: no text to fold)
                out.add("repeated_action")
            named = self.rules.mentions(action)
            if named:
                known = set().union(*(self.rules.mentions(c) for c in admissible)) if admissible else set()
                if named - self.seen - known:
                    out.add("hallucinated_object")
        return _ordered(out)


def step_signals(
    step: Any,
    earlier: Iterable[Any],
    *,
    env: "SignalRules | str",
    task_text: str = "",
    admissible: Sequence[str] | None = None,
) -> list[str]:
    """Signals of `step` after the `earlier` steps of its version (root first); `env` is
    a kind (its family's rules) or the rules themselves."""
    state = PathState.start(env, task_text)
    for s in earlier:
        state = state.then(s)
    return state.signals(step, admissible)


class PathStates:
    """PathStates by the id of the step they follow, so a run computes each step's signals
    from the state after the previous step instead of walking the whole path again."""

    def __init__(self, cap: int = 20_000):
        self.cap = cap
        self.by_step: dict[int, PathState] = {}

    def after(self, earlier: Sequence[Any], env: "SignalRules | str", task_text: str) -> PathState:
        j, state = len(earlier), None
        while j and (state := self.by_step.get(earlier[j - 1].id)) is None:  # .get: another thread may clear it
            j -= 1
        state = state or PathState.start(env, task_text)
        if len(self.by_step) > self.cap:
            self.by_step.clear()
        for s in earlier[j:]:
            state = state.then(s)
            if s.id is not None:
                self.by_step[s.id] = state
        return state


def ended_at_limit(outcome: Any) -> bool:
    """The version stopped at its step limit without an answer (a success is an answer)."""
    return bool(outcome.done and outcome.metrics.get("limit") and outcome.success is not True)


def version_step_signals(steps: Sequence[Any], outcome: Any) -> list[list[str]]:
    """Each step's signals as a version shows them: `step_limit` on its last step."""
    out = [list(s.signals or []) for s in steps]
    if out and ended_at_limit(outcome):
        out[-1].append(STEP_LIMIT)
    return out


def version_signals(step_signal_lists: Iterable[Iterable[str]], outcome: Any) -> set[str]:
    """Every signal a version carries."""
    out = {s for sigs in step_signal_lists for s in sigs}
    if ended_at_limit(outcome):
        out.add(STEP_LIMIT)
    return out


def suggest_failure_modes(signals: Iterable[str], outcome: Any = None) -> list[str]:
    """Table-2 failure modes the signals point at (repetitive steps -> reasoning error,
    search misses -> search result error, ...): a pre-filled suggestion a person confirms
    or clears, never a label by itself. A successful version gets none: a signal on the
    way to a success accuses nothing."""
    if outcome is not None and outcome.done and outcome.success is True:
        return []
    found = set(signals)
    return list(dict.fromkeys(mode for sig, mode in SUGGESTS.items() if sig in found))


@dataclass
class SignalCounts:
    """Signals per task type over some episodes: for each (type, signal), the episodes whose
    version carries it - a count that opens its episodes."""

    episodes: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)  # episodes counted per type

    def add(self, task_type: str | None, episode_id: int, signals: Iterable[str]) -> None:
        t = task_type or ""
        self.totals[t] = self.totals.get(t, 0) + 1
        for s in signals:
            self.episodes.setdefault(t, {}).setdefault(s, []).append(episode_id)

    def counts(self) -> dict[str, dict[str, int]]:
        return {t: {s: len(ids) for s, ids in sorted(by.items())} for t, by in sorted(self.episodes.items())}
