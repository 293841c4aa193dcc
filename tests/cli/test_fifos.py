"""Issue 26 item 14: a FIFO (or another non-regular file) named where the CLI opens a file
is refused with one line; opening it would block the command forever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return str(p)


def react_editor(tmp_path, *argv: str) -> tuple[int, str]:
    """The real command in a child process, with a deadline (a hang is a failure, not a stuck test)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(tmp_path / "default.db")}
    p = subprocess.run([sys.executable, "-m", "react_editor", *argv], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=60)
    return p.returncode, p.stderr


@pytest.mark.parametrize("argv", [
    ("show", "1", "--db", "{fifo}"), ("episodes", "--db", "{fifo}"), ("versions", "1", "--db", "{fifo}"),
    ("run", "--env", "alfworld", "--game", "{fifo}", "--human"), ("alfworld", "check", "{fifo}"),
    ("import", "{fifo}"), ("import", "{dir}"), ("export", "1", "-f", "jsonl", "--out", "{fifo}"),
    ("wiki", "build-zim", "--out", "{fifo}"), ("alfworld", "generate", "--out", "{fifo}", "--per-type", "1"),
    ("data", "alfworld", "--dest", "{fifo}"), ("experiment", "run", "--env", "hotpotqa", "--tasks", "@{fifo}"),
])
def test_a_fifo_is_refused_with_one_line(tmp_path, fifo, argv):
    from sessions.store import Store

    Store(tmp_path / "default.db").close()  # the default database exists (export reads it first)
    argv = [a.format(fifo=fifo, dir=tmp_path) for a in argv]
    code, err = react_editor(tmp_path, *argv)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "regular file" in err or "folder" in err, err
