"""Issue 26 item 14: a FIFO (or another non-regular file) named where the CLI opens a file
is refused with one line; opening it would block the command forever."""

from __future__ import annotations

import os

import pytest

from tests.cli_helpers import cli


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return str(p)


def react_editor(tmp_path, monkeypatch, capsys, *argv: str) -> tuple[int, str]:
    """The command in this process, run from `tmp_path` with its default database there (a hang
    is still a failure: the per-test timeout interrupts a blocked open)."""
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "default.db"))
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, *argv)
    return code, err


@pytest.mark.parametrize(
    "argv",
    [
        ("show", "1", "--db", "{fifo}"),
        ("episodes", "--db", "{fifo}"),
        ("versions", "1", "--db", "{fifo}"),
        ("run", "--env", "alfworld", "--game", "{fifo}", "--human"),
        ("alfworld", "check", "{fifo}"),
        ("import", "{fifo}"),
        ("import", "{dir}"),
        ("export", "1", "-f", "jsonl", "--out", "{fifo}"),
        ("wiki", "build-zim", "--out", "{fifo}"),
        ("alfworld", "generate", "--out", "{fifo}", "--per-type", "1"),
        ("data", "alfworld", "--dest", "{fifo}"),
        ("experiment", "run", "--env", "hotpotqa", "--tasks", "@{fifo}"),
    ],
)
def test_a_fifo_is_refused_with_one_line(tmp_path, monkeypatch, capsys, fifo, argv):
    from sessions.store import Store

    Store(tmp_path / "default.db").close()  # the default database exists (export reads it first)
    argv = [a.format(fifo=fifo, dir=tmp_path) for a in argv]
    code, err = react_editor(tmp_path, monkeypatch, capsys, *argv)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "regular file" in err or "folder" in err, err


@pytest.mark.timeout(20)  # before the fix the critic prompt's open blocked until this
@pytest.mark.parametrize("extra", [(), ("--show-prompt",)])
def test_suggest_refuses_a_fifo_as_its_critic_prompt(toy, capsys, fifo, extra):
    """Issue 39 item 13: `suggest --critic-prompt FIFO` of a real failed version is one line,
    exit 2, and no critic or agent call is made."""
    from tests.suggest_agents import fail_episode

    failed = fail_episode(toy)
    before = (failed.critic_calls, failed.agent_calls)
    code, out, err = cli(capsys, "suggest", "1", "--critic-prompt", fifo, *extra, "--db", str(toy.db))
    assert code == 2 and err.startswith("error: critic prompt ") and err.count("\n") == 1, err
    assert "not a regular file" in err and out == ""
    assert (failed.critic_calls, failed.agent_calls) == before
