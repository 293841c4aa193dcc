"""`--max-tokens`: what one answer may spend, set from the command line (a reasoning model's
reasoning counts against it: the default 100 fits a paper step, not a reasoning channel)."""

from __future__ import annotations

import json

import pytest

from envs.wikipedia.zim import build_zim
from react_editor.main import main
from tests.alfworld_helpers import first_task
from tests.cli.conversation_agents import GameAgent, WikiAgent
from tests.mediawiki_server import SAMPLE_ARTICLES


@pytest.fixture(scope="module")
def zim(tmp_path_factory):
    return build_zim(SAMPLE_ARTICLES, tmp_path_factory.mktemp("z") / "react_editor.zim")


@pytest.mark.parametrize("kind", ["alfworld", "hotpotqa"])
def test_the_flag_reaches_every_request_and_the_pinned_config(kind, zim, scripted_llm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-not-real")
    if kind == "alfworld":
        scripted_llm.set_responder(GameAgent("tools"))
        where = ["--task", first_task("pick_and_place_simple").id]
    else:
        scripted_llm.set_responder(WikiAgent("tools"))
        where = ["--question", "What is the elevation range?", "--answer", "x", "--wiki", f"zim:{zim}"]
    db = str(tmp_path / "t.db")
    argv = [
        "run",
        "--env",
        kind,
        *where,
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
