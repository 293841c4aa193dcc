"""Issue 11 item 19: reading commands open the database read-only, so a database in a
read-only folder can be read; read-only, truncated and corrupted databases are each named
for what they are, in one line, never as "not a ReAct Editor database" or a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from react_editor.main import main
from sessions.store import Store
from trajectory.records import AgentConfig, Step, Task

ROOT = Path(__file__).resolve().parents[2]
UNSHARE = shutil.which("unshare")


def make_db(path: Path, episodes: int = 1) -> None:
    store = Store(path)
    for i in range(episodes):
        task = Task(env="alfworld", id=f"t{i}", text=f"Task {i}: " + "room " * 600)
        ep, v = store.episodes.create(task, AgentConfig())
        store.versions.append(v.id, [Step(index=1, action="go to desk 1", observation="You see a lamp.")], [])
    store.close()


def run(*argv: str, as_user: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "react_editor", *argv]
    if as_user:  # an ordinary user: file modes apply (root would ignore them)
        cmd = [UNSHARE, "--user", "--map-user=1000", "--map-group=1000", *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def in_process(capsys, *argv: str) -> subprocess.CompletedProcess:
    code = main(list(argv))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out.out, out.err)


def one_line_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr and "not a ReAct Editor database" not in res.stderr
    return res.stderr


@pytest.fixture
def userns():
    if UNSHARE is None or subprocess.run([UNSHARE, "--user", "--map-user=1000", "true"]).returncode != 0:
        pytest.skip("needs `unshare --user` to act as an ordinary user")


def test_a_database_in_a_read_only_folder_can_be_read(tmp_path, userns):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "r.db"
    make_db(db)
    assert sorted(p.name for p in folder.iterdir()) == ["r.db"]
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        res = run("show", "1", "--db", str(db), as_user=True)
        assert res.returncode == 0, res.stderr
        assert "> go to desk 1\nYou see a lamp." in res.stdout
        for argv in (["versions", "1"], ["episodes"], ["export", "1", "--format", "jsonl", "--out", "-"]):
            res = run(*argv, "--db", str(db), as_user=True)
            assert res.returncode == 0 and res.stdout, (argv, res.stderr)
        err = one_line_error(run("current", "1", "--version", "1", "--name", "x", "--db", str(db), as_user=True))
        assert "read-only" in err
    finally:
        folder.chmod(0o755)
    assert sorted(p.name for p in folder.iterdir()) == ["r.db"]


def test_a_read_only_database_file_is_named_so_when_written(tmp_path, userns):
    db = tmp_path / "r.db"
    make_db(db)
    db.chmod(0o444)
    assert run("show", "1", "--db", str(db), as_user=True).returncode == 0
    err = one_line_error(run("current", "1", "--version", "1", "--name", "x", "--db", str(db), as_user=True))
    assert "read-only" in err


def test_a_truncated_database_is_named_truncated(tmp_path, capsys):
    db = tmp_path / "t.db"
    make_db(db, episodes=40)
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.truncate(size // 3)
    for argv in (["show", "1"], ["episodes"], ["current", "1", "--version", "1"]):
        err = one_line_error(in_process(capsys, *argv, "--db", str(db)))
        assert "truncated" in err, err


def test_a_corrupted_database_is_named_damaged(tmp_path, capsys):
    db = tmp_path / "c.db"
    make_db(db, episodes=40)
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for at in range(2 * page, len(data), page):  # every page but the first: garbage
        data[at : at + 64] = b"\xff" * 64
    db.write_bytes(bytes(data))
    for argv in (["show", "1"], ["episodes"], ["versions", "1"]):
        err = one_line_error(in_process(capsys, *argv, "--db", str(db)))
        assert "damaged" in err or "corrupt" in err, err
