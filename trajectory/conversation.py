"""A task and its steps as OpenAI chat messages: the `messages` and `tools` API styles'
requests and the chat exports (TRL's conversational format) are built by this one function.

Pure: it reads the family's transcript (its text form of a turn and its `tools`) and the
steps' fields, nothing else.

- `messages`: the task as the first user message; each step one assistant message in the
  family's own text form (`Thought 1: ...\\nAction 1: Search[X]`, `go to desk 1`,
  `think: ...`); each observation the next user message (`Observation 1: ...`, `OK.`).
- `tools`: the task as the first user message; each step one assistant message whose
  content is its thought (None without one) and whose `tool_calls` hold its one call (the
  stored `tool_call`, else the family's mapping of its text action, id `call_<index>`); the
  observation is a `role: "tool"` message naming the call's id. A step with no action (a
  thought-only turn, ALFWorld's `think:`) is an assistant message without a tool call, and
  what the environment answered (`OK.`) the next user message. A step whose action has no
  tool form (a malformed action the environment refused) is an assistant message whose
  content is the step in the family's text form, its observation a user message.
  A tool call whose step has no observation gets an empty tool result when more messages
  follow (an assistant call must be answered), none when it ends the conversation.
- `reasoning_content` is set on a step's assistant message (either style) when the step has
  reasoning and `with_reasoning` is true (exports); requests leave it out (servers such as
  DeepSeek refuse it in the input).
"""

from __future__ import annotations

import json
from typing import Any, Literal, Sequence

from trajectory.records import Step, ToolCall
from trajectory.tools import ToolCallError

ChatStyle = Literal["messages", "tools"]
CHAT_STYLES: tuple[str, ...] = ("messages", "tools")


def arguments_json(arguments: dict[str, Any]) -> str:
    """A call's arguments as the JSON string the API carries (deterministic: the pinned
    request is byte-identical for the same step)."""
    return json.dumps(arguments, ensure_ascii=False)


def tool_call_of(transcript: Any, step: Step) -> ToolCall | None:
    """The step's call: the stored one, else its text action mapped through the family's
    tools (id `call_<index>`); None for a thought-only step or an action with no tool form."""
    if step.tool_call is not None:
        return step.tool_call
    if step.action is None:
        return None
    try:
        name, args = transcript.tools.to_call(step.action)
    except ToolCallError:
        return None
    return ToolCall(id=f"call_{step.index}", name=name, arguments=args)


def tool_calls_entry(call: ToolCall) -> dict[str, Any]:
    """One `tool_calls` item of an assistant message."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_json(call.arguments)},
    }


def conversation(
    transcript: Any,
    task_text: str,
    steps: Sequence[Step],
    style: str,
    *,
    system: str | None = None,
    with_reasoning: bool = True,
    answered: bool = False,
) -> list[dict[str, Any]]:
    """The chat messages of a task and its steps in `style` ("messages" or "tools"):
    `[system?, user(task), assistant(step 1), user/tool(observation 1), ...]`. `answered`:
    every tool call gets its tool result, the last step's too (an exemplar whose closing
    Finish has no observation, followed by more turns in a request)."""
    if style not in CHAT_STYLES:
        raise ValueError(f"a conversation is in the messages or tools style, not {style!r}")
    out: list[dict[str, Any]] = []
    if system is not None:
        out.append({"role": "system", "content": system})
    out.append({"role": "user", "content": task_text})
    last = len(steps)
    for i, step in enumerate(steps, 1):
        if style == "messages":
            content, user = transcript.chat_turn(step, i)
            out.append(_assistant(content, None, step, with_reasoning))
            if user is not None:
                out.append({"role": "user", "content": user})
            continue
        call = tool_call_of(transcript, step)
        if call is None:
            if step.action is None:  # a thought-only turn
                content = step.thought if step.thought is not None else ""
                answer = step.observation if step.observation is not None else transcript.thought_observation
            else:  # an action with no tool form: the step as the family writes it
                content = transcript.step_text(step)
                answer = step.observation
            out.append(_assistant(content, None, step, with_reasoning))
            if answer is not None:
                out.append({"role": "user", "content": answer})
            continue
        out.append(_assistant(step.thought, call, step, with_reasoning))
        if step.observation is not None or i < last or answered:
            out.append({"role": "tool", "tool_call_id": call.id, "content": step.observation or ""})
    return out


def _assistant(content: str | None, call: ToolCall | None, step: Step, with_reasoning: bool) -> dict[str, Any]:
    # content is always a string, "" beside a call with no thought: llama.cpp's server refuses `content: null`
    # and its chat templates read `message.content` (OpenAI's spec allows either)
    msg: dict[str, Any] = {"role": "assistant", "content": content if content is not None else ""}
    if call is not None:
        msg["tool_calls"] = [tool_calls_entry(call)]
    if with_reasoning and step.reasoning is not None:
        msg["reasoning_content"] = step.reasoning
    return msg


def request_body(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The request fields a conversation style pins (the sampling fields come from the config):
    `{"messages": [...]}`, and for tools `"tools"`, `"tool_choice": "auto"`, `"parallel_tool_calls": false`
    (one tool call per step)."""
    body: dict[str, Any] = {"messages": messages}
    if tools is not None:
        body.update({"tools": tools, "tool_choice": "auto", "parallel_tool_calls": False})
    return body


def request_text(body: dict[str, Any]) -> str:
    """The pinned prompt of a conversation style: its request fields as JSON (indented, keys in
    the order `request_body` gives them, non-ASCII kept): the same steps give the same bytes."""
    return json.dumps(body, ensure_ascii=False, indent=2)
