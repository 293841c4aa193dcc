"""The messages and tools API styles through the real `openai` client against the scripted server:
the request carries the pinned messages and tools, the answer's content, reasoning_content and
tool calls come back assembled (streamed and not), and the response cache keys on the request."""

from __future__ import annotations

import json

import pytest

from agent.client import ModelClient, ModelError
from tests.scripted_server import Reply, ScriptedLLM, check_conversation, tool_call
from trajectory.records import AgentConfig, Usage

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "d",
            "parameters": {
                "type": "object",
                "properties": {"entity": {"type": "string"}},
                "required": ["entity"],
                "additionalProperties": False,
            },
        },
    }
]
MSGS = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "Question: Who?"}]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


class DictCache:
    """The store's role in memory: a recorded, successful call answers its cache key."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[str, Usage]] = {}

    def get(self, key: str) -> tuple[str, Usage] | None:
        return self.data.get(key)


def client(llm: ScriptedLLM, style: str, *, stream: bool, cache: DictCache | None = None) -> ModelClient:
    config = AgentConfig(model="test-model", base_url=llm.base_url, api_style=style)
    c = ModelClient(config, api_key="sk-test-SECRET-4f9a2b", cache=cache, backoff_base_s=0.001, stream=stream)
    if cache is not None:  # record each call, as the engine does through the store
        complete = c.complete

        def recorded(*a, **kw):
            text, call = complete(*a, **kw)
            if call.cache_key and not call.cached:
                cache.data[call.cache_key] = (call.completion, call.usage)
            return text, call

        c.complete = recorded
    return c


@pytest.mark.parametrize("stream", [True, False])
def test_tools_request_carries_tools_one_call_per_step_and_the_answer_is_assembled(scripted_llm, stream):
    scripted_llm.push(
        Reply(
            text="I search Rell.",
            reasoning="The question names Rell.",
            tool_calls=[tool_call("search", {"entity": "Rell"}, id="call_abc")],
        )
    )
    msg, call = client(scripted_llm, "tools", stream=stream).converse(MSGS, TOOLS)
    body = scripted_llm.last_request.body
    assert body["messages"] == MSGS and body["tools"] == TOOLS
    assert body["parallel_tool_calls"] is False and body["tool_choice"] == "auto"
    assert "stop" not in body and bool(body.get("stream")) is stream
    assert msg == {
        "role": "assistant",
        "content": "I search Rell.",
        "reasoning_content": "The question names Rell.",
        "tool_calls": [
            {"id": "call_abc", "type": "function", "function": {"name": "search", "arguments": '{"entity": "Rell"}'}}
        ],
    }
    assert json.loads(call.completion) == msg and call.api_style == "tools"


@pytest.mark.parametrize("stream", [True, False])
def test_messages_style_sends_the_conversation_without_tools_and_gets_plain_text(scripted_llm, stream):
    scripted_llm.push("Thought 1: I search.\nAction 1: Search[Rell]")
    msg, _ = client(scripted_llm, "messages", stream=stream).converse(MSGS)
    assert "tools" not in scripted_llm.last_request.body
    assert msg == {"role": "assistant", "content": "Thought 1: I search.\nAction 1: Search[Rell]"}


@pytest.mark.parametrize("stream", [True, False])
def test_two_calls_and_malformed_arguments_come_back_as_sent(scripted_llm, stream):
    scripted_llm.push(
        Reply(tool_calls=[tool_call("search", {"entity": "A"}, id="c1"), tool_call("lookup", '{"keyword": ', id="c2")])
    )
    msg, _ = client(scripted_llm, "tools", stream=stream).converse(MSGS, TOOLS)
    assert msg["content"] is None
    assert [c["function"]["arguments"] for c in msg["tool_calls"]] == ['{"entity": "A"}', '{"keyword": ']
    assert [c["id"] for c in msg["tool_calls"]] == ["c1", "c2"]


def test_an_empty_message_is_malformed_and_retried(scripted_llm):
    scripted_llm.push(Reply(text=""), Reply(text="", reasoning="only thinking"))
    msg, call = client(scripted_llm, "tools", stream=False).converse(MSGS, TOOLS)
    assert msg["reasoning_content"] == "only thinking" and call.attempts == 2


def test_the_server_refuses_a_tool_result_naming_another_call(scripted_llm):
    bad = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [tool_call("search", {"entity": "A"}, id="c1")]},
        {"role": "tool", "tool_call_id": "c9", "content": "obs"},
    ]
    with pytest.raises(ModelError, match="tool_call_id 'c9' does not match"):
        client(scripted_llm, "tools", stream=False).converse(bad, TOOLS)


def test_conversation_rules():
    call = tool_call("search", {"entity": "A"}, id="c1")
    ok = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "o"},
    ]
    assert check_conversation({"messages": ok, "tools": TOOLS, "parallel_tool_calls": False}) is None
    assert "parallel_tool_calls" in check_conversation({"messages": ok, "tools": TOOLS})
    assert "without tools" in check_conversation({"messages": ok})
    assert "before the tool results" in check_conversation(
        {"messages": ok[:-1] + [{"role": "user", "content": "x"}], "tools": TOOLS, "parallel_tool_calls": False}
    )
    unknown = [dict(ok[2], tool_calls=[tool_call("jump", {}, id="c1")])]
    assert "not among the tools" in check_conversation(
        {"messages": MSGS + unknown, "tools": TOOLS, "parallel_tool_calls": False}
    )
    assert "expects `tools`" in check_conversation({"messages": MSGS}, require_tools=True)


def test_the_cache_keys_on_the_exact_request_messages_and_tools(scripted_llm):
    cache = DictCache()
    c = client(scripted_llm, "tools", stream=False, cache=cache)
    scripted_llm.push(
        Reply(tool_calls=[tool_call("search", {"entity": "A"}, id="c1")]),
        Reply(tool_calls=[tool_call("search", {"entity": "B"}, id="c2")]),
    )
    first, call1 = c.converse(MSGS, TOOLS)
    again, call2 = c.converse(MSGS, TOOLS)
    assert again == first and call2.cached and len(scripted_llm.completion_requests) == 1
    other_tools = [dict(TOOLS[0], function=dict(TOOLS[0]["function"], description="other"))]
    changed, call3 = c.converse(MSGS, other_tools)
    assert not call3.cached and changed["tool_calls"][0]["id"] == "c2"


def test_converse_is_only_for_the_conversation_styles(scripted_llm):
    with pytest.raises(ValueError):
        ModelClient(AgentConfig(model="m", base_url=scripted_llm.base_url, api_style="chat")).converse(MSGS)


def _chat_json(message: dict) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }


def test_reasoning_named_reasoning_is_read_and_a_message_the_sdk_cannot_read_is_malformed(scripted_llm):
    scripted_llm.push(Reply(json=_chat_json({"role": "assistant", "content": "hi", "reasoning": "vLLM's name"})))
    msg, _ = client(scripted_llm, "messages", stream=False).converse(MSGS)
    assert msg == {"role": "assistant", "content": "hi", "reasoning_content": "vLLM's name"}
    bad = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "search", "arguments": 5}}],
    }
    scripted_llm.push(Reply(json=_chat_json(bad)), Reply(json=_chat_json(bad)))
    with pytest.raises(ModelError, match="malformed response"):
        ModelClient(
            AgentConfig(model="m", base_url=scripted_llm.base_url, api_style="tools", max_retries=1),
            backoff_base_s=0.001,
            stream=False,
        ).converse(MSGS, TOOLS)
