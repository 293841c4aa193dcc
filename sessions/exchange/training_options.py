"""The training exports' options (continuation, implicit prompt, unit, evaluation hygiene) and
their counts: how many records were written and how many left out, by reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from sessions.store import Store, StoreError

CONTINUATIONS = ("step", "rest")
UNITS = ("step", "trajectory")


class OptionError(StoreError, ValueError):
    """A bad training-export option (one line)."""


@dataclass
class TrainingOptions:
    continuation: str = "rest"  # dpo: the one differing step, or the rest of each branch
    implicit_prompt: bool = False  # dpo: the prompt inside chosen and rejected (TRL's implicit-prompt form)
    unit: str = "trajectory"  # kto: a label per step or per trajectory
    exclude_experiments: tuple[str, ...] = ()  # leave out every task these experiments evaluate
    proven_only: bool = False  # dpo: only pairs a what-if proved
    min_effect: float | None = None  # dpo: only pairs a what-if proved with an effect at least this large

    def check(self) -> "TrainingOptions":
        if self.continuation not in CONTINUATIONS:
            raise OptionError(f"unknown continuation {self.continuation!r} (one of: {', '.join(CONTINUATIONS)})")
        if self.unit not in UNITS:
            raise OptionError(f"unknown unit {self.unit!r} (one of: {', '.join(UNITS)})")
        if self.min_effect is not None and not 0 <= self.min_effect <= 1:
            raise OptionError(
                f"--min-effect is a difference of success rates, between 0 and 1 (got {self.min_effect:g})"
            )
        return self

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["exclude_experiments"] = list(self.exclude_experiments)
        return d


@dataclass
class Counts:
    """Records written and left out (reason -> how many), filled while the records are read."""

    written: int = 0
    left_out: Counter[str] = field(default_factory=Counter)

    def wrote(self, n: int = 1) -> None:
        self.written += n

    def leave_out(self, reason: str, n: int = 1) -> None:
        self.left_out[reason] += n

    @property
    def total_left_out(self) -> int:
        return sum(self.left_out.values())

    def lines(self) -> list[str]:
        """What an export prints: the records written, then one line per reason left out."""
        out = [f"wrote {self.written} record{'s' if self.written != 1 else ''}; left out {self.total_left_out}"]
        out += [f"  left out {n}: {why}" for why, n in sorted(self.left_out.items(), key=lambda x: (-x[1], x[0]))]
        return out

    def as_json(self) -> dict[str, Any]:
        return {"written": self.written, "left_out": dict(sorted(self.left_out.items()))}


def excluded_episodes(store: Store, names: tuple[str, ...] | list[str]) -> dict[int, str]:
    """{episode id: the experiment whose task it is} for every episode of a task an experiment
    named here evaluates (its task list, whether or not the item ran): training data never holds
    the test set. An unknown experiment name is an error."""
    from sessions import experiments

    out: dict[int, str] = {}
    for name in names:
        try:
            exp = experiments.get(store, name)
        except StoreError:
            raise OptionError(f"unknown experiment {name!r} (--exclude-experiment)") from None
        rows = store.db.execute(
            "select e.id from episodes e join tasks t on t.id = e.task_id where t.key in "
            "(select task_key from experiment_items where experiment_id = ?)",
            [exp.id],
        ).fetchall()
        for (eid,) in rows:
            out.setdefault(int(eid), exp.name)
    return out
