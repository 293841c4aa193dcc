"""Issue 11 item 16: text from the model or an imported file never drives the terminal:
control characters in any text output (and progress/error lines) are made visible."""

from __future__ import annotations

import json

from tests.test_cli_core import cli

TITLE = "\x1b]0;pwned\x07"  # sets the terminal title
RED = "\x1b[31mred\x1b[0m"
CSI = "\x9b2J"  # C1 control: clear screen on some terminals


def controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f]


def test_show_and_other_text_output_make_control_characters_visible(toy, capsys):
    db = str(toy.db)
    assert cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--db", db, "--human",
               "--name", f"ep {TITLE}")[0] == 0
    code, out, err = cli(capsys, "step", "1", "--action", f"go to {TITLE}{RED}{CSI} cabinet", "--db", db)
    assert code == 0 and not controls(out + err), (out, err)
    for argv in (["show", "1"], ["versions", "1"], ["episodes"], ["show", "1", "--prompt"]):
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
