"""Import of `chat-sft` files (TRL's conversational tool-calling form, docs/training-data.md): each
line `{"messages": [...], "tools": [...]}` becomes an editable episode of the `tools` API style
- the user message its task, each assistant message a step (content the thought,
`reasoning_content` the reasoning, its one tool call the action through the family's tools),
the tool (or user) message after it the observation. The family is the one whose tool schemas
the line's `tools` are (or `--env`). An assistant message with `weight` 0 gets the step tag
`rejected`, so exporting it again gives the same weights. Every line is checked before anything
is written; a bad one is refused with its line number."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessions import annotations as anno
from sessions.exchange.import_jsonl import _check_text, _lines
from sessions.exchange.import_report import MAX_LINE_BYTES, TOO_DEEP, ImportFailed, ImportReport, _fail
from sessions.exchange.json_text import lone_surrogate
from sessions.row_records import stored_id
from sessions.store import Store
from trajectory import kinds
from trajectory.records import AgentConfig, Step, Task, ToolCall
from trajectory.tools import ToolCallError

WHAT = "a chat-sft record"


@dataclass
class ChatEpisode:
    line: int
    env: str
    task_text: str
    steps: list[Step]
    masked: list[int]  # positions (0-based) of steps whose weight was 0
    digest: str


def _family_of(n: int, tools: Any, env: str | None) -> str:
    if env is not None:
        return env
    if not isinstance(tools, list) or not tools:
        raise _fail(
            n, f"{WHAT} needs its `tools` list (the environment's tools) to name its environment; or pass --env"
        )
    for kind in kinds.known():
        try:
            if kinds.transcript(kind).tools.schemas() == tools:
                return kind
        except Exception:  # noqa: BLE001 - a plugin that cannot load matches nothing
            continue
    names = [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]
    raise _fail(n, f"{WHAT} whose tools ({', '.join(map(str, names))[:80]}) are no environment's; pass --env")


def _call(n: int, env: str, m: dict[str, Any]) -> tuple[str, ToolCall] | None:
    calls = m.get("tool_calls")
    if not calls:
        return None
    if not isinstance(calls, list) or len(calls) != 1 or not isinstance(calls[0], dict):
        raise _fail(n, f"{WHAT}: an assistant message holds one tool call per step")
    fn = calls[0].get("function") or {}
    name, args = fn.get("name"), fn.get("arguments")
    tools = kinds.transcript(env).tools
    try:
        checked = tools.check(str(name), args if args is not None else {})
        action = tools.to_action(str(name), checked)
    except ToolCallError as exc:
        raise _fail(n, f"{WHAT}: {exc}") from None
    cid = calls[0].get("id")
    return action, ToolCall(id=cid if isinstance(cid, str) and cid else "call_0", name=str(name), arguments=checked)


def parse_chat_line(n: int, raw: bytes, env: str | None) -> ChatEpisode:
    """One line of a chat-sft file as an episode to import; raises ImportFailed (one line,
    naming the line number) when it is not such a record."""
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _fail(n, f"bad JSON in {WHAT}") from None
    except RecursionError:
        raise _fail(n, TOO_DEEP) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        raise _fail(n, f"{WHAT} is an object with a `messages` list")
    if why := lone_surrogate(raw, obj):
        raise _fail(n, why)
    msgs = [m for m in obj["messages"] if isinstance(m, dict)]
    if len(msgs) != len(obj["messages"]) or any(not isinstance(m.get("role"), str) for m in msgs):
        raise _fail(n, f"{WHAT}: every message is an object with a role")
    fam = _family_of(n, obj.get("tools"), env)
    i = 1 if msgs and msgs[0]["role"] == "system" else 0
    if i >= len(msgs) or msgs[i]["role"] != "user" or not isinstance(msgs[i].get("content"), str):
        raise _fail(n, f"{WHAT} starts with the task as a user message (after an optional system message)")
    steps, masked = _steps(n, fam, msgs, i + 1)
    if not steps:
        raise _fail(n, f"{WHAT} with no assistant message has no step to import")
    return ChatEpisode(n, fam, msgs[i]["content"], steps, masked, hashlib.sha256(raw.strip()).hexdigest())


def _steps(n: int, fam: Any, msgs: list[dict[str, Any]], i: int) -> tuple[list[Step], list[int]]:
    """(the steps, the positions of those masked by weight 0) of the messages from `i` on: each
    assistant message a step, the tool or user message after it its observation."""
    steps: list[Step] = []
    masked: list[int] = []
    while i < len(msgs):
        m = msgs[i]
        if m["role"] != "assistant":
            raise _fail(n, f"{WHAT}: message {i + 1} is {m['role']!r} where a step's assistant message belongs")
        content, reasoning = m.get("content"), m.get("reasoning_content")
        if (content is not None and not isinstance(content, str)) or (
            reasoning is not None and not isinstance(reasoning, str)
        ):
            raise _fail(n, f"{WHAT}: message {i + 1}'s content is not text")
        got = _call(n, fam, m)
        obs = None
        nxt = msgs[i + 1] if i + 1 < len(msgs) else None
        if nxt is not None and nxt["role"] in ("tool", "user"):
            if got is not None and nxt["role"] == "tool" and nxt.get("tool_call_id") not in (None, got[1].id):
                raise _fail(n, f"{WHAT}: message {i + 2} answers call {nxt.get('tool_call_id')!r}, not {got[1].id!r}")
            obs = nxt.get("content") if isinstance(nxt.get("content"), str) else None
            i += 1
        i += 1
        action, call = got if got is not None else (None, None)
        if content == "" and call is not None:  # (a call with no thought: its content is "", not null)
            content = None
        _check_text(n, f"step {len(steps) + 1}", content, action)
        steps.append(
            Step(
                index=len(steps) + 1,
                thought=content,
                action=action,
                observation=obs,
                source="imported",
                reasoning=reasoning,
                tool_call=call,
            )
        )
        if m.get("weight") == 0:
            masked.append(len(steps) - 1)
    return steps, masked


def read_chat(p: Path, env: str | None) -> list[ChatEpisode]:
    out = [parse_chat_line(n, line, env) for n, line in _lines(p, MAX_LINE_BYTES)]
    if not out:
        raise ImportFailed(f"{p.name} has no records")
    return out


def write_chat(store: Store, parsed: list[ChatEpisode], report: ImportReport, by: str | None) -> None:
    """Write the checked records (the caller's transaction)."""
    for c in parsed:
        task = Task(env=c.env, id=f"chat-sft/{c.digest[:16]}", text=c.task_text, source="imported")
        ep, v = store.episodes.create(task, AgentConfig(api_style="tools"), {})
        rows, _ = store.versions.append(stored_id(v.id), c.steps)
        for pos in c.masked:
            anno.tag_step(
                store, stored_id(rows[pos].id), by=by, add=["rejected"], note="weight 0 in the imported chat-sft file"
            )
        report.episodes.append(stored_id(ep.id))
        report.versions += 1
        report.steps += len(c.steps)
