"""`react-editor` core commands, in process over the toy environments, plus a real
subprocess killed with SIGKILL mid-run (crash safety)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import CHILD, ROOT, cli, cli_json
from tests.engine_scripts import ROOM_SCRIPT
from tests.scripted_server import Reply


@pytest.fixture
def db(toy):
    return str(toy.db)


def test_run_show_versions_edit_resume(toy, db, capsys):
    toy.llm.push(*ROOM_SCRIPT[:3])
    res = cli_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
        "--max-steps",
        "3",
        "--db",
        db,
    )
    assert res == {"episode": 1, "version": 1, "number": 1, "done": True, "success": False, "steps": 3}
    shown = cli_json(capsys, "show", "1", "--db", db)
    assert [s["index"] for s in shown] == [1, 2, 3]
    assert shown[0]["thought"] == "To solve the task, I need to find a mug, then put it in table 1."
    assert shown[0]["action"] is None and shown[1]["action"] == "go to cabinet 1" and shown[1]["source"] == "model"
    code, text, _ = cli(capsys, "show", "1", "--db", db)
    assert (
        text.startswith("You are in the middle of a room.")
        and "\n> go to cabinet 1\nThe cabinet 1 is closed.\n" in text
    )
    new = cli_json(capsys, "edit", "1", "--step", "1", "--thought", "Cabinet 1 first.", "--db", db)
    assert new == {"version": 2, "number": 2}
    vs = cli_json(capsys, "versions", "1", "--db", db)
    assert [(v["version"], v["parent_version"], v["steps"], v["human_edits"]) for v in vs] == [
        (1, None, 3, 0),
        (2, 1, 1, 1),
    ]
    toy.llm.push(*ROOM_SCRIPT[1:])
    res = cli_json(capsys, "resume", "1", "--db", db, "--max-steps", "10")  # new settings: a child of v2
    assert res["version"] == 3 and res["done"] and res["success"] is True and res["steps"] == 6
    assert cli_json(capsys, "show", "1", "--version", "2", "--db", db)[0]["thought"] == "Cabinet 1 first."
    shown = cli_json(capsys, "show", "1", "--version", "3", "--db", db)
    assert shown[0]["source"] == "human" and shown[0]["thought"] == "Cabinet 1 first."
    code, prompt, _ = cli(capsys, "show", "1", "--version", "1", "--prompt", "--db", db)
    assert prompt.startswith("Interact with a household to solve a task.")


def test_keep_rest_delete_insert_and_human_step(toy, db, capsys):
    toy.llm.push(*ROOM_SCRIPT)
    cli_json(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--base-url", toy.llm.base_url, "--db", db)
    v = cli_json(capsys, "edit", "1", "--step", "1", "--delete-thought", "--keep-rest", "--db", db)["version"]
    assert len(cli_json(capsys, "show", "1", "--version", str(v), "--db", db)) == 5
    v = cli_json(
        capsys, "edit", "1", "--version", "1", "--step", "3", "--insert-thought", "Open it.", "--keep-rest", "--db", db
    )["version"]
    shown = cli_json(capsys, "show", "1", "--version", str(v), "--db", db)
    assert shown[2]["thought"] == "Open it." and len(shown) == 7
    out = cli_json(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--human", "--db", db)
    step = cli_json(capsys, "step", str(out["episode"]), "--action", "go to cabinet 1", "--db", db)
    assert step["steps"][0]["observation"] == "The cabinet 1 is closed." and step["steps"][0]["source"] == "human"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["show", "99"], "unknown episode 99"),
        (["show", "1", "--version", "42"], "unknown version 42"),
        (["edit", "1", "--step", "40", "--thought", "x"], "no step 40"),
        (["edit", "1", "--step", "1", "--observation", "x"], "observations come from the environment"),
        (["edit", "1", "--step", "1", "--thought", "   "], "empty"),
        (["edit", "1", "--step", "2", "--thought", "x"], "no thought"),
        (["edit", "1", "--step", "1", "--thought", "x" * 1_000_000], "too long"),
    ],
)
def test_bad_input_one_line_error_nothing_changes(toy, db, capsys, argv, message):
    toy.llm.push(*ROOM_SCRIPT[:2])
    cli_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--base-url",
        toy.llm.base_url,
        "--max-steps",
        "2",
        "--db",
        db,
    )
    before = (
        Path(db).read_bytes(),
        toy.store.db.execute("select count(*) from steps").fetchone(),
        toy.store.db.execute("select count(*) from versions").fetchone(),
    )
    code, out, err = cli(capsys, *argv, "--db", db)
    assert code != 0 and message in err and err.count("\n") == 1
    after = (
        toy.store.db.execute("select count(*) from steps").fetchone(),
        toy.store.db.execute("select count(*) from versions").fetchone(),
    )
    assert before[1:] == after


def test_not_our_database(tmp_path, capsys):
    p = tmp_path / "other.db"
    c = sqlite3.connect(p)
    c.execute("create table t (x)")
    c.commit()
    c.close()
    raw = p.read_bytes()
    code, out, err = cli(capsys, "versions", "1", "--db", str(p))
    assert code == 2 and "not a ReAct Editor database" in err
    assert p.read_bytes() == raw


def test_sigkill_mid_run_keeps_every_completed_step(tmp_path, scripted_llm):
    db = tmp_path / "crash.db"
    # each completion takes 0.3 s: the child is killed while a model call is in flight
    for text in ROOM_SCRIPT[:1] + [" go to shelf 1"] * 30:
        scripted_llm.push(Reply(text=text, delay_s=0.3))
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(script),
            "run",
            "--env",
            "alfworld",
            "--task",
            "toy/room-1",
            "--base-url",
            scripted_llm.base_url,
            "--no-cache",
            "--db",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 30
    while time.time() < deadline and len(scripted_llm.completion_requests) < 6:
        time.sleep(0.05)
    time.sleep(0.15)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    requests_sent = len(scripted_llm.completion_requests)
    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    n_steps = con.execute("select count(*) from steps").fetchone()[0]
    leaf = con.execute("select leaf_step_id from versions where id = 1").fetchone()[0]
    depth = con.execute("select max(idx) from steps").fetchone()[0]
    con.close()
    # every completed step is there (the one in flight may be lost), and the version points at the last
    assert requests_sent - 1 <= n_steps <= requests_sent and n_steps >= 5
    assert depth == n_steps and leaf == n_steps
