"""The environment interface every task family plugs into.

An environment is reset to a `Task`, then stepped with action strings. It never sees
thoughts in the Wikipedia format (the engine strips them); in the ALFWorld format a
`think: ...` action is answered `OK.` by the environment itself, as in the ReAct notebook.

Two kinds of state capture, because they have different costs and lifetimes:
- `state()` / `set_state(token)`: an opaque, in-process token; cheap; may not survive a
  reload of the environment or cross a process. The engine keeps one per visited step.
- `snapshot()` / `restore(dict)`: a small JSON-serialisable dict stored with the step in
  the database; crosses processes. Return None when the environment cannot do this; the
  engine then replays recorded actions and checks each observation (`ReplayMismatch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from trajectory.records import Task


class EnvError(Exception):
    """A clear, one-line problem with an environment or its data (missing file, ...)."""


class ReplayMismatch(EnvError):
    """Replaying a recorded action gave a different observation than the recorded one."""

    def __init__(self, index: int, action: str, expected: str, got: str):
        self.index, self.action, self.expected, self.got = index, action, expected, got
        super().__init__(
            f"replay mismatch at step {index} ({action!r}): recorded {expected[:80]!r}, "
            f"environment now says {got[:80]!r}"
        )


def inside(root: Path, relative: str, what: str) -> Path:
    """`root/relative` resolved; an EnvError when it lands outside `root` (`..`, an absolute
    part, a symlink out): ids and split names never reach other files."""
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise EnvError(f"{what} {relative!r} is outside its data folder {root}")
    return path


@dataclass
class StepResult:
    observation: str
    done: bool = False
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # won, answer, em, f1, ...


@runtime_checkable
class Environment(Protocol):
    kind: str  # "alfworld" | "hotpotqa" | "fever"
    default_max_steps: int

    def reset(self, task: Task) -> str:
        """Start the task; return the opening observation (== task.text for our tasks)."""

    def step(self, action: str) -> StepResult: ...

    def state(self) -> Any:
        """In-process token for `set_state` (may be invalid after a reset/reload)."""

    def set_state(self, token: Any) -> None: ...

    def snapshot(self) -> dict[str, Any] | None:
        """Small serialisable state, stored with each step; None if unsupported."""

    def restore(self, snap: dict[str, Any]) -> None: ...

    def admissible_actions(self) -> list[str] | None:
        """Valid commands in the current state (ALFWorld), or None when unknown."""

    def close(self) -> None: ...


@dataclass
class EnvFamily:
    """How the engine reaches one task family: list tasks, build a task from user input,
    and construct an environment for an episode's options."""

    kind: str
    list_tasks: Callable[..., list[Task]]  # (source: str = "builtin", **opts) -> tasks
    get_task: Callable[..., Task]  # (task_id: str, source: str = "builtin", **opts) -> Task
    make_env: Callable[..., Environment]  # (task: Task, options: dict, blobs: BlobStore|None)
    default_max_steps: int
    custom_task: Callable[..., Task] | None = None  # (question=..., answer=..., game=...)
    exemplars_file: Path | None = None  # the built-in prompt dict (ReAct prompt-file layout)
    # (task, options) -> the files and URLs outside the configured data roots the environment
    # would open: an imported episode opens them only once a person confirms
    references: Callable[..., list[str]] | None = None


class BlobStore(Protocol):
    """Content-addressed bytes kept in the project database (Wikipedia pages an episode
    read), so replays never refetch and episodes stay reproducible."""

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, key: str) -> bytes | None: ...
