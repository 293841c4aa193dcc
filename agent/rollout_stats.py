"""What rollouts measure: a group's successes with their interval (`GroupStats`), what an edit
does (`Effect`: treatment minus control, one exact procedure for the interval and p), many
episodes' effects pooled by episode (`Pooled`, `pooled`), and `RolloutError`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from agent.engine_errors import EngineError
from sessions.rollouts import RolloutGroup
from trajectory.exact2x2 import two_arm
from trajectory.score_intervals import mn_stratified
from trajectory.stats import Comparison, wilson


class RolloutError(EngineError):
    """A bad rollout request, or rollouts that could not all finish (one line)."""


@dataclass
class GroupStats:
    """A group's finished rollouts (the first N positions): successes, rate, interval."""

    group: RolloutGroup
    versions: list[int]
    success: int
    first: list[dict[str, Any]] = field(default_factory=list)  # [{"text", "count"}], most common first
    pending: int = 0  # rollouts asked for but not finished

    @property
    def n(self) -> int:
        return len(self.versions)

    @property
    def rate(self) -> float | None:
        return self.success / self.n if self.n else None

    @property
    def ci95(self) -> tuple[float, float]:
        return wilson(self.success, self.n)

    def as_json(self, *, first: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "success": self.success,
            "success_rate": self.rate,
            "ci95": list(self.ci95),
            "versions": self.versions,
        }
        if first:
            out["first"] = self.first
        return out


@dataclass
class Effect:
    """Treatment minus control: the rate difference with its interval and the p-value of one
    procedure (`exact2x2.two_arm`: Boschloo's exact unconditional test and the interval that
    inverts it for arms up to 50 rollouts, the continuity-corrected Miettinen-Nurminen score
    procedure beyond), so the interval excludes 0 exactly when p < 0.05; None while an arm is
    empty. `method` names the procedure used."""

    control: GroupStats
    treatment: GroupStats

    @property
    def comparison(self) -> Comparison:
        t, c = self.treatment, self.control
        return two_arm(t.success, t.n, c.success, c.n)

    @property
    def effect(self) -> float | None:
        c, t = self.control.rate, self.treatment.rate
        return None if c is None or t is None else t - c

    @property
    def ci95(self) -> tuple[float, float] | None:
        """None while either arm is empty: no effect, so no interval for it."""
        return self.comparison.ci95

    @property
    def p_value(self) -> float | None:
        return self.comparison.p_value

    @property
    def method(self) -> str:
        return self.comparison.method

    def as_json(self) -> dict[str, Any]:
        r = self.comparison
        return {
            "control": self.control.as_json(),
            "treatment": self.treatment.as_json(),
            "effect": self.effect,
            "effect_ci95": None if r.ci95 is None else list(r.ci95),
            "p_value": r.p_value,
            "p_better": r.p_better,
            "p_worse": r.p_worse,
            "method": r.method,
        }


POOLED_CORRECT = False  # the uncorrected stratified score test (CMH) keeps its size pooled


@dataclass
class Pooled:
    """Many episodes' what-ifs as one, stratified by episode: rollouts of one episode share
    its state and are correlated, so the arms are not summed as if independent. The effect
    is the Mantel-Haenszel difference, its interval the stratified Miettinen-Nurminen score
    interval and the p-value the score test it inverts (the Cochran-Mantel-Haenszel test).
    The summed arms are counts only: an interval over them would read as one sample."""

    control: GroupStats
    treatment: GroupStats
    stratified: Comparison
    episodes: int = 0

    @property
    def effect(self) -> float | None:
        return self.stratified.diff

    @property
    def ci95(self) -> tuple[float, float] | None:
        return self.stratified.ci95

    @property
    def p_value(self) -> float | None:
        return self.stratified.p_value

    @property
    def method(self) -> str:
        return self.stratified.method

    def as_json(self) -> dict[str, Any]:
        def arm(g: GroupStats) -> dict[str, Any]:
            return {"n": g.n, "success": g.success, "summed_over_episodes": True}

        return {
            "control": arm(self.control),
            "treatment": arm(self.treatment),
            "effect": self.effect,
            "effect_ci95": None if self.ci95 is None else list(self.ci95),
            "p_value": self.p_value,
            "method": self.method,
            "episodes": self.episodes,
        }


def pooled(effects: Sequence[Effect]) -> Pooled:
    """Many episodes' what-ifs as one, each episode a stratum (see `Pooled`). Fewer than 2
    episodes with both arms are refused: one episode is its own what-if, not a pool."""
    used = [e for e in effects if e.control.n and e.treatment.n]
    if len(used) < 2:
        raise RolloutError(f"pooling needs at least 2 episodes with finished rollouts in both arms (got {len(used)})")

    def total(arm: str) -> GroupStats:
        parts = [getattr(e, arm) for e in used]
        return GroupStats(parts[0].group, [v for p in parts for v in p.versions], sum(p.success for p in parts))

    tables = [(e.treatment.success, e.treatment.n, e.control.success, e.control.n) for e in used]
    return Pooled(total("control"), total("treatment"), mn_stratified(tables, correct=POOLED_CORRECT), len(used))
