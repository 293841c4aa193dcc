"""Issue 11 item 16: text from the model or an imported file never drives the terminal:
control characters in any text output (and progress/error lines) are made visible."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_helpers import cli, cli_json

TITLE = "\x1b]0;pwned\x07"  # sets the terminal title
RED = "\x1b[31mred\x1b[0m"
CSI = "\x9b2J"  # C1 control: clear screen on some terminals


def controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def test_show_and_other_text_output_make_control_characters_visible(toy, capsys):
    db = str(toy.db)
    assert (
        cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--db", db, "--human", "--name", f"ep {TITLE}")[
            0
        ]
        == 0
    )
    code, out, err = cli(capsys, "step", "1", "--action", f"go to {TITLE}{RED}{CSI} cabinet", "--db", db)
    assert code == 0 and not controls(out + err), (out, err)
    for argv in (["show", "1"], ["versions", "1"], ["episodes"]):  # (`show --prompt` is exact into a pipe)
        code, out, err = cli(capsys, *argv, "--db", db)
        assert code == 0 and not controls(out + err), (argv, out, err)
    code, out, _ = cli(capsys, "show", "1", "--db", db)
    assert "\\x1b]0;pwned\\x07" in out and "\\x9b2J" in out
    code, out, _ = cli(capsys, "show", "1", "--db", db, "--json")
    assert not controls(out)
    assert json.loads(out)[0]["action"] == f"go to {TITLE}{RED}{CSI} cabinet"  # the data itself is kept


def test_error_lines_make_control_characters_visible(toy, capsys, tmp_path):
    code, out, err = cli(capsys, "import", str(tmp_path / f"no{TITLE}file.jsonl"), "--db", str(toy.db))
    assert code == 2 and err.startswith("error: ") and not controls(err), err


RLO = "\u202e"  # right-to-left override: "txt.exe" reads as "exe.txt"
OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # writes the clipboard


def test_show_makes_bidi_controls_visible(toy, capsys):
    db = str(toy.db)
    assert cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--db", db, "--human")[0] == 0
    assert cli(capsys, "step", "1", "--action", f"go to {RLO}1 tenibac\u2066x\u2069", "--db", db)[0] == 0
    for argv in (["show", "1"], ["show", "1", "--json"]):
        code, out, err = cli(capsys, *argv, "--db", db)
        assert code == 0 and RLO not in out and "\u2066" not in out, out
        assert "\\u202e" in out
    assert json.loads(cli(capsys, "show", "1", "--db", db, "--json")[1])[0]["action"].startswith(f"go to {RLO}")


def _export_to(db: str, tty: bool) -> bytes:
    """`export --out -` with stdout on a pseudo-terminal (tty) or a pipe; the bytes written."""
    return _stdout_of(["export", "1", "--format", "prompt", "--out", "-", "--db", db], tty)


def _stdout_of(args: list[str], tty: bool) -> bytes:
    """`react-editor ARGS` with stdout on a pseudo-terminal (tty) or a pipe; the bytes written."""
    import os
    import pty
    import subprocess
    import sys

    from tests.cli_helpers import ROOT

    argv = [sys.executable, "-m", "react_editor", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not tty:
        return subprocess.run(argv, env=env, capture_output=True, timeout=120).stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, env=env, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks)


def test_export_to_a_terminal_escapes_controls_a_pipe_stays_exact(tmp_path):
    from sessions.store import Store
    from trajectory.records import AgentConfig, Step, Task

    db = str(tmp_path / "e.db")
    store = Store(db)
    task = Task(env="hotpotqa", id="q1", text="Question: who?", gold="x", source="custom")
    _, v = store.episodes.create(task, AgentConfig(), {})
    store.versions.append(
        v.id,
        [
            Step(
                index=1,
                thought=f"copy {OSC52} then {RLO}gnp.exe",
                action="Finish[x]",
                observation="Episode finished, reward = 1",
                done=True,
                reward=1.0,
                source="human",
            )
        ],
    )
    store.close()
    piped = _export_to(db, tty=False)
    assert OSC52.encode() in piped and RLO.encode() in piped  # a pipe or file is byte-exact
    shown = _export_to(db, tty=True)
    assert b"\x1b" not in shown and RLO.encode() not in shown, shown
    assert b"\\x1b]52;c;cHduZWQ=\\x07" in shown and b"\\u202e" in shown


def _wiki_episode(db: str, thought: str, *, prompts: Path | None = None) -> str:
    """A HotpotQA episode whose one step has `thought` (the next prompt carries it), with the
    exemplar set `prompts` imports when given; its number."""
    from sessions.exchange import import_file
    from sessions.store import Store
    from trajectory.records import AgentConfig, Step, Task

    store = Store(db)
    if prompts is not None:
        import_file(store, prompts, set_name="paper")
    task = Task(env="hotpotqa", id="q1", text="Question: who?", gold="x", source="custom")
    ep, v = store.episodes.create(task, AgentConfig(exemplar_set="paper" if prompts else None), {})
    store.versions.append(
        v.id, [Step(index=1, thought=thought, action="Search[x]", observation="x is y.", source="human")]
    )
    store.close()
    return str(ep.id)


def test_show_prompt_is_the_bytes_sent_into_a_pipe_escaped_on_a_terminal(tmp_path, capsys):
    """Issue 28 item 23: text mode escaped the prompt even into a pipe (not the bytes sent)."""
    db = str(tmp_path / "p.db")
    ep = _wiki_episode(db, f"copy {OSC52} then {RLO}gnp.exe {CSI}")
    sent = cli_json(capsys, "show", ep, "--prompt", "--db", db)["prompt"]  # (in process: the JSON is not the point)
    assert OSC52 in sent and CSI in sent
    assert _stdout_of(["show", ep, "--prompt", "--db", db], tty=False) == sent.encode("utf-8")
    shown = _stdout_of(["show", ep, "--prompt", "--db", db], tty=True)
    assert b"\x1b" not in shown and RLO.encode() not in shown and CSI.encode() not in shown, shown
    assert b"\\x1b]52;c;cHduZWQ=\\x07" in shown and b"\\x9b2J" in shown


def test_show_prompt_of_the_papers_prompt_file_keeps_its_c1_characters(tmp_path, capsys):
    """The paper's `webthink_simple6` holds C1 characters (mis-decoded dashes): into a pipe
    `show --prompt` writes them as they are sent."""
    from tests.reference import reference_prompts

    src = reference_prompts() / "prompts_naive.json"
    block = json.loads(src.read_text(encoding="utf-8"))["webthink_simple6"]
    assert any(0x80 <= ord(c) <= 0x9F for c in block)
    db = str(tmp_path / "p.db")
    ep = _wiki_episode(db, "I need to search x.", prompts=src)
    sent = cli_json(capsys, "show", ep, "--prompt", "--db", db)["prompt"]  # (in process: the JSON is not the point)
    assert block in sent
    assert _stdout_of(["show", ep, "--prompt", "--db", db], tty=False) == sent.encode("utf-8")
