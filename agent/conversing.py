"""The `messages` and `tools` API styles' side of a step: the request (the system message, the
exemplars as prior turns of the same style, the task and the version's steps, and for `tools`
the family's tool schemas) pinned as JSON, and the parse of the assistant message that answers.

Every exemplar set drives these styles: the exemplar transcripts a task's text prompt would use
(`transcript.exemplar_texts`) are parsed into steps by the family's prompt-file parser and
rendered by `trajectory.conversation`, as the task's own steps are.

What a reply means (`parse`):
- `messages`: the content is read as the text styles read a completion (the family's parse,
  its cue and stop applied), so its failures and the paper's fallback are the text styles'.
- `tools`: one tool call is the action (its text form through `tools.to_action`), the content
  the thought, `reasoning_content` the step's reasoning. No call: a thought-only turn where
  thoughts are turns (ALFWorld's `think:`), else the paper's fallback (an action request).
  Two calls, an unknown tool or arguments that do not match the schema: the step's parse
  failure (`info["parse_error"]`), its action the call as written, which the environment
  refuses as it refuses malformed text today.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from trajectory.conversation import conversation, request_body, request_text
from trajectory.kinds import ModelRequest
from trajectory.records import MAX_TEXT, Step, Task, ToolCall
from trajectory.tools import ToolCallError


def strip_echo(text: str, prompt: str) -> str:
    """Chat models often repeat the cue ('Thought 3:', '>'); drop it so parsing matches."""
    cue = prompt[prompt.rfind("\n") + 1 :].strip()
    t = text.lstrip()
    if cue and t.startswith(cue):
        t = t[len(cue) :]
        return t if t.startswith(" ") else " " + t
    if cue == ">" and t.startswith(">"):
        return t[1:]
    return text


TOOLS_NOTE = (
    "In this conversation every action is a tool call: write your reasoning as the message text "
    "and call exactly one tool per turn."
)
TOOLS_ACTION = "Now call one tool: the action of step {i}."


@dataclass
class Fixed:
    """The part of every request of a task that no step changes: the system message and the
    exemplars' turns."""

    messages: list[dict[str, Any]]


@dataclass
class Turn:
    """What a conversation-style reply gave a step: thought and action (as the text styles),
    and the step's reasoning, tool call, raw message and parse error; `then`: a follow-up
    request (the paper's action-only fallback)."""

    thought: str | None
    action: str | None
    then: "ConvRequest | None" = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConvRequest:
    """A conversation-style request: `model` is what the client sends (its prompt the request
    JSON), `text` the text-style request of the same step (its cue, stop and parse)."""

    model: ModelRequest
    text: ModelRequest
    api_style: str


def system_message(transcript: Any, api_style: str) -> str:
    """The system message: the family's chat instruction, with the tools note in `tools`."""
    return transcript.sft_system + ("\n\n" + TOOLS_NOTE if api_style == "tools" else "")


def fixed_messages(transcript: Any, prompts: dict[str, str], task: Task, style: str, api_style: str) -> Fixed:
    """The system message and the task's exemplars as prior turns of `api_style`."""
    out = [{"role": "system", "content": system_message(transcript, api_style)}]
    pick = getattr(transcript, "exemplar_texts", None)  # (a plugin's own transcript may not offer it: zero-shot)
    texts = pick(prompts, task, style) if prompts and pick is not None else []
    for n, text in enumerate(texts):
        for entry in transcript.parse_prompt_text(text, f"exemplar {n + 1}"):
            for ex in entry.trajectories:
                out += conversation(transcript, ex.task_text, ex.steps, api_style, with_reasoning=False, answered=True)
    return Fixed(out)


def request(
    transcript: Any, fixed: Fixed, task: Task, steps: Sequence[Step], api_style: str, text: ModelRequest
) -> ConvRequest:
    """The request of a version's next step (or of the action its thought waits for: `text`
    is then the text styles' action request)."""
    msgs = fixed.messages + conversation(transcript, task.text, steps, api_style, with_reasoning=False)
    if text.purpose == "action_fallback":
        msgs += _action_turns(transcript, text, api_style)
    tools = transcript.tools.schemas() if api_style == "tools" else None
    body = request_text(request_body(msgs, tools))
    stop = list(text.stop) if api_style == "messages" else []  # (the paper's stops; a tool call is never cut)
    model = ModelRequest(
        body, stop, "", purpose=text.purpose, index=text.index, style=text.style, prefix=body, thought=text.thought
    )
    return ConvRequest(model, text, api_style)


def _action_turns(transcript: Any, text: ModelRequest, api_style: str) -> list[dict[str, Any]]:
    """The thought awaiting its action, and the ask for the action alone."""
    if api_style == "tools":
        return [
            {"role": "assistant", "content": text.thought or ""},
            {"role": "user", "content": TOOLS_ACTION.format(i=text.index)},
        ]
    cue = text.prompt[len(text.prefix) :]  # "Thought i: ...\nAction i:"
    return [{"role": "assistant", "content": cue.rsplit("\n", 1)[0]}, {"role": "user", "content": text.chat}]


def parse(transcript: Any, req: ConvRequest, answer: str, fixed: Fixed, task: Task, steps: Sequence[Step]) -> Turn:
    """The step's turn from the assistant message's JSON (the call's completion)."""
    msg = json.loads(answer)
    content = msg.get("content") or ""
    reasoning = msg.get("reasoning_content") or None
    extra: dict[str, Any] = {"message": msg}
    if reasoning is not None:
        extra["reasoning"] = reasoning[:MAX_TEXT]
    if req.api_style == "messages":
        reply = transcript.parse(req.text, strip_echo(_cut(content.lstrip(), req.text.stop), req.text.prompt))
        then = request(transcript, fixed, task, steps, req.api_style, reply.then) if reply.then else None
        return Turn(_short(reply.thought), _short(reply.action), then, extra)
    thought = content.strip()[:MAX_TEXT] or None
    if req.text.style == "act" and req.text.purpose != "action_fallback":
        thought = None  # the act style has no thoughts (the text stays in the raw message)
    if req.text.purpose == "action_fallback":
        thought = req.text.thought
    calls = msg.get("tool_calls") or []
    if len(calls) == 1:
        c = calls[0]
        fn = c.get("function") or {}
        name, args = fn.get("name") or "", fn.get("arguments")
        try:
            checked = transcript.tools.check(name, args)
            action = transcript.tools.to_action(name, checked)
        except ToolCallError as exc:
            extra["parse_error"] = str(exc)
            return Turn(thought, _written(name, args), None, extra)
        extra["tool_call"] = ToolCall(id=c.get("id") or f"call_{req.text.index}", name=name, arguments=checked)
        return Turn(thought, action, None, extra)
    if len(calls) > 1:
        extra["parse_error"] = f"{len(calls)} tool calls in one step (one per step)"
        return Turn(
            thought,
            "; ".join(
                _written((c.get("function") or {}).get("name") or "", (c.get("function") or {}).get("arguments"))
                for c in calls
            ),
            None,
            extra,
        )
    # no tool call
    if transcript.thoughts_are_turns:  # a thought-only turn (ALFWorld's think:)
        return Turn(content.strip()[:MAX_TEXT], None, None, extra)
    if req.text.purpose == "action_fallback":  # the fallback asked for a call and got none
        extra["parse_error"] = "no tool call for the action"
        return Turn(thought, content.strip()[:MAX_TEXT], None, extra)
    follow = transcript.parse(req.text, "")  # the text styles' fallback request for this step
    if follow.then is None:  # (a transcript with no fallback: the step fails to parse)
        extra["parse_error"] = "no tool call"
        return Turn(thought, "", None, extra)
    fallback = follow.then
    fallback.thought = thought or ""  # (the tools style's action turns read the thought from here)
    return Turn(thought, None, request(transcript, fixed, task, steps, req.api_style, fallback), extra)


def _written(name: str, args: Any) -> str:
    """A refused call as text (what the environment is sent, and refuses)."""
    return f"{name}({args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)})"[:MAX_TEXT]


def _cut(text: str, stop: list[str]) -> str:
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(cuts)] if cuts else text


def _short(text: str | None) -> str | None:
    return None if text is None else text[:MAX_TEXT]
