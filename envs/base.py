"""The environment interface every task family plugs into.

An environment is reset to a `Task`, then stepped with action strings. It never sees
thoughts in the Wikipedia format (the engine strips them); in the ALFWorld format a
`think: ...` action is answered `OK.` by the environment itself, as in the ReAct notebook.

Two kinds of state capture, because they have different costs and lifetimes:
- `state()` / `set_state(token)`: an opaque, in-process token; cheap. A token survives a
  `reset` of the same environment object (the engine keeps one per visited step and resets
  between branches); it need not survive `close()` or cross a process.
- `snapshot()` / `restore(dict)`: a small JSON-serialisable dict stored with the step in
  the database; crosses processes. Return None when the environment cannot do this; the
  engine then replays recorded actions and checks each observation (`ReplayMismatch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

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
    kind: str  # the family kind (envs.registry)
    default_max_steps: int

    def reset(self, task: Task) -> str:
        """Start the task; return the opening observation (== task.text for our tasks)."""

    def step(self, action: str) -> StepResult: ...

    def state(self) -> Any:
        """In-process token for `set_state`; valid across `reset`, not after `close`."""

    def set_state(self, token: Any) -> None: ...

    def snapshot(self) -> dict[str, Any] | None:
        """Small serialisable state, stored with each step; None if unsupported."""

    def restore(self, snap: dict[str, Any]) -> None: ...

    def admissible_actions(self) -> list[str] | None:
        """Valid commands in the current state (ALFWorld), or None when unknown."""

    def close(self) -> None: ...


EDIT_KINDS = ("rewrite_thought", "delete_thought", "insert_thought", "rewrite_action")
TEXT_METHODS = ("standard", "cot", "cot-sc", "act", "react", "react-cot-sc", "cot-sc-react")


def default_success(reward: float, info: dict[str, Any]) -> bool:
    """A game is won (`info["won"]`), else any positive reward counts."""
    return bool(info["won"]) if "won" in info else reward > 0


@dataclass(frozen=True)
class Metric:
    """An extra score of an experiment: the mean of a step-info value over its episodes
    (`of`), or the success rate under another name (`of=None`)."""

    name: str  # key in summaries (`em`, `f1`, `accuracy`, `score`)
    label: str  # column title in results tables
    of: str | None = None


@dataclass(frozen=True)
class QA:
    """Standard / CoT answers (text-answer families): how answers compare, how many
    examples the paper's `webqa_*`/`cotqa_*` blocks have, the action that submits one."""

    normalize: Callable[[str], str]
    examples: int
    backoff_steps: int | None = None  # ReAct -> CoT-SC when ReAct has no answer within these steps
    answer_action: Callable[[str], str] = lambda answer: f"Finish[{answer}]"


@dataclass(frozen=True)
class Option:
    """An episode option a face asks for (`--wording`, `--wiki`, ...): a CLI flag and the
    `env_options` key it fills; `default` is used when the flag is absent (None: not set)."""

    key: str
    flag: str
    help: str
    choices: tuple[str, ...] | None = None
    default: str | None = None
    switch: bool = False  # a flag without a value (`--friendly-lookup`): True when given
    url_name: str | None = None  # a URL a face checks before use ("the MediaWiki API URL")


@dataclass(frozen=True)
class CustomField:
    """One input of a custom task (what `custom_task` takes): keyword, label, required."""

    key: str
    label: str
    required: bool = True


@dataclass
class EnvFamily:
    """Everything about one environment: its tasks and environments, and what the layers
    above would otherwise have to know by its name - transcript format, task types, scoring,
    methods, edit kinds, options, command-line extras and display helpers."""

    kind: str
    list_tasks: Callable[..., list[Task]]  # (source: str = "builtin", **opts) -> tasks
    get_task: Callable[..., Task]  # (task_id: str, source: str = "builtin", **opts) -> Task
    make_env: Callable[..., Environment]  # (task: Task, options: dict, blobs: BlobStore|None)
    default_max_steps: int
    custom_task: Callable[..., Task] | None = None  # (question=..., answer=..., game=...)
    exemplars_file: Path | None = None  # the built-in prompt dict (ReAct prompt-file layout); None: zero-shot
    # (task, options) -> the files and URLs outside the configured data roots the environment
    # would open: an imported episode opens them only once a person confirms
    references: Callable[..., list[str]] | None = None
    transcript: Any = None  # a trajectory.kinds.Transcript; None: the command-line layout
    label: str = ""  # the name people read ("ALFWorld"); default: the kind
    task_types: tuple[tuple[str, str], ...] = ()  # (type, column title), in results order
    success: Callable[[float, dict[str, Any]], bool] = default_success
    metrics: tuple[Metric, ...] = ()
    results_caption: str = ""  # what a results table of this kind shows
    results_by_type: bool = True  # results tables show a column per task type (and All)
    builtin_label: str = "built-in sample"  # what its built-in task set is called in results
    exemplars_label: str = "(built-in)"  # how a face names its built-in exemplars
    methods: tuple[str, ...] = ("react", "act")
    qa: QA | None = None  # set when Standard / CoT answers apply
    edit_kinds: tuple[str, ...] = EDIT_KINDS
    sources: tuple[str, ...] = ("builtin",)  # task sets `list_tasks(source=...)` knows
    ids_by_listing: bool = True  # explicit task ids are checked against `list_tasks` (else `get_task`)
    paper_sample: Callable[[list[Task], str | None], list[Task]] | None = None  # `--sample paper`
    options: tuple[Option, ...] = ()
    custom_fields: tuple[CustomField, ...] = ()
    summary: Callable[[Task], str] | None = None  # a task in one line
    action_warning: Callable[[str, Sequence[str] | None], str | None] | None = None
    action_hint: str = ""  # what an action looks like, for an input's label
    cli: Callable[[Any, Any], None] | None = None  # (subparsers, helpers): its own command group
    downloads: dict[str, Callable[..., Path]] = field(default_factory=dict)  # `react-editor data NAME`
    critic_prompt: Any = None  # `react-editor suggest`'s template (a CriticPrompt); None: its transcript's

    def __post_init__(self) -> None:
        if self.transcript is None:
            from envs.transcript.command import generic_transcript

            self.transcript = generic_transcript(self.kind)
        self.label = self.label or self.kind

    def env_options(self, values: dict[str, Any]) -> dict[str, Any]:
        """The episode options from a face's inputs (`Option.key` -> value; None: unset)."""
        out: dict[str, Any] = {}
        for opt in self.options:
            value = values.get(opt.key)
            value = opt.default if value is None else value
            if value is not None:
                out[opt.key] = value
        return out

    def one_line(self, task: Task) -> str:
        if self.summary is not None:
            return self.summary(task)
        return " ".join(task.text.split())


class BlobStore(Protocol):
    """Content-addressed bytes kept in the project database (Wikipedia pages an episode
    read), so replays never refetch and episodes stay reproducible."""

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, key: str) -> bytes | None: ...
