"""Issue 29: the TextWorld plugin (plugins/react-editor-textworld) gets suggestions with no
change above envs/: its family's transcript layout provides the critic prompt. The plugin
is installed into a temporary prefix (its package and entry point) and driven through the
real command line in subprocesses against the scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_helpers import install_plugin
from tests.scripted_server import prompt_text

pytest.importorskip("textworld")

ROOT = Path(__file__).resolve().parents[2]
CRITIC_MARK = "You review the trajectory"


def cli(site: Path, db: Path, *argv, json_out: bool = True):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "REACT_EDITOR_DB": str(db),
           "OPENAI_API_KEY": "sk-test-key-not-real"}
    out = subprocess.run([sys.executable, "-m", "react_editor.main", *map(str, argv), *(["--json"] if json_out else [])],
                         env=env, capture_output=True, text=True, timeout=600, cwd=db.parent)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]) if json_out else out.stdout


def wanderer(body) -> str:
    """A textworld agent that never gets anywhere; the critic proposes one hint."""
    text = prompt_text(body)
    if CRITIC_MARK in text:
        return json.dumps({"candidates": [{"step": 1, "kind": "rewrite_thought", "rationale": "plan",
                                           "text": "I should read the cookbook."}]})
    if "> think:" not in text.rpartition("Here is the task.")[2]:
        return " think: I will look around."
    return " look"


def test_textworld_plugin_gets_suggestions(scripted_llm, tmp_path):
    site = install_plugin(tmp_path / "site")
    db = tmp_path / "tw.db"
    scripted_llm.set_responder(wanderer)
    run = cli(site, db, "run", "--env", "textworld", "--task", "cooking-1", "--model", "m",
              "--base-url", scripted_llm.base_url, "--max-steps", "3")
    assert run["done"] and run["success"] is False
    prompt = cli(site, db, "suggest", str(run["episode"]), "--show-prompt", json_out=False)
    assert prompt.startswith("You review the trajectory of an agent that acts in a text environment")
    assert "Step 1: think: I will look around." in prompt
    out = cli(site, db, "suggest", str(run["episode"]), "--verify", "2")
    (c,) = out["candidates"]
    assert (c["rank"], c["kind"], c["step"]) == (1, "rewrite_thought", 1)
    assert c["control"]["n"] == 2 and c["treatment"]["n"] == 2 and c["proven"] is False
    assert c["verdict"].startswith("not shown")
