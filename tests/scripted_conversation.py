"""The scripted server's conversation rules (what a real chat server refuses: roles out of order,
a tool result naming no pending call, calls to undeclared tools) and its scripted tool calls."""

from __future__ import annotations

import json
import uuid
from typing import Any


def tool_call(name: str, arguments: Any, id: str | None = None) -> dict[str, Any]:  # noqa: A002 - the API's name
    """One scripted tool call (`Reply(tool_calls=[...])`): arguments a dict (sent as its JSON) or
    a string sent as it is (malformed JSON)."""
    return {
        "id": id or f"call_{uuid.uuid4().hex[:8]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
    }


def check_conversation(body: dict[str, Any], *, require_tools: bool = False) -> str | None:
    """Why a chat request breaks the API's rules for a conversation, else None."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return "messages must be a non-empty list"
    tools = body.get("tools")
    names: set[str] = set()
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            return "tools must be a non-empty list"
        for t in tools:
            fn = t.get("function") if isinstance(t, dict) else None
            if (
                not isinstance(t, dict)
                or t.get("type") != "function"
                or not isinstance(fn, dict)
                or not isinstance(fn.get("name"), str)
                or not isinstance(fn.get("parameters"), dict)
            ):
                return f"a tool must be {{'type': 'function', 'function': {{name, parameters}}}}: {t!r}"
            names.add(fn["name"])
        if body.get("parallel_tool_calls") is not False:
            return "tools were sent without parallel_tool_calls: false"
    elif require_tools:
        return "this server expects `tools` in every chat request"
    waiting: list[str] = []  # the calls of the last assistant message not answered yet
    seen_user = False
    for n, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "user", "assistant", "tool"):
            return f"message {n} has no valid role"
        if role == "system" and n != 0:
            return f"message {n}: a system message comes first"
        if role != "tool" and waiting:
            return f"message {n} ({role}) before the tool results of calls {waiting}"
        if role in ("assistant", "tool") and not seen_user:
            return f"message {n} ({role}) before any user message"
        if role == "user":
            seen_user = True
        if role == "tool":
            if not waiting:
                return f"message {n}: a tool result that answers no call"
            if m.get("tool_call_id") != waiting[0]:
                return f"message {n}: tool_call_id {m.get('tool_call_id')!r} does not match the call {waiting[0]!r}"
            waiting.pop(0)
        if role == "assistant" and m.get("tool_calls"):
            if tools is None:
                return f"message {n}: tool calls in a request without tools"
            for c in m["tool_calls"]:
                fn = c.get("function") or {}
                if fn.get("name") not in names:
                    return f"message {n}: a call to {fn.get('name')!r}, which is not among the tools"
                if not isinstance(fn.get("arguments"), str):
                    return f"message {n}: tool-call arguments must be a JSON string"
                if not isinstance(c.get("id"), str) or not c["id"]:
                    return f"message {n}: a tool call without an id"
                waiting.append(c["id"])
    return None
