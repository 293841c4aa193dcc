"""Every CLI command, walked from the argparse parser, given hostile values (20-digit and
5,000-digit ids, `²`, NaN, lone surrogates from invalid UTF-8): exactly one line on stderr,
no traceback, a non-zero exit (issue 26, item 15)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from react_editor.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = ("9" * 20, "²", "5" * 5000, "１２")  # SQLite overflow, isdigit-but-not-int, int's digit limit, fullwidth
FLOATS = ("nan", "inf", "-Infinity", "1e999")
BAD_TEXT = "bad\udcff"  # what Python makes of the byte 0xff in argv


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sp in subs[0].choices.items():
        yield from leaves(sp, path + (name,))


def takes_value(a: argparse.Action) -> bool:
    return a.nargs != 0 and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))


def numeric(a: argparse.Action) -> bool:
    """An id, count or reference: a value whose number the command reads."""
    name = getattr(a.type, "__name__", "")
    return (
        a.type is int
        or name in ("episode_ref", "integer")
        or "EPISODE" in str(a.metavar or "")
        or a.dest in ("experiment", "a", "b", "at")
    )


def base_argv(parser: argparse.ArgumentParser) -> dict[argparse.Action, str]:
    """A value for every required argument (a required group: its first member)."""
    chosen = {}
    for a in parser._actions:
        if takes_value(a) and (a.required or not a.option_strings) and a.nargs != "?":
            chosen[a] = str(list(a.choices)[0]) if a.choices else "1"
    for g in parser._mutually_exclusive_groups:
        if g.required and not any(a in chosen for a in g._group_actions):
            a = g._group_actions[0]
            chosen[a] = "1" if takes_value(a) else ""
    return chosen


def argv_with(path, parser, action, value) -> list[str]:
    chosen = base_argv(parser)
    if action.option_strings:  # a required member of a group it replaces
        for g in parser._mutually_exclusive_groups:
            if action in g._group_actions:
                for other in g._group_actions:
                    chosen.pop(other, None)
    chosen[action] = value
    argv = list(path)
    for a in parser._actions:  # positionals in order, then options
        if a in chosen and not a.option_strings:
            argv.append(chosen[a])
    for a, v in chosen.items():
        if a.option_strings:
            argv += [a.option_strings[0]] + ([v] if takes_value(a) else [])
    return argv


def cases():
    out = []
    for path, parser in leaves(build_parser()):
        for a in parser._actions:
            if not takes_value(a) or a.choices:
                continue
            if a.type is float:
                out += [(path, a.dest, argv_with(path, parser, a, v)) for v in FLOATS]
            elif numeric(a):
                out += [(path, a.dest, argv_with(path, parser, a, v)) for v in NUMBERS]
            else:
                out.append((path, a.dest, argv_with(path, parser, a, BAD_TEXT)))
    return out


CASES = cases()


def test_the_walk_covers_every_command():
    commands = {" ".join(p) for p, _ in leaves(build_parser())}
    assert {
        "show",
        "resume",
        "versions",
        "export",
        "annotate",
        "confirm",
        "jobs stop",
        "experiment show",
        "exemplars add",
        "search",
        "step",
        "edit",
        "run",
        "whatif",
    } <= commands
    hit = {" ".join(p) for p, _, _ in CASES}
    assert {
        "show",
        "resume",
        "annotate",
        "confirm",
        "jobs stop",
        "experiment show",
        "exemplars add",
        "search",
        "run",
        "edit",
        "step",
    } <= hit


@pytest.fixture
def hostile_db(toy, monkeypatch, tmp_path, capsys):
    """A database with one (human) episode, the default of every command; cwd a scratch folder."""
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--env", "alfworld", "--task", "toy/room-1", "--human"]) == 0
    capsys.readouterr()
    return toy.db


def run_in_process(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def one_line(code: int, err: str, argv) -> None:
    shown = [x[:30] for x in argv]
    assert code != 0, (shown, err)
    assert "Traceback" not in err, (shown, err)
    assert len(err.splitlines()) == 1 and err.endswith("\n"), (shown, err)


COMMANDS = sorted({c[0] for c in CASES})


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_hostile_values_are_one_line(command, hostile_db, capsys):
    """Each argument of the command, one hostile value at a time (one database per command)."""
    for path, _, argv in CASES:
        if path == command:
            code, err = run_in_process(argv, capsys)
            one_line(code, err, argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "99999999999999999999"],
        ["show", "1", "--version", "99999999999999999999"],
        ["versions", "1:99999999999999999999"],
        ["export", "99999999999999999999", "-f", "jsonl", "--out", "x.jsonl"],
        ["annotate", "1:99999999999999999999", "--verdict", "success"],
        ["confirm", "99999999999999999999"],
        ["jobs", "stop", "99999999999999999999"],
        ["experiment", "show", "99999999999999999999"],
        ["exemplars", "add", "s", "99999999999999999999"],
        ["resume", "1", "--until", "step:²"],
        ["resume", "1", "--until", "step:99999999999999999999"],
        ["whatif", "1", "--at", "9" * 5000, "--n", "2", "--thought", "t"],
        ["whatif", "1", "--at", "²", "--n", "2", "--thought", "t"],
        ["run", "--env", "alfworld", "--task", "toy/room-1", "--temperature", "nan"],
    ],
)
def test_named_repros_are_one_line(argv, hostile_db, capsys):
    code, err = run_in_process(argv, capsys)
    one_line(code, err, argv)


@pytest.mark.parametrize(
    "argv",
    [
        [b"annotate", b"1", b"--notes", b"bad\xff"],
        [b"search", b"bad\xff"],
        [b"step", b"1", b"--action", b"go\xfe"],
        [b"edit", b"1", b"--step", b"1", b"--action", b"\xc3("],
        [b"run", b"--env", b"alfworld", b"--task", b"toy/room-1", b"--human", b"--name", b"n\xff"],
    ],
)
def test_invalid_utf8_in_real_argv_is_one_line(argv, tmp_path):
    """Real argv bytes (a subprocess): Python hands them over as lone surrogates."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(tmp_path / "none.db")}
    p = subprocess.run(
        [sys.executable.encode(), b"-m", b"react_editor", *argv],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode != 0 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "not valid UTF-8" in err
