"""Patterns a person types run in linear time (RE2) or are refused with one line
(issue 26, item 13: `(a+)+$` on 40 a's hung Python's backtracking engine at 100% CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.rollout_stats import RolloutError
from agent.rollouts import first_match
from agent.stop_conditions import ConditionError, parse
from react_editor.main import main
from trajectory.user_regex import PatternError, compile_pattern

ROOT = Path(__file__).resolve().parents[2]
EVIL = "a" * 40 + "!"


def test_catastrophic_patterns_end_at_once():
    """In a child process with a deadline: before RE2 this never returned."""
    code = (
        "from agent.stop_conditions import parse; from agent.rollouts import first_match\n"
        "from types import SimpleNamespace as S\n"
        f"step = S(index=1, action={EVIL!r}, observation={EVIL!r})\n"
        "assert not parse('obs:/(a+)+$/').matches(step)\n"
        "assert not parse('action:/(a|aa)+$/i').matches(step)\n"
        "assert first_match([step], '(a+)+$') is None\n"
        "print('ok')\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.stdout.strip() == "ok", p.stderr


def test_patterns_still_match_as_before():
    step = SimpleNamespace(index=3, action="put mug in/on table 1", observation="Nothing happens.")
    assert parse("obs:/^nothing happens\\.$/i").matches(step)
    assert not parse("obs:/^nothing happens/").matches(step)
    assert parse("action:/^put /").matches(step) and parse("obs:Nothing happens.").matches(step)
    assert parse("obs:a.b").spec == "obs:/a\\.b/" and parse("obs:/x/i").spec == "obs:/x/i"
    assert first_match([step], r"table \d") == 3


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?<=a)b", r"(?=x)", "(", "x" * 5000])
def test_unsupported_or_bad_patterns_are_refused_with_one_line(pattern):
    with pytest.raises(ConditionError) as e:
        parse(f"obs:/{pattern}/")
    assert "\n" not in str(e.value) and len(str(e.value)) < 300
    with pytest.raises(RolloutError):
        first_match([], pattern)
    with pytest.raises(PatternError):
        compile_pattern(pattern)


def test_cli_whatif_and_resume_with_catastrophic_patterns(toy, capsys, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    assert main(["run", "--env", "alfworld", "--task", "toy/room-1", "--human"]) == 0
    assert main(["step", "1", "--action", EVIL]) == 0
    capsys.readouterr()
    assert main(["whatif", "1", "--at", "first:(a+)+$", "--n", "2", "--thought", "t"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no step of version 1:1 matches") and len(err.splitlines()) == 1
    assert main(["resume", "1", "--until", r"obs:/(a)\1/"]) == 2
    err = capsys.readouterr().err
    assert "look-around and backreferences are not supported" in err and len(err.splitlines()) == 1
