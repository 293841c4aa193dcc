"""TEMPORARY stand-in for `trajectory.conversation.conversation` (engineer msg, issue 42), with
its contract's signature; deleted when that module is merged (sessions/exchange/messages.py
imports the real one first)."""

from __future__ import annotations

import json
from typing import Any, Sequence


def conversation(transcript: Any, task_text: str, steps: Sequence[Any], style: str, *, system: str | None = None,
                 with_reasoning: bool = False) -> list[dict[str, Any]]:
    """A task and its steps as OpenAI chat messages in `style` "messages" or "tools"."""
    msgs: list[dict[str, Any]] = []
    if system is not None:
        msgs.append({"role": "system", "content": system})
    msgs.append({"role": "user", "content": task_text})
    for i, s in enumerate(steps, 1):
        reasoning = getattr(s, "reasoning", None)
        if style == "messages":
            content, obs = transcript.chat_turn(s, i)
            m: dict[str, Any] = {"role": "assistant", "content": content}
            if with_reasoning and reasoning:
                m["reasoning_content"] = reasoning
            msgs.append(m)
            if obs is not None:
                msgs.append({"role": "user", "content": obs})
            continue
        m = {"role": "assistant", "content": s.thought}
        if with_reasoning and reasoning:
            m["reasoning_content"] = reasoning
        msgs.append(m)
        if s.action is None:
            continue
        call = getattr(s, "tool_call", None)
        if call is not None:
            cid, name, args = call.id, call.name, call.arguments
        else:
            (name, args), cid = transcript.tools.to_call(s.action), f"call_{s.index}"
        m["tool_calls"] = [{"id": cid, "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]
        if s.observation is not None:
            msgs.append({"role": "tool", "tool_call_id": cid, "content": s.observation})
    return msgs
