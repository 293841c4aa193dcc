"""Issue 42: the TextWorld plugin in the messages and tools API styles, with no change above
envs/ (its transcript declares its own `act` tool): a run, the four edit kinds each resumed from
the restored environment, a what-if and a suggestion, `show --prompt` pinned - through the real
command line and client against the scripted server (the plugin loaded through its entry point)."""

from __future__ import annotations

import json

import pytest

from react_editor.main import main
from tests.cli.conversation_agents import GameAgent
from tests.plugin_helpers import install_plugin, plugin_loaded

pytest.importorskip("textworld")

PINNED = ("messages", "tools", "tool_choice", "parallel_tool_calls")


def cj(capsys, *argv):
    code = main([*map(str, argv), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out.strip().splitlines()[-1])


def prompt(capsys, ref) -> str:
    assert main(["show", ref, "--prompt"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("style", ["messages", "tools"])
def test_textworld_plugin_in_the_conversation_styles(style, scripted_llm, tmp_path, monkeypatch, capsys):
    site = install_plugin(tmp_path / "site")
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "tw.db"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    monkeypatch.chdir(tmp_path)
    scripted_llm.require_tools = style == "tools"
    scripted_llm.set_responder(GameAgent(style))
    with plugin_loaded(site):
        run = cj(
            capsys,
            "run",
            "--env",
            "textworld",
            "--task",
            "cooking-1",
            "--model",
            "m",
            "--api-style",
            style,
            "--base-url",
            scripted_llm.base_url,
            "--max-steps",
            "4",
        )
        first = scripted_llm.completion_requests[0].body
        if style == "tools":
            assert [t["function"]["name"] for t in first["tools"]] == ["act"]
        shown = cj(capsys, "show", "1:1")
        assert [s["action"] for s in shown] == [None, "look", None, "look"] and run["steps"] == 4
        edits = [
            ("--step", "1", "--thought", "I should read the cookbook."),
            ("--step", "3", "--delete-thought"),
            ("--step", "2", "--insert-thought", "Look first."),
            (
                "--step",
                "2",
                "--action",
                '{"name": "act", "arguments": {"command": "inventory"}}' if style == "tools" else "inventory",
            ),
        ]
        for edit in edits:
            ref = f"1:{cj(capsys, 'edit', '1:1', *edit)['number']}"
            text = prompt(capsys, ref)
            assert prompt(capsys, ref) == text  # a new engine each time: as after a restart
            before = len(scripted_llm.completion_requests)
            res = cj(capsys, "resume", ref, "--no-cache")
            sent = scripted_llm.completion_requests[before].body
            assert {k: sent[k] for k in PINNED if k in sent} == json.loads(text)
            assert res["steps"] == 4
        edited = cj(capsys, "show", ref)[1]
        assert edited["action"] == "inventory" and edited["observation"] != shown[1]["observation"]
        out = cj(
            capsys, "whatif", "1", "--version", str(run["version"]), "--step", "3", "--thought", "Go east.", "--n", "1"
        )
        assert out["control"]["n"] == out["treatment"]["n"] == 1  # one rollout per arm, each run to its end
        scripted_llm.require_tools = False
        sug = cj(capsys, "suggest", "1:1", "--verify", "1", "--critic-api-style", style)
        assert sug["candidates"][0]["kind"] == "rewrite_thought"
