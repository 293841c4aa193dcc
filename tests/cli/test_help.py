"""Issue 28 item 25: what the command line says in text mode is text, and help text above
`envs/` is generic: a flag several families share carries each family's own words."""

from __future__ import annotations

import json

import envs.registry as registry
from envs.base import CustomField
from react_editor.main import build_parser, main
from tests.toy_envs import families


def test_run_human_prints_a_line_not_json(toy, capsys):
    assert main(["run", "--env", "alfworld", "--task", "toy/room-1", "--human", "--db", str(toy.db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("episode 1 v1: 0 steps, open") and "step 1:1" in out and not out.startswith("{")
    assert main(["run", "--env", "alfworld", "--task", "toy/room-1", "--human", "--db", str(toy.db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["episode"] == 2 and data["number"] == 1 and data["steps"] == 0


def test_a_shared_flag_has_each_familys_own_help(monkeypatch, capsys):
    """`--game` read "Path to an ALFWorld game (alfworld, textworld)" for --env textworld."""
    from dataclasses import replace

    fams = families()
    fams.pop("made")
    room = fams["alfworld"]
    fams["alfworld"] = replace(room, custom_fields=(CustomField("game", "Path to a room game"),))
    fams["textworld"] = replace(
        room, kind="textworld", cli=None, custom_fields=(CustomField("game", "Path to a TextWorld game (.z8 or .ulx)"),)
    )
    monkeypatch.setattr(registry, "_FAMILIES", fams)
    monkeypatch.setattr(registry, "BUILTIN", {})
    monkeypatch.setattr(registry, "_plugins", lambda: ())
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    text = " ".join(run.format_help().split())
    assert "alfworld: Path to a room game" in text and "textworld: Path to a TextWorld game (.z8 or .ulx)" in text
    assert "Path to a room game (alfworld, textworld)" not in text
