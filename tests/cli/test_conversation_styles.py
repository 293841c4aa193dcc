"""Issue 42: the messages and tools API styles for each family (HotpotQA, FEVER, ALFWorld; the
TextWorld plugin in tests/envs/test_textworld_conversation.py) through the real command line, the
real `openai` client and the scripted server on 127.0.0.1, which checks every request (roles in
order, tool results naming their calls, `tools` carried): a run; each edit kind then a resume
from the restored environment; a what-if and a suggestion; `show --prompt` byte-identical from a
new engine (as after a restart) and equal to the request the next step sends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs.wikipedia.zim import build_zim
from react_editor.main import main
from tests.alfworld_helpers import first_task
from tests.cli.conversation_agents import HINT, GameAgent, WikiAgent
from tests.mediawiki_server import SAMPLE_ARTICLES

PINNED = ("messages", "tools", "tool_choice", "parallel_tool_calls")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def zim(tmp_path_factory):
    return build_zim(SAMPLE_ARTICLES, tmp_path_factory.mktemp("z") / "react_editor.zim")


def cli(capsys, *argv: str, code: int = 0):
    rc = main([*map(str, argv)])
    out = capsys.readouterr()
    assert rc == code, out.err
    return out


def cj(capsys, *argv: str):
    return json.loads(cli(capsys, *argv, "--json").out.strip().splitlines()[-1])


def pinned(body: dict) -> dict:
    return {k: body[k] for k in PINNED if k in body}


def prompt_of(capsys, db, ref) -> str:
    return cli(capsys, "show", ref, "--prompt", "--db", db).out


def check_pinned_is_sent(capsys, llm, db, ref) -> tuple[dict, str]:
    """`show --prompt` twice (each a new engine: as after a restart) gives the same bytes, its
    `--json` the request body, and the next step sends exactly those messages and tools (the
    first request of a resume; `--no-cache` makes it a child version: returned with it)."""
    text = prompt_of(capsys, db, ref)
    assert prompt_of(capsys, db, ref) == text
    body = cj(capsys, "show", ref, "--prompt", "--db", db)
    assert pinned(body) == json.loads(text) and body["model"] == "m"
    before = len(llm.completion_requests)
    sent_keys = ("model", "temperature", "top_p", "max_tokens", "stop", *PINNED)
    res = cj(capsys, "resume", ref, "--no-cache", "--db", db)  # (the cache would answer an identical request)
    assert len(llm.completion_requests) > before, res
    sent = llm.completion_requests[before].body
    assert pinned(sent) == json.loads(text)
    assert {k: sent[k] for k in sent_keys if k in sent} == {**body, "model": sent["model"]}  # the body, as sent
    return llm.completion_requests[before].body, f"1:{res['number']}"


def other_process_prompt(db, ref) -> str:
    """`react-editor show REF --prompt` in its own process (what a restart reads back)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "react_editor", "show", ref, "--prompt", "--db", db],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.decode("utf-8")


def steps(capsys, db, ref) -> list[dict]:
    return cj(capsys, "show", ref, "--db", db)


def new_version(capsys, db, *edit) -> str:
    out = cj(capsys, "edit", "1:1", *edit, "--db", db)
    return f"1:{out['number']}"


@pytest.mark.parametrize("style", ["messages", "tools"])
@pytest.mark.parametrize("kind", ["hotpotqa", "fever"])
def test_wikipedia_families_run_edit_resume_whatif_suggest(
    kind, style, zim, scripted_llm, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    scripted_llm.require_tools = style == "tools"
    answer = "SUPPORTS" if kind == "fever" else "1,800 to 7,000 ft"
    scripted_llm.set_responder(WikiAgent(style, finish_at=3, answer=answer))
    db = str(tmp_path / "w.db")
    run = cj(
        capsys,
        "run",
        "--env",
        kind,
        "--question",
        "What is the elevation range?",
        "--answer",
        "REFUTES" if kind == "fever" else "x",  # (the agent's answer is wrong: a suggestion applies)
        "--wiki",
        f"zim:{zim}",
        "--api-style",
        style,
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "5",
        "--db",
        db,
    )
    assert run["done"] and run["steps"] == 3
    first = scripted_llm.completion_requests[0].body
    assert ("tools" in first) == (style == "tools") and first["messages"][0]["role"] == "system"
    assert first.get("stop") == (["\nObservation 1:"] if style == "messages" else None)  # the paper's stop, text only
    assert sum(m["role"] == "assistant" for m in first["messages"]) > 2  # the exemplars, as prior turns
    shown = steps(capsys, db, "1:1")
    assert [s["action"] for s in shown] == ["Search[Colorado orogeny]", "Lookup[eastern sector]", f"Finish[{answer}]"]
    assert shown[0]["thought"] == "Step 1: I act."
    if style == "tools":
        assert shown[0]["reasoning"] == "reasoning 1"
        assert shown[0]["tool_call"]["name"] == "search" and shown[0]["tool_call"]["arguments"] == {
            "entity": "Colorado orogeny"
        }
    # the pinned request of a branch at step 2 is what step 3 was sent
    branch = cj(capsys, "branch", "1:1", "--step", "2", "--db", db)
    text = prompt_of(capsys, db, f"1:{branch['number']}")
    assert json.loads(text) == pinned(scripted_llm.completion_requests[2].body)
    assert other_process_prompt(db, f"1:{branch['number']}") == text  # a restart: another process
    check_pinned_is_sent(capsys, scripted_llm, db, f"1:{branch['number']}")

    # rewrite the thought of step 2: the model writes its action (the paper's action request)
    ref = new_version(capsys, db, "--step", "2", "--thought", HINT)
    body, resumed = check_pinned_is_sent(capsys, scripted_llm, db, ref)
    assert body["messages"][-2]["role"] == "assistant" and HINT in body["messages"][-2]["content"]
    assert steps(capsys, db, resumed)[1]["thought"] == HINT
    # delete the thought of step 2: the step stays, without it
    ref = new_version(capsys, db, "--step", "2", "--delete-thought")
    assert steps(capsys, db, ref)[1]["thought"] is None
    check_pinned_is_sent(capsys, scripted_llm, db, ref)
    # insert a thought at step 3
    ref = new_version(capsys, db, "--step", "3", "--insert-thought", HINT)
    _, resumed = check_pinned_is_sent(capsys, scripted_llm, db, ref)
    assert steps(capsys, db, resumed)[2]["thought"] == HINT
    # rewrite the action of step 2: run again from the restored environment
    action = (
        '{"name": "search", "arguments": {"entity": "Colorado orogeny"}}'
        if style == "tools"
        else "Search[Colorado orogeny]"
    )
    ref = new_version(capsys, db, "--step", "2", "--action", action)
    edited = steps(capsys, db, ref)[1]
    assert edited["action"] == "Search[Colorado orogeny]" and edited["observation"] == shown[0]["observation"]
    check_pinned_is_sent(capsys, scripted_llm, db, ref)
    # a call that does not match the schema: one line, nothing written
    versions = len(cj(capsys, "versions", "1", "--db", db))
    err = cli(
        capsys,
        "edit",
        "1:1",
        "--step",
        "2",
        "--action",
        '{"name": "search", "arguments": {"q": "x"}}',
        "--db",
        db,
        code=2,
    ).err
    assert err.count("\n") == 1 and "schema" in err and len(cj(capsys, "versions", "1", "--db", db)) == versions
    if style == "tools":  # a step's reasoning, rewritten apart from its thought
        ref = new_version(capsys, db, "--step", "1", "--reasoning", "Colorado first.\nThen the sector.")
        got = steps(capsys, db, ref)[0]
        assert got["reasoning"] == "Colorado first.\nThen the sector." and got["thought"] == "Step 1: I act."
        check_pinned_is_sent(capsys, scripted_llm, db, ref)
    # a what-if and a suggestion, in the episode's style
    out = cj(
        capsys,
        "whatif",
        "1",
        "--version",
        str(run["version"]),
        "--step",
        "2",
        "--thought",
        HINT,
        "--n",
        "1",
        "--db",
        db,
    )
    assert out["control"]["n"] == out["treatment"]["n"] == 1  # one rollout per arm, each run to its end
    assert len(out["control"]["versions"]) == len(out["treatment"]["versions"]) == 1
    scripted_llm.require_tools = False  # (the critic answers JSON: its request declares no tools)
    sug = cj(capsys, "suggest", "1:1", "--verify", "1", "--critic-api-style", style, "--db", db)
    assert sug["candidates"][0]["kind"] == "rewrite_thought"


@pytest.mark.parametrize("style", ["messages", "tools"])
def test_alfworld_run_edit_resume_whatif_suggest(style, scripted_llm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    scripted_llm.require_tools = style == "tools"
    scripted_llm.set_responder(GameAgent(style))
    task = first_task("pick_and_place_simple")
    db = str(tmp_path / "a.db")
    run = cj(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        task.id,
        "--api-style",
        style,
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "4",
        "--db",
        db,
    )
    assert run["steps"] == 4
    shown = steps(capsys, db, "1:1")
    assert [s["action"] for s in shown] == [None, "look", None, "look"]
    assert shown[0]["thought"] == "I will look around." and shown[0]["observation"] == "OK."
    if style == "tools":
        assert shown[0]["reasoning"] == "maybe look" and shown[1]["tool_call"]["arguments"] == {"command": "look"}
    branch = cj(capsys, "branch", "1:1", "--step", "2", "--db", db)
    text = prompt_of(capsys, db, f"1:{branch['number']}")
    assert json.loads(text) == pinned(scripted_llm.completion_requests[2].body)
    assert other_process_prompt(db, f"1:{branch['number']}") == text  # a restart: another process
    check_pinned_is_sent(capsys, scripted_llm, db, f"1:{branch['number']}")

    ref = new_version(capsys, db, "--step", "1", "--thought", "I should find the object first.")
    assert steps(capsys, db, ref)[0]["thought"] == "I should find the object first."
    check_pinned_is_sent(capsys, scripted_llm, db, ref)
    ref = new_version(capsys, db, "--step", "3", "--delete-thought")
    assert len(steps(capsys, db, ref)) == 2
    check_pinned_is_sent(capsys, scripted_llm, db, ref)
    ref = new_version(capsys, db, "--step", "2", "--insert-thought", "Look first.")
    assert steps(capsys, db, ref)[1]["thought"] == "Look first."
    check_pinned_is_sent(capsys, scripted_llm, db, ref)
    action = '{"name": "act", "arguments": {"command": "inventory"}}' if style == "tools" else "inventory"
    ref = new_version(capsys, db, "--step", "2", "--action", action)
    edited = steps(capsys, db, ref)[1]
    assert edited["action"] == "inventory" and edited["observation"] == "You are not carrying anything."
    if style == "tools":
        assert edited["tool_call"]["name"] == "act" and edited["tool_call"]["arguments"] == {"command": "inventory"}
    check_pinned_is_sent(capsys, scripted_llm, db, ref)
    out = cj(
        capsys,
        "whatif",
        "1",
        "--version",
        str(run["version"]),
        "--step",
        "3",
        "--thought",
        "Go to the desk.",
        "--n",
        "1",
        "--db",
        db,
    )
    assert out["control"]["n"] == out["treatment"]["n"] == 1  # one rollout per arm, each run to its end
    assert len(out["control"]["versions"]) == len(out["treatment"]["versions"]) == 1
    scripted_llm.require_tools = False  # (the critic answers JSON: its request declares no tools)
    sug = cj(capsys, "suggest", "1:1", "--verify", "1", "--critic-api-style", style, "--db", db)
    assert sug["candidates"][0]["kind"] == "rewrite_thought"
