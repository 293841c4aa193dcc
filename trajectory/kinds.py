"""What the layers above reach of an environment kind's text: its transcript (how a turn
reads, the prompt for the next model call, the parse of a completion, the prompt-file
layout) and its failure-signal rules - as protocols, so nothing here names an environment.

Families (`envs/`) implement them. `sessions/` never imports `envs/`, so the environment
registry publishes a resolver here when it loads (`install`); `transcript(kind)` then gives
a kind's transcript to any layer. The engine and the faces reach families through
`envs.registry` directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence

from trajectory.records import Step, Task
from trajectory.tools import ToolSet


@dataclass
class ModelRequest:
    """One model call a step needs: the prompt, where it stops, what a chat model is told."""

    prompt: str
    stop: list[str]
    chat: str
    purpose: str = "step"  # step | action_fallback
    index: int = 1  # the step the request is for
    style: str = "react"  # react | act
    prefix: str = ""  # the prompt before its cue (what a follow-up request builds on)
    thought: str | None = None  # an action-only request: the thought the action follows


@dataclass
class Reply:
    """A parsed completion: the turn's thought and action, or a further request (the
    paper's fallback asks for the action alone when a completion has none)."""

    thought: str | None
    action: str | None
    then: ModelRequest | None = None


class SignalRules(Protocol):
    """A kind's failure signals beyond the generic ones (trajectory.signals)."""

    def mentions(self, text: str | None) -> set[str]:
        """Objects a text names, for `hallucinated_object` (empty: not tracked)."""

    def flags(self, action: str | None, observation: str) -> set[str]:
        """The kind's own signals of one turn (invalid_action, search_miss, ...)."""

    def changes(self, action: str, observation: str) -> bool:
        """The action changed what a later identical action would see: a repeat counts as
        `repeated_action` only when nothing changed in between."""


class Transcript(Protocol):
    """A family's transcript format: pure text functions over tasks and steps."""

    thoughts_are_turns: bool  # a thought is its own turn (ALFWorld's `think:`), else part of a step
    keyed_entries: bool  # each exemplar is its own prompt-file entry (else exemplars share blocks)
    thought_observation: str | None  # what the environment answers a thought turn
    signals: SignalRules
    sft_system: str  # the system message of a chat fine-tuning record
    tools: ToolSet  # the family's actions as native tools (the `tools` API style, chat-sft export)

    def command(self, thought: str | None, action: str | None) -> str:
        """What the environment receives for a turn."""

    def split_thought(self, command: str) -> str | None:
        """The thought a typed command stands for (`think: X` -> X), else None."""

    def step_text(self, step: Any) -> str:
        """A turn as the model wrote it, without its observation."""

    def chat_turn(self, step: Any, i: int) -> tuple[str, str | None]:
        """(assistant message, following user message) of a turn in a chat record."""

    def render(self, task_text: str, steps: Sequence[Any]) -> str:
        """The trajectory as text (what `react-editor show` prints)."""

    def request(
        self, prompts: dict[str, str], task: Task, steps: Sequence[Any], style: str, draft: str | None
    ) -> ModelRequest:
        """The next model call of a version (`draft`: a person's thought awaiting its action).
        A transcript may also offer `fixed_prefix(prompts, task, style) -> str`, the text
        every request of the task starts with; the engine then builds it once per episode
        and exemplar revision and passes it back as `request(..., fixed=...)`."""

    def parse(self, request: ModelRequest, completion: str) -> Reply: ...

    def exemplar_texts(self, prompts: dict[str, str], task: Task, style: str) -> list[str]:
        """The exemplar transcripts (or examples blocks) a task's prompt uses: the messages and
        tools styles parse them with `parse_prompt_text` and render them as prior turns."""

    def check_exemplars(self, prompts: dict[str, str], style: str) -> None:
        """Raise ExemplarError when `prompts` cannot serve every task of the kind in `style`."""

    # -- the prompt-file layout (trajectory.prompt_files)
    def exemplar_text(self, task_text: str, steps: Sequence[Step]) -> str: ...

    def assemble(self, items: Iterable[Any]) -> dict[str, str]: ...

    def next_key(self, exemplar: Any, used: set[str]) -> str | None:
        """The entry key an added exemplar gets in a set (None: the layout groups them)."""

    def export_trailer(self, exemplar: Any) -> str: ...

    def claims(self, data: dict[str, str] | str) -> bool:
        """Whether a prompt-file dict (or a plain transcript) is in this kind's layout."""

    def parse_prompt_file(self, data: dict[str, str], source: str) -> list[Any]: ...

    def parse_prompt_text(self, text: str, source: str) -> list[Any]: ...


_RESOLVE: Callable[[str], Transcript] | None = None
_KINDS: Callable[[], Iterable[str]] | None = None


def install(resolve: Callable[[str], Transcript], kinds: Callable[[], Iterable[str]]) -> None:
    """Called by the environment registry: how a kind's transcript is found."""
    global _RESOLVE, _KINDS
    _RESOLVE, _KINDS = resolve, kinds


class UnknownKind(ValueError):
    """A kind no installed environment family defines (one line)."""


def transcript(kind: str) -> Transcript:
    if _RESOLVE is None:
        raise UnknownKind("no environment registry is loaded (import envs.registry)")
    return _RESOLVE(kind)


def known() -> tuple[str, ...]:
    """Every kind the registry can load (built-in first)."""
    return tuple(_KINDS()) if _KINDS is not None else ()
