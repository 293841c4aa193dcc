"""Issue 29: the TextWorld plugin (plugins/react-editor-textworld) gets suggestions with no
change above envs/: its family's transcript layout provides the critic prompt. The plugin
is installed into a temporary prefix (its package and entry point), loaded through that entry
point in this process (as a `react-editor` started with it on PYTHONPATH would; that such a
process finds it is tests/envs/test_textworld_plugin.py's), and driven through the real command
line against the scripted model server."""

from __future__ import annotations

import json

import pytest

from react_editor.main import main
from tests.plugin_helpers import install_plugin, plugin_loaded
from tests.scripted_server import prompt_text

pytest.importorskip("textworld")

CRITIC_MARK = "You review the trajectory"


def cli(capsys, *argv, json_out: bool = True):
    """`react-editor ARGV [--json]` in this process (the plugin loaded, REACT_EDITOR_DB set)."""
    code = main([*map(str, argv), *(["--json"] if json_out else [])])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out.strip().splitlines()[-1]) if json_out else out.out


def wanderer(body) -> str:
    """A textworld agent that never gets anywhere; the critic proposes one hint."""
    text = prompt_text(body)
    if CRITIC_MARK in text:
        return json.dumps(
            {
                "candidates": [
                    {"step": 1, "kind": "rewrite_thought", "rationale": "plan", "text": "I should read the cookbook."}
                ]
            }
        )
    if "> think:" not in text.rpartition("Here is the task.")[2]:
        return " think: I will look around."
    return " look"


def test_textworld_plugin_gets_suggestions(scripted_llm, tmp_path, monkeypatch, capsys):
    site = install_plugin(tmp_path / "site")
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "tw.db"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    monkeypatch.chdir(tmp_path)
    scripted_llm.set_responder(wanderer)
    with plugin_loaded(site):
        _run_then_suggest(scripted_llm, capsys)


def _run_then_suggest(scripted_llm, capsys) -> None:
    run = cli(
        capsys,
        "run",
        "--env",
        "textworld",
        "--task",
        "cooking-1",
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "3",
    )
    assert run["done"] and run["success"] is False
    prompt = cli(capsys, "suggest", str(run["episode"]), "--show-prompt", json_out=False)
    assert prompt.startswith("You review the trajectory of an agent that acts in a text environment")
    assert "Step 1: think: I will look around." in prompt
    out = cli(capsys, "suggest", str(run["episode"]), "--verify", "2")
    (c,) = out["candidates"]
    assert (c["rank"], c["kind"], c["step"]) == (1, "rewrite_thought", 1)
    assert c["control"]["n"] == 2 and c["treatment"]["n"] == 2 and c["proven"] is False
    assert c["verdict"].startswith("not shown")
