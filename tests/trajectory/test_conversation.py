"""`trajectory.conversation`: a task and its steps as chat messages in the messages and tools styles."""

import json

import pytest

from envs.registry import family
from trajectory.conversation import conversation, tool_call_of
from trajectory.records import Step, ToolCall

WIKI = [
    Step(index=1, thought="I need to search Rell.", action="Search[Rell]", observation="Rell is a ..."),
    Step(index=2, thought="So the answer is x.", action="Finish[x]", observation="Episode finished, reward = 1"),
]
ALF = [
    Step(index=1, thought="First I go to the desk.", action=None, observation="OK."),
    Step(index=2, action="go to desk 1", observation="On the desk 1, you see a pen 1."),
]


def test_messages_style_is_one_assistant_message_per_step_in_the_familys_text_form():
    msgs = conversation(family("hotpotqa").transcript, "Question: Who?", WIKI, "messages", system="Solve it.")
    assert msgs == [
        {"role": "system", "content": "Solve it."},
        {"role": "user", "content": "Question: Who?"},
        {"role": "assistant", "content": "Thought 1: I need to search Rell.\nAction 1: Search[Rell]"},
        {"role": "user", "content": "Observation 1: Rell is a ..."},
        {"role": "assistant", "content": "Thought 2: So the answer is x.\nAction 2: Finish[x]"},
        {"role": "user", "content": "Observation 2: Episode finished, reward = 1"},
    ]


def test_messages_style_alfworld_thought_turn_is_think_answered_ok():
    msgs = conversation(family("alfworld").transcript, "You are in a room.", ALF, "messages")
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[1]["content"] == "think: First I go to the desk." and msgs[2]["content"] == "OK."
    assert msgs[3]["content"] == "go to desk 1"


def test_tools_style_calls_with_json_string_arguments_and_tool_results_naming_the_call():
    msgs = conversation(family("hotpotqa").transcript, "Question: Who?", WIKI, "tools")
    a1, t1 = msgs[1], msgs[2]
    assert a1 == {
        "role": "assistant",
        "content": "I need to search Rell.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"entity": "Rell"}'}}
        ],
    }
    assert t1 == {"role": "tool", "tool_call_id": "call_1", "content": "Rell is a ..."}
    assert json.loads(msgs[3]["tool_calls"][0]["function"]["arguments"]) == {"answer": "x"}
    assert msgs[4]["tool_call_id"] == "call_2"


def test_tools_style_uses_the_stored_call_and_keeps_reasoning_apart():
    step = Step(
        index=1,
        thought=None,
        action="Search[Rell]",
        observation="obs",
        reasoning="hmm",
        tool_call=ToolCall(id="call_xyz", name="search", arguments={"entity": "Rell"}),
    )
    tr = family("hotpotqa").transcript
    msgs = conversation(tr, "Q", [step], "tools")
    assert msgs[1]["content"] == "" and msgs[1]["reasoning_content"] == "hmm"  # (no `content: null` beside a call)
    assert msgs[1]["tool_calls"][0]["id"] == "call_xyz" and msgs[2]["tool_call_id"] == "call_xyz"
    assert "reasoning_content" not in conversation(tr, "Q", [step], "tools", with_reasoning=False)[1]
    assert conversation(tr, "Q", [step], "messages")[1]["reasoning_content"] == "hmm"


def test_tools_style_thought_turn_has_no_call_and_the_ok_follows_as_user():
    msgs = conversation(family("alfworld").transcript, "room", ALF, "tools")
    assert msgs[1] == {"role": "assistant", "content": "First I go to the desk."}
    assert msgs[2] == {"role": "user", "content": "OK."}
    assert msgs[3]["tool_calls"][0]["function"] == {"name": "act", "arguments": '{"command": "go to desk 1"}'}
    assert msgs[4] == {"role": "tool", "tool_call_id": "call_2", "content": "On the desk 1, you see a pen 1."}
    # a thought turn an exemplar wrote without its OK. line still gets the family's answer
    bare = conversation(
        family("alfworld").transcript, "room", [ALF[0].model_copy(update={"observation": None}), ALF[1]], "tools"
    )
    assert bare[2] == {"role": "user", "content": "OK."}


def test_tools_style_action_without_tool_form_is_text_and_a_user_observation():
    bad = Step(index=1, thought="t", action="Jump[x]", observation="Invalid action: Jump[x]")
    msgs = conversation(family("hotpotqa").transcript, "Q", [bad], "tools")
    assert msgs[1] == {"role": "assistant", "content": "Thought 1: t\nAction 1: Jump[x]"}
    assert msgs[2] == {"role": "user", "content": "Invalid action: Jump[x]"}
    assert tool_call_of(family("hotpotqa").transcript, bad) is None


def test_tools_style_call_without_observation_is_answered_only_when_more_follows():
    tr = family("hotpotqa").transcript
    closing = WIKI[1].model_copy(update={"observation": None})
    assert conversation(tr, "Q", [closing], "tools")[-1]["role"] == "assistant"
    mid = conversation(tr, "Q", [WIKI[0].model_copy(update={"observation": None}), WIKI[1]], "tools")
    assert mid[2] == {"role": "tool", "tool_call_id": "call_1", "content": ""}


def test_unknown_style_is_refused():
    with pytest.raises(ValueError):
        conversation(family("hotpotqa").transcript, "Q", WIKI, "chat")
