"""`--max-tokens`: what one answer may spend, set from the command line (a reasoning model's
reasoning counts against it: the default 100 fits a paper step, not a reasoning channel)."""

from __future__ import annotations

import json

import pytest

from react_editor.main import main
from tests.alfworld_helpers import first_task
from tests.cli.conversation_agents import GameAgent


def test_the_flag_reaches_every_request_and_the_pinned_config(scripted_llm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    scripted_llm.set_responder(GameAgent("tools"))
    db = str(tmp_path / "t.db")
    task = first_task("pick_and_place_simple")
    argv = [
        "run",
        "--env",
        "alfworld",
        "--task",
        task.id,
        "--api-style",
        "tools",
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "2",
        "--max-tokens",
        "4096",
        "--db",
        db,
        "--json",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    assert [r.body["max_tokens"] for r in scripted_llm.completion_requests] == [4096, 4096]
    capsys.readouterr()
    assert main(["show", "1", "--prompt", "--json", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["max_tokens"] == 4096


@pytest.mark.parametrize("value", ["0", "-5", "200000", "lots"])
def test_a_count_out_of_range_is_one_line_and_exit_2(value, tmp_path, capsys):
    assert main(["run", "--env", "alfworld", "--max-tokens", value, "--db", str(tmp_path / "t.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "max" in err and not (tmp_path / "t.db").exists()
