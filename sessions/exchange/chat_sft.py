"""Chat fine-tuning records: one conversation per version (system / user / assistant per
step), each assistant message carrying `weight` 1 (learn from it) or 0 (mask it).

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
from trajectory import kinds
from trajectory.records import Step


def step_weight(step: Step, tags: set[str], version_ok: bool) -> int:
    if tags & NEGATIVE_TAGS:
        return 0
    if step.source in ("human", "imported") or tags & POSITIVE_TAGS:
        return 1
    return 1 if version_ok else 0


def version_ok(outcome_success: bool | None, verdict: str | None) -> bool:
    if verdict is not None:
        return verdict == "success"
    return outcome_success is True


def chat_record(env: str, task_text: str, steps: Sequence[Step], tags: dict[int, set[str]], ok: bool) -> dict[str, Any]:
    transcript = kinds.transcript(env)  # the kind's turns and system message
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": transcript.sft_system},
        {"role": "user", "content": task_text},
    ]
    for i, s in enumerate(steps, 1):
        w = step_weight(s, tags.get(s.id or -1, set()), ok)
        content, obs = transcript.chat_turn(s, i)
        msgs.append({"role": "assistant", "content": content, "weight": w})
        if obs is not None and i < len(steps):
            msgs.append({"role": "user", "content": obs})
    return {"messages": msgs}
