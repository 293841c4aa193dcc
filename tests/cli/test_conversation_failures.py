"""Issue 42: what a conversation-style reply that is not one good step means - recorded as that
step's parse failure with the family's fallback, as malformed text is in the paper's format: a
Wikipedia reply with no tool call asks for the action alone (the paper's fallback); two calls,
an unknown tool or arguments that do not match the schema are sent as written (the environment
refuses them) with `parse_error`; in ALFWorld a reply without a call is a thought turn."""

from __future__ import annotations

import json

import pytest

from envs.wikipedia.zim import build_zim
from react_editor.main import main
from tests.alfworld_helpers import first_task
from tests.mediawiki_server import SAMPLE_ARTICLES
from tests.scripted_server import Reply, tool_call


@pytest.fixture(scope="module")
def zim(tmp_path_factory):
    return build_zim(SAMPLE_ARTICLES, tmp_path_factory.mktemp("z") / "react_editor.zim")


def cj(capsys, *argv):
    code = main([*map(str, argv), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out.strip().splitlines()[-1])


def wiki_run(capsys, llm, zim, db, n, style="tools", *more):
    return cj(
        capsys,
        "run",
        "--env",
        "hotpotqa",
        "--question",
        "What is the elevation range?",
        "--wiki",
        f"zim:{zim}",
        "--api-style",
        style,
        "--model",
        "m",
        "--base-url",
        llm.base_url,
        "--max-steps",
        str(n),
        "--db",
        db,
        *more,
    )


@pytest.mark.parametrize("stream", [True, False])
def test_wikipedia_tools_replies_that_are_not_one_good_call(stream, zim, scripted_llm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    monkeypatch.setattr("agent.model.client.streams", lambda choice, watch: stream)  # (as the Editor's steps)
    scripted_llm.push(
        Reply(text="I should search first.", reasoning="think"),  # no call: the paper's fallback asks again
        Reply(tool_calls=[tool_call("search", {"entity": "Colorado orogeny"})]),
        Reply(
            text="Two at once.",
            tool_calls=[tool_call("search", {"entity": "A"}), tool_call("lookup", {"keyword": "b"})],
        ),
        Reply(tool_calls=[tool_call("jump", {"to": "x"})]),
        Reply(text="bad", tool_calls=[tool_call("lookup", '{"keyword": ')]),
        Reply(tool_calls=[tool_call("search", {"entity": "A", "extra": 1})]),
    )
    db = str(tmp_path / "f.db")
    wiki_run(capsys, scripted_llm, zim, db, 5)
    assert all(bool(r.body.get("stream")) is stream for r in scripted_llm.completion_requests)
    s = cj(capsys, "show", "1", "--db", db)
    assert s[0]["thought"] == "I should search first." and s[0]["action"] == "Search[Colorado orogeny]"
    assert s[0]["reasoning"] == "think" and "parse_error" not in s[0]
    fallback = scripted_llm.completion_requests[1].body["messages"]
    assert fallback[-2] == {"role": "assistant", "content": "I should search first."}
    assert fallback[-1]["role"] == "user" and fallback[-1]["content"].startswith("Now call one tool")
    assert "2 tool calls" in s[1]["parse_error"] and s[1]["observation"].startswith("Invalid action")
    assert "unknown tool 'jump'" in s[2]["parse_error"] and s[2]["action"] == 'jump({"to": "x"})'
    assert "not JSON" in s[3]["parse_error"] and s[3]["action"] == 'lookup({"keyword": )'
    assert "schema" in s[4]["parse_error"]
    assert all("tool_call" not in x for x in s[1:])
    # the failed steps go back to the model as their text, answered by a user message
    assert main(["show", "1", "--prompt", "--db", db]) == 0
    pinned = json.loads(capsys.readouterr().out)
    tail = pinned["messages"][-8:]
    assert [m["role"] for m in tail] == ["assistant", "user"] * 4
    assert tail[0]["content"].startswith("Thought 2: Two at once.\nAction 2: search(") and "tool_calls" not in tail[0]
    assert tail[1]["content"].startswith("Invalid action")


def test_wikipedia_messages_style_malformed_text_takes_the_papers_fallback(
    zim, scripted_llm, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    scripted_llm.push("Thought 1: I should search.", "Action 1: Search[Colorado orogeny]")
    db = str(tmp_path / "m.db")
    wiki_run(capsys, scripted_llm, zim, db, 1, style="messages")
    (s,) = cj(capsys, "show", "1", "--db", db)
    assert (s["thought"], s["action"]) == ("I should search.", "Search[Colorado orogeny]")
    follow = scripted_llm.completion_requests[1].body["messages"]
    assert follow[-2] == {"role": "assistant", "content": "Thought 1: I should search."}
    assert "only the action for step 1" in follow[-1]["content"]


def test_alfworld_tools_no_call_is_a_thought_turn_and_two_calls_a_parse_failure(
    scripted_llm, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    scripted_llm.push(
        Reply(text="First I look."),
        Reply(tool_calls=[tool_call("act", {"command": "look"}), tool_call("act", {"command": "inventory"})]),
        Reply(tool_calls=[tool_call("act", {"cmd": "look"})]),
    )
    db = str(tmp_path / "a.db")
    cj(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        first_task("pick_and_place_simple").id,
        "--api-style",
        "tools",
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "3",
        "--db",
        db,
    )
    s = cj(capsys, "show", "1", "--db", db)
    assert (s[0]["thought"], s[0]["action"], s[0]["observation"]) == ("First I look.", None, "OK.")
    assert "2 tool calls" in s[1]["parse_error"] and s[1]["observation"] == "Nothing happens."
    assert "schema" in s[2]["parse_error"] and s[2]["observation"] == "Nothing happens."


def test_experiment_rerun_in_the_tools_style_then_compare(tmp_path, capsys, scripted_llm, monkeypatch):
    """`experiment rerun X --api-style tools` keeps the tasks and changes the style (part of the
    config); `experiment compare` pairs them."""
    from tests.cli_helpers import run_args
    from tests.experiment_agents import HOTPOT, wiki_agent

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    rows = HOTPOT[:4]
    text_agent = wiki_agent({r["question"]: r["answer"] for r in rows[:1]})

    def agent(body):  # the text styles as wiki_agent answers; the tools style finishes at once
        if "tools" not in body:
            return text_agent(body)
        task = [
            m["content"] for m in body["messages"] if m["role"] == "user" and m["content"].startswith("Question: ")
        ][-1][len("Question: ") :]
        good = {r["question"]: r["answer"] for r in rows[:3]}.get(task, "Nowhere")
        return Reply(text="I know it.", tool_calls=[tool_call("finish", {"answer": good})])

    scripted_llm.set_responder(agent)
    db = tmp_path / "x.db"
    a = cj(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "4", "--name", "A"))
    b = cj(capsys, "experiment", "rerun", "A", "--name", "B", "--api-style", "tools", "--db", db)
    assert any("tools" in r.body for r in scripted_llm.completion_requests)
    from sessions import experiments
    from sessions.store import Store

    store = Store(db)
    assert experiments.get(store, "B").config.api_style == "tools"
    assert experiments.get(store, "A").config.api_style == "completions" and b["experiment"] != a["experiment"]
    store.close()
    c = cj(capsys, "experiment", "compare", "A", "B", "--db", db)
    assert c["common"] == 4 and (c["both"], c["a_only"], c["b_only"], c["neither"]) == (1, 0, 2, 1)


def test_a_paper_style_version_resumed_in_the_tools_style_and_a_persons_json_call(
    zim, scripted_llm, tmp_path, capsys, monkeypatch
):
    """A version of the paper's format goes on in the tools style (a new child version): its steps
    are sent as tool calls with ids `call_<index>`; a person's step may be a JSON call."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    scripted_llm.push(" I search.\nAction 1: Search[Colorado orogeny]")
    db = str(tmp_path / "p.db")
    wiki_run(capsys, scripted_llm, zim, db, 4, "completions", "--human")
    cj(capsys, "step", "1", "--db", db)
    cj(
        capsys,
        "step",
        "1",
        "--thought",
        "Look it up.",
        "--action",
        '{"name": "lookup", "arguments": {"keyword": "eastern sector"}}',
        "--db",
        db,
    )
    s = cj(capsys, "show", "1", "--db", db)
    assert s[1]["action"] == "Lookup[eastern sector]" and s[1]["observation"].startswith("(Result 1 / ")
    scripted_llm.push(Reply(text="Done.", tool_calls=[tool_call("finish", {"answer": "x"})]))
    res = cj(capsys, "resume", "1", "--api-style", "tools", "--db", db)
    body = scripted_llm.completion_requests[-1].body
    calls = [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")][-2:]
    assert [c["tool_calls"][0]["id"] for c in calls] == ["call_1", "call_2"]
    assert calls[1]["content"] == "Look it up." and calls[1]["tool_calls"][0]["function"] == {
        "name": "lookup",
        "arguments": '{"keyword": "eastern sector"}',
    }
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "call_2", "content": s[1]["observation"]}
    assert res["done"] and cj(capsys, "show", f"1:{res['number']}", "--db", db)[2]["tool_call"]["name"] == "finish"
    err = main(["step", "1", "--action", '{"name": "jump", "arguments": {}}', "--db", db])
    assert err == 2 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("style", ["messages", "tools"])
def test_a_persons_fixed_version_in_an_exemplar_set_drives_the_conversation_styles(
    style, zim, scripted_llm, tmp_path, capsys, monkeypatch
):
    """A set built on the built-in exemplars plus a person's fixed version: the version's task and
    steps come before the new task as prior turns of the request's style."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    db = str(tmp_path / "e.db")
    scripted_llm.push(" I search it.\nAction 1: Search[Colorado orogeny]", " So.\nAction 2: Finish[1,800 to 7,000 ft]")
    cj(
        capsys,
        "run",
        "--env",
        "hotpotqa",
        "--question",
        "Where is the Colorado orogeny?",
        "--wiki",
        f"zim:{zim}",
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--db",
        db,
    )
    cj(capsys, "exemplars", "add", "fixed", "1", "--create", "--from", "builtin", "--db", db)
    scripted_llm.push(
        Reply(text="Search.", tool_calls=[tool_call("search", {"entity": "X"})])
        if style == "tools"
        else "Thought 1: Search.\nAction 1: Search[X]"
    )
    wiki_run(capsys, scripted_llm, zim, db, 1, style, "--exemplars", "fixed")
    msgs = scripted_llm.completion_requests[-1].body["messages"]
    users = [m["content"] for m in msgs if m["role"] == "user"]
    assert users[-1] == "Question: What is the elevation range?"
    mine = users.index("Question: Where is the Colorado orogeny?")
    assert 0 < mine < len(users) - 1 and "Question: " in users[0]  # after the built-in ones, before the task
    said = [m for m in msgs if m["role"] == "assistant"]
    if style == "tools":
        assert any(
            m["content"] == "I search it."
            and m["tool_calls"][0]["function"]["arguments"] == '{"entity": "Colorado orogeny"}'
            for m in said
        )
    else:
        assert any(m["content"] == "Thought 1: I search it.\nAction 1: Search[Colorado orogeny]" for m in said)


@pytest.mark.parametrize("style", ["messages", "tools"])
def test_one_shot_prompts_of_the_conversation_styles_go_as_one_user_message(
    style, tmp_path, capsys, scripted_llm, monkeypatch
):
    """A Standard/CoT answer (and the critic's prompt) has no turns: in these styles it is sent as the
    chat style sends it, one user message, and its text is the answer."""
    from tests.cli_helpers import run_args
    from tests.experiment_agents import HOTPOT

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    answers = {r["question"]: r["answer"] for r in HOTPOT[:2]}

    def cot(body):  # the one message: the CoT prompt, then the chat instruction
        (msg,) = body["messages"]
        question = [ln for ln in msg["content"].split("\n") if ln.startswith("Question: ")][-1][len("Question: ") :]
        return f"Let's think step by step. So the answer is {answers[question]}.\nAnswer: {answers[question]}"

    scripted_llm.set_responder(cot)
    out = cj(
        capsys,
        *run_args(
            scripted_llm,
            tmp_path / "q.db",
            "--env",
            "hotpotqa",
            "--limit",
            "2",
            "--method",
            "cot",
            "--api-style",
            style,
        ),
    )
    assert out["success"] == 2
    for r in scripted_llm.completion_requests:
        assert len(r.body["messages"]) == 1 and r.body["messages"][0]["role"] == "user" and "tools" not in r.body
