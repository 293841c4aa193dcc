"""Issue 11, items 8 and 17: run settings are checked before anything is written, and a
base URL never carries credentials into the database, an export or the screen."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.cli_helpers import cli
from trajectory.records import AgentConfig

SECRET = "hunter2-pass"


def episodes(db: str) -> list:
    with sqlite3.connect(db) as conn:
        return conn.execute("select id from episodes").fetchall()


def db_text(db: str) -> str:
    with sqlite3.connect(db) as conn:
        return "\n".join(conn.iterdump())


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--max-steps", "-5"], "max steps"),
        (["--max-steps", "0"], "max steps"),
        (["--exemplars", "no-such-set"], "no-such-set"),
        (["--temperature", "nan"], "temperature"),
        (["--temperature", "inf"], "temperature"),
        (["--base-url", "not a url"], "endpoint"),
        (["--base-url", "ftp://127.0.0.1/v1"], "endpoint"),
        (["--base-url", f"http://user:{SECRET}@127.0.0.1:9/v1"], "credentials"),
        (["--timeout", "0"], "timeout"),
        (["--max-retries", "-1"], "max retries"),
    ],
)
def test_bad_run_settings_are_one_line_errors_and_write_nothing(toy, capsys, flags, message):
    db = str(toy.db)
    code, out, err = cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--db", db, *flags)
    assert code == 2
    assert err.count("\n") == 1 and "error: " in err and message in err, err  # ours, or the flag's own check
    assert "Traceback" not in err and SECRET not in err
    assert episodes(db) == []
    assert toy.llm.requests == []


def test_bad_settings_on_resume_change_nothing(toy, capsys):
    db = str(toy.db)
    code, _, err = cli(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--db",
        db,
        "--human",
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
    )
    assert code == 0, err
    before = toy.store.episodes.get(1).config
    for flags in (
        ["--max-steps", "0"],
        ["--temperature", "nan"],
        ["--exemplars", "nope"],
        ["--base-url", f"https://u:{SECRET}@example.org/v1"],
    ):
        code, _, err = cli(capsys, "resume", "1", "--db", db, *flags)
        assert code == 2 and err.count("\n") == 1 and "error: " in err, err
    assert toy.store.episodes.get(1).config == before
    assert toy.llm.requests == []
    assert SECRET not in db_text(db)


def test_credentials_are_stripped_from_stored_configs():
    cfg = AgentConfig(base_url=f"http://alice:{SECRET}@127.0.0.1:8000/v1?x=1")
    assert cfg.base_url == "http://127.0.0.1:8000/v1"  # and no query: an endpoint takes none (issue 26 item 17)
    assert SECRET not in cfg.model_dump_json()


def test_imported_config_credentials_never_reach_db_or_export(toy, capsys, tmp_path):
    """A jsonl file whose agent config carries user:password@ in its base URL."""
    db = str(toy.db)
    assert (
        cli(
            capsys,
            "run",
            "--env",
            "alfworld",
            "--task",
            "toy/room-1",
            "--db",
            db,
            "--human",
            "--base-url",
            toy.llm.base_url,
        )[0]
        == 0
    )
    assert cli(capsys, "step", "1", "--action", "go to cabinet 1", "--db", db)[0] == 0
    exported = tmp_path / "a.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(exported), "--db", db)[0] == 0
    rec = json.loads(exported.read_text())
    rec["episode"]["config"]["base_url"] = f"http://bob:{SECRET}@127.0.0.1:8000/v1"
    evil = tmp_path / "evil.jsonl"
    evil.write_text(json.dumps(rec) + "\n")
    code, out, err = cli(capsys, "import", str(evil), "--db", db)
    assert code == 0, err
    assert SECRET not in out + err
    assert SECRET not in db_text(db)
    again = tmp_path / "again.jsonl"
    assert cli(capsys, "export", "2", "--format", "jsonl", "--out", str(again), "--db", db)[0] == 0
    assert SECRET not in again.read_text()
    assert json.loads(again.read_text())["episode"]["config"]["base_url"] == "http://127.0.0.1:8000/v1"
    code, out, err = cli(capsys, "show", "2", "--db", db, "--json")
    assert SECRET not in out + err
