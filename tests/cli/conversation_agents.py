"""Scripted agents for the messages and tools API styles (not tests): they answer the scripted
server's chat requests as a model would, per family - a Wikipedia agent that searches and looks
up (with reasoning_content in the tools style), a text-game agent that thinks then looks - and
the critic's JSON when the request is a suggestion's."""

from __future__ import annotations

import json

from tests.scripted_server import Reply, prompt_text, tool_call

CRITIC_MARK = "You review the trajectory"
HINT = "I should look up the eastern sector."


def _after_task(msgs: list[dict]) -> list[dict]:
    """The messages after the task's own user message (the last user message that opens a task:
    the exemplars' tasks come before it)."""
    starts = [
        i
        for i, m in enumerate(msgs)
        if m["role"] == "user"
        and (m["content"] or "").startswith(("Question:", "Claim:", "-= Welcome", "You are in", "You are "))
    ]
    return msgs[starts[-1] + 1 :] if starts else msgs


class WikiAgent:
    """Search, then lookups; `finish_at`: the step that finishes."""

    def __init__(self, style: str, finish_at: int = 99, answer: str = "1,800 to 7,000 ft"):
        self.style, self.finish_at, self.answer = style, finish_at, answer

    def __call__(self, body: dict) -> object:
        if CRITIC_MARK in prompt_text(body):
            return json.dumps(
                {"candidates": [{"step": 1, "kind": "rewrite_thought", "rationale": "plan", "text": HINT}]}
            )
        msgs = body["messages"]
        last = msgs[-1]
        i = 1 + sum(1 for m in _after_task(msgs) if m["role"] == "assistant")
        name, arg, text = (
            ("search", "Colorado orogeny", "Search[Colorado orogeny]")
            if i == 1
            else (
                ("finish", self.answer, f"Finish[{self.answer}]")
                if i >= self.finish_at
                else ("lookup", "eastern sector", "Lookup[eastern sector]")
            )
        )
        key = "entity" if name == "search" else "keyword" if name == "lookup" else "answer"
        if self.style == "tools":
            if last["role"] == "user" and last["content"].startswith("Now call one tool"):  # the fallback
                return Reply(tool_calls=[tool_call(name, {key: arg})])
            return Reply(text=f"Step {i}: I act.", reasoning=f"reasoning {i}", tool_calls=[tool_call(name, {key: arg})])
        if last["role"] == "user" and "only the action" in last["content"]:
            return text
        return f"Thought {i}: Step {i}: I act.\nAction {i}: {text}"


class GameAgent:
    """A text-game agent: a thought turn, then `look`, again and again."""

    def __init__(self, style: str):
        self.style = style

    def __call__(self, body: dict) -> object:
        if CRITIC_MARK in prompt_text(body):
            return json.dumps(
                {
                    "candidates": [
                        {
                            "step": 1,
                            "kind": "rewrite_thought",
                            "rationale": "plan",
                            "text": "I should examine the room first.",
                        }
                    ]
                }
            )
        last = body["messages"][-1]
        thinking = not (last["role"] == "user" and last["content"] == "OK.")
        if self.style == "tools":
            return (
                Reply(text="I will look around.", reasoning="maybe look")
                if thinking
                else Reply(tool_calls=[tool_call("act", {"command": "look"})])
            )
        return "think: I will look around." if thinking else "look"
