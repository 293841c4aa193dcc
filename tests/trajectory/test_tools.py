"""The families' actions as native tools: schemas, and text form <-> tool call both ways."""

import pytest

from envs.registry import family
from trajectory.tools import ToolCallError


@pytest.mark.parametrize(
    "kind,names",
    [("hotpotqa", ["search", "lookup", "finish"]), ("fever", ["search", "lookup", "finish"]), ("alfworld", ["act"])],
)
def test_each_family_declares_its_tools_as_openai_function_schemas(kind, names):
    schemas = family(kind).transcript.tools.schemas()
    assert [s["function"]["name"] for s in schemas] == names
    for s in schemas:
        assert s["type"] == "function"
        params = s["function"]["parameters"]
        assert params["type"] == "object" and params["required"] and params["additionalProperties"] is False


@pytest.mark.parametrize(
    "kind,text,call",
    [
        ("hotpotqa", "Search[Rell]", ("search", {"entity": "Rell"})),
        ("hotpotqa", "Lookup[born in]", ("lookup", {"keyword": "born in"})),
        ("hotpotqa", "Finish[1,800 to 7,000 ft]", ("finish", {"answer": "1,800 to 7,000 ft"})),
        ("fever", "Finish[NOT ENOUGH INFO]", ("finish", {"answer": "NOT ENOUGH INFO"})),
        ("alfworld", "go to desk 1", ("act", {"command": "go to desk 1"})),
    ],
)
def test_a_text_action_maps_to_its_call_and_back(kind, text, call):
    tools = family(kind).transcript.tools
    assert tools.to_call(text) == call
    assert tools.to_action(*call) == text


@pytest.mark.parametrize(
    "kind,name,args,why",
    [
        ("hotpotqa", "browse", {"url": "x"}, "unknown tool"),
        ("hotpotqa", "search", {"query": "x"}, "do not match its schema"),
        ("hotpotqa", "search", {"entity": 3}, "do not match its schema"),
        ("hotpotqa", "search", '{"entity": ', "not JSON"),
        ("fever", "finish", {"answer": "yes"}, "do not match its schema"),
        ("alfworld", "act", {"command": "look", "extra": 1}, "do not match its schema"),
    ],
)
def test_a_call_that_does_not_fit_the_tools_is_refused_in_one_line(kind, name, args, why):
    with pytest.raises(ToolCallError, match=why) as got:
        family(kind).transcript.tools.to_action(name, args)
    assert "\n" not in str(got.value)


def test_text_with_no_tool_form_and_json_calls():
    tools = family("hotpotqa").transcript.tools
    with pytest.raises(ToolCallError, match="none of"):
        tools.to_call("search for Rell")
    assert tools.parse_call_text('{"name": "search", "arguments": {"entity": "Rell"}}') == (
        "search",
        {"entity": "Rell"},
    )
    with pytest.raises(ToolCallError):
        tools.parse_call_text('{"name": "search"}')
