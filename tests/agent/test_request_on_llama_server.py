"""The conversation styles' requests are ones llama-cpp-python's server (the built-in model's
server) accepts: its own request model validates every message. OpenAI's spec lets an assistant
message with a tool call have no content, and llama.cpp's server refuses `content: null` there
(HTTP 500 with 84 validation errors, seen on `run --model local --api-style tools`) and its
chat templates read `message.content` (HTTP 500 when it is left out): so it is ""."""

from __future__ import annotations

import pytest

from envs.registry import family
from trajectory.conversation import conversation, request_body
from trajectory.records import Step, ToolCall

types = pytest.importorskip("llama_cpp.server.types")

STEPS = {
    "alfworld": [
        Step(index=1, thought="First I go to the desk.", observation="OK."),
        Step(index=2, action="go to desk 1", observation="On the desk 1, you see a pen."),
    ],
    "hotpotqa": [
        Step(
            index=1,
            thought=None,
            action="Search[Rell]",
            observation="Rell is ...",
            reasoning="hmm",
            tool_call=ToolCall(id="call_a", name="search", arguments={"entity": "Rell"}),
        ),
        Step(index=2, thought="Now finish.", action="Finish[x]", observation="Episode finished"),
    ],
}


@pytest.mark.parametrize("style", ["messages", "tools"])
@pytest.mark.parametrize("kind", sorted(STEPS))
def test_the_built_in_servers_request_model_accepts_the_conversation(kind, style):
    tr = family(kind).transcript
    body = request_body(
        conversation(tr, "Your task is ...", STEPS[kind], style, system="Solve it."),
        tr.tools.schemas() if style == "tools" else None,
    )
    got = types.CreateChatCompletionRequest.model_validate({"model": "local", **body})
    assert len(got.messages) == len(body["messages"])
    assert all(isinstance(m.get("content"), str) for m in body["messages"])  # what the templates read
