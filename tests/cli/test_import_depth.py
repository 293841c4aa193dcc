"""Issue 11 item 13: a JSON/JSONL file nested 10,000 deep is a one-line import error, not a
RecursionError traceback; nothing is written."""

from __future__ import annotations

import json
import sqlite3

import pytest

from react_editor.main import main

DEEP = 10_000


@pytest.mark.parametrize(
    "name, body",
    [
        ("deep.jsonl", '{"schema": "react-editor/trajectory", "episode": ' + "[" * DEEP + "]" * DEEP + "}\n"),
        ("deep.json", '{"react_put_0": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}"),
        ("lists.jsonl", "[" * DEEP + "]" * DEEP + "\n"),
        ("auto.txt", '{"schema": 1, "x": ' + "[" * DEEP + "]" * DEEP + "}\n{}\n"),
    ],
    ids=["jsonl-record", "prompt-file", "jsonl-lists", "detect-format"],
)
def test_deeply_nested_json_is_a_one_line_error(toy, capsys, tmp_path, name, body):
    f = tmp_path / name
    f.write_text(body)
    code = main(["import", str(f), "--db", str(toy.db), "--env", "alfworld"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err[-500:]
    assert "nested" in err
    with sqlite3.connect(toy.db) as conn:
        assert conn.execute("select count(*) from episodes").fetchone() == (0,)


@pytest.mark.parametrize("depth", [100, 500, 800])
def test_a_valid_record_with_deeply_nested_options_is_a_one_line_error(toy, capsys, tmp_path, depth):
    """Deep enough for pydantic or json.dumps to give up, shallow enough for json.loads."""
    db = str(toy.db)
    assert main(["run", "--env", "alfworld", "--task", "toy/room-1", "--db", db, "--human"]) == 0
    assert main(["export", "1", "--format", "jsonl", "--out", str(tmp_path / "a.jsonl"), "--db", db]) == 0
    rec = json.loads((tmp_path / "a.jsonl").read_text())
    rec["episode"]["env_options"] = {"x": json.loads("[" * depth + "]" * depth)}
    (tmp_path / "d.jsonl").write_text(json.dumps(rec) + "\n")
    capsys.readouterr()
    code = main(["import", str(tmp_path / "d.jsonl"), "--db", db])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: line 1: ") and "nested" in err and err.count("\n") == 1, err[-300:]
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from episodes").fetchone() == (1,)
