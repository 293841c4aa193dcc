"""Chat fine-tuning records in TRL's conversational tool-calling form, one per version:
`{"messages": [...], "tools": [...]}` - system, the task as the user message, then per step an
assistant message (the thought as `content`, the action as one `tool_calls` entry whose
`arguments` is a JSON string, the reasoning channel as `reasoning_content`) and the observation
as a `role: "tool"` message with the call's `tool_call_id`. Every version exports in this form,
a paper-format one through its family's tool schema, so one file mixes both (docs/training-data.md).
Each assistant message keeps `weight` 1 (learn from it) or 0 (mask it): OpenAI's fine-tuning
format reads it; TRL ignores keys it does not know (mask with your own collator).

Weights, in order (documented in docs/jsonl-schema.md):
1. a step tagged with a negative tag (rejected, hallucinated, reasoning_error,
   invalid_action, repetitive, bad) -> 0;
2. a step written by a person or imported from a reference prompt file, or tagged
   approved / good / good_subgoal -> 1;
3. a model step -> 1 when the version is judged a success (the person's verdict when there
   is one, else the environment's outcome), else 0 (failed or unfinished runs are masked).
"""

from __future__ import annotations

from typing import Any, Sequence

from sessions.annotations import NEGATIVE_TAGS, POSITIVE_TAGS
from sessions.exchange.messages import Conversations, ends_on_assistant
from sessions.row_records import StepRow
from trajectory.records import Step


def step_weight(step: Step | StepRow, tags: set[str], version_ok: bool) -> int:
    if tags & NEGATIVE_TAGS:
        return 0
    if step.source in ("human", "imported") or tags & POSITIVE_TAGS:
        return 1
    return 1 if version_ok else 0


def version_ok(outcome_success: bool | None, verdict: str | None) -> bool:
    if verdict is not None:
        return verdict == "success"
    return outcome_success is True


def chat_record(
    conv: Conversations, env: str, task_text: str, steps: Sequence[Step | StepRow], tags: dict[int, set[str]], ok: bool
) -> dict[str, Any]:
    """The version's record."""
    head, parts = conv.cut(env, task_text, steps, "tools")
    msgs: list[dict[str, Any]] = list(head)
    for s, part in zip(steps, parts):
        w = step_weight(s, tags.get(s.id or -1, set()), ok)
        msgs.append({**part[0], "weight": w})
        msgs.extend(part[1:])
    return {"messages": ends_on_assistant(msgs), "tools": conv.tools(env)}
