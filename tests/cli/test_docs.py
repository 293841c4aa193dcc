"""Every command is documented, as sqlite-utils' test_docs.py checks: each `react-editor`
command (the family groups too) has help, `--db` and `--json`, and the README names it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from react_editor.main import build_parser

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
# a command that serves a page has no machine-readable answer to give
NO_JSON = {("app",)}


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                yield prefix + (name,), sub, helps.get(name)
                yield from _commands(sub, prefix + (name,))


def _leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


COMMANDS = list(_commands(build_parser()))


def test_the_walk_finds_every_group():
    names = {path[0] for path, _, _ in COMMANDS}
    assert {"run", "show", "experiment", "jobs", "search", "whatif"} <= names
    assert any(len(path) == 2 for path, _, _ in COMMANDS)  # nested commands are walked too


@pytest.mark.parametrize("path,parser,help_text", COMMANDS, ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_every_command_has_help_db_and_json(path, parser, help_text):
    assert help_text and help_text.strip(), f"react-editor {' '.join(path)} has no help"
    if not _leaf(parser) and path != ("jobs",):  # a pure group only dispatches (`jobs` is a command too)
        return
    options = {o for a in parser._actions for o in a.option_strings}
    assert "--db" in options, f"react-editor {' '.join(path)} has no --db"
    if path not in NO_JSON:
        assert "--json" in options, f"react-editor {' '.join(path)} has no --json"


@pytest.mark.parametrize("path", [p for p, _, _ in COMMANDS], ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_every_command_is_in_the_readme(path):
    assert f"`react-editor {' '.join(path)}`" in README, f"README does not list `react-editor {' '.join(path)}`"
