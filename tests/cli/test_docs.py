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


def test_the_docs_name_the_test_each_command_uses():
    """Issue 40, item 6: the README said suggest used "Fisher's p" (it used the score test; the
    two disagree on 9,900 tables) and the paired interval was called the inversion of the exact
    McNemar test (it is a conditional Clopper-Pearson interval scaled by a Wilson interval)."""
    root = Path(__file__).resolve().parents[2]
    suggest_md = (root / "docs" / "suggest.md").read_text(encoding="utf-8")
    whatif_md = (root / "docs" / "whatif.md").read_text(encoding="utf-8")
    experiments_md = (root / "docs" / "experiments.md").read_text(encoding="utf-8")
    assert "Fisher's p < 0.05" not in README and "Boschloo's exact unconditional test" in README
    for text in (suggest_md, whatif_md, experiments_md):
        assert "Boschloo's exact unconditional test" in text and "Chan and Zhang" in text
    assert "conditional Clopper-Pearson interval of theta" in experiments_md
    assert "scaled by a Wilson interval for psi, the discordant rate" in experiments_md
    assert "`tango_ci` (Tango's score interval" in experiments_md and "`p_holm`" in experiments_md
    assert "Holm's step-down" in suggest_md and "Benjamini-Hochberg" in suggest_md and "--confirm N" in suggest_md
