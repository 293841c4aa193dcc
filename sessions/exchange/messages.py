"""A version's path as TRL conversational messages for the training exports (chat-sft, dpo,
kto): `trajectory.conversation.conversation` in the `messages` or `tools` style, cut into the
messages of the task and of each step, with a family's text-to-tool mapping memoised.

Which style a version exports in (`style_of`): a `tools` version as tool calls; a `messages`
version as text turns; the paper's styles (`completions`, `chat`) as text turns too for the
preference and label formats, and through the family's tool schema for chat-sft (so one
chat-sft file mixes both: `chat_sft.py`).
"""

from __future__ import annotations

from typing import Any, Sequence

from trajectory import kinds
from trajectory.conversation import conversation
from trajectory.tools import ToolCallError

Message = dict[str, Any]


def style_of(api_style: str) -> str:
    """The message style a version exports in for dpo and kto (its own when it has one)."""
    return "tools" if api_style == "tools" else "messages"


class _MemoTools:
    """A ToolSet whose text-to-call mapping is memoised (the schema check runs once per text)."""

    LIMIT = 50_000

    def __init__(self, tools: Any):
        self._tools = tools
        self._calls: dict[str, tuple[str, dict[str, Any]] | ToolCallError] = {}
        self._schemas: list[dict[str, Any]] | None = None

    def to_call(self, action: str) -> tuple[str, dict[str, Any]]:
        got = self._calls.get(action)
        if got is None:
            if len(self._calls) > self.LIMIT:
                self._calls.clear()
            try:
                name, args = self._tools.to_call(action)
                got = (name, args)
            except ToolCallError as exc:
                got = exc
            self._calls[action] = got
        if isinstance(got, ToolCallError):
            raise got
        return got[0], dict(got[1])

    def schemas(self) -> list[dict[str, Any]]:
        if self._schemas is None:
            self._schemas = self._tools.schemas()
        return self._schemas

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tools, name)


class _Family:
    """A family's transcript seen through memoised tools (what `conversation` reads)."""

    def __init__(self, transcript: Any):
        self._transcript = transcript
        self.tools = _MemoTools(transcript.tools)

    def chat_turn(self, step: Any, i: int) -> tuple[str, str | None]:
        """The turn numbered by the step's own index (its position on its path), so a step's
        messages made alone (`Conversations.cut`) read as they do in the whole path."""
        turn: tuple[str, str | None] = self._transcript.chat_turn(step, step.index)
        return turn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transcript, name)


class Conversations:
    """Messages of versions, one family per env, memoised for one export."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}
        self._episode: int | None = None  # the episode whose steps' messages `_steps` holds
        self._task: str | None = None
        self._steps: dict[tuple[str, int, int], list[Message]] = {}
        self._head: tuple[tuple[str, str], list[Message]] | None = None

    def family(self, env: str) -> _Family:
        f = self._families.get(env)
        if f is None:
            f = self._families[env] = _Family(kinds.transcript(env))
        return f

    def tools(self, env: str) -> list[dict[str, Any]]:
        """The family's tool schemas: the `tools` column."""
        return self.family(env).tools.schemas()

    def cut(
        self, env: str, task_text: str, steps: Sequence[Any], style: str
    ) -> tuple[list[Message], list[list[Message]]]:
        """(the messages before the first step, each step's messages: its assistant message
        and what answers it). An action with no tool form is the step's text (`conversation`).
        A step's messages are made once per episode and shared by every path through it (the
        same dicts: never changed in place)."""
        fam = self.family(env)
        episode = steps[0].episode_id if steps else None
        if episode != self._episode or task_text != self._task:
            self._episode, self._task, self._steps = episode, task_text, {}
            self._head = None
        if self._head is None or self._head[0] != (env, style):
            self._head = ((env, style), conversation(fam, task_text, [], style, system=fam.sft_system))
        head = list(self._head[1])
        parts: list[list[Message]] = []
        last = len(steps) - 1
        for i, step in enumerate(steps):
            key = (style, step.id, step.index)
            part = self._steps.get(key) if step.id is not None else None
            if part is None:
                msgs = conversation(fam, task_text, [step], style, system=None, with_reasoning=True)[1:]
                if not msgs or msgs[0].get("role") != "assistant":  # one assistant message per step (the contract)
                    raise ValueError(f"step {step.index} gave no assistant message")
                part = msgs
                if step.id is not None:
                    self._steps[key] = part
            if i < last and part[0].get("tool_calls") and len(part) == 1:
                # a call with no observation, followed by more: answered by an empty result, as in a whole path
                part = [part[0], {"role": "tool", "tool_call_id": part[0]["tool_calls"][0]["id"], "content": ""}]
            parts.append(part)
        return head, parts


def ends_on_assistant(msgs: list[Message]) -> list[Message]:
    """The messages without what follows the last assistant message (the last observation:
    nothing a model is trained to write)."""
    end = len(msgs)
    while end and msgs[end - 1].get("role") != "assistant":
        end -= 1
    return msgs[:end]
