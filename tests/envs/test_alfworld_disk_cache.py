"""ALFWorld's disk cache (translations and parsed game logic, translation.disk_memo) follows
its sources: an entry is keyed by the text it was made from, so a changed grammar or problem
gets a new entry and the game reflects the change; an unreadable entry is made again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.alfworld import grammar_cache, list_tasks, translation
from envs.alfworld.fastgame import FastGame, load_game_data

WELCOME = "Welcome to TextWorld, ALFRED!"


@pytest.fixture(autouse=True)
def _nothing_in_memory(monkeypatch):
    """As in a new process: what this process translated or parsed before is not kept."""
    monkeypatch.setattr(translation, "_TRANSLATIONS", {})
    monkeypatch.setattr(grammar_cache, "_LOGICS", {})


def _intro(game: dict) -> str:
    fast = FastGame(load_game_data(game), "paper")
    try:
        return fast.reset()
    finally:
        fast.close()


def test_entries_follow_the_grammar_and_the_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path))
    cache = tmp_path / "alfworld-sas"
    src = json.loads(Path(list_tasks()[0].data["game"]).read_text(encoding="utf-8"))
    src["grammar"] = src["grammar"].replace(WELCOME, "Welcome, test 1!")  # a text no other test has cached
    intro = _intro(src)
    assert "Welcome, test 1!" in intro
    first = set(cache.glob("*.pkl"))
    assert len(first) == 2  # the translation and the game logic

    changed = dict(src, grammar=src["grammar"].replace("Welcome, test 1!", "Welcome, test 2!"))
    assert _intro(changed) == intro.replace("Welcome, test 1!", "Welcome, test 2!")
    second = set(cache.glob("*.pkl"))
    assert len(second - first) == 1  # a new game logic; the same problem's translation is reused

    changed = dict(src, pddl_problem=src["pddl_problem"] + "\n; a comment changes the text\n")
    assert _intro(changed) == intro
    assert len(set(cache.glob("*.pkl")) - second) == 1  # a new translation


def test_an_unreadable_entry_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path))
    src = json.loads(Path(list_tasks()[0].data["game"]).read_text(encoding="utf-8"))
    src["grammar"] = src["grammar"].replace(WELCOME, "Welcome, test 3!")
    intro = _intro(src)
    entries = sorted((tmp_path / "alfworld-sas").glob("*.pkl"))
    for entry in entries:
        entry.write_bytes(b"not a pickle")
    monkeypatch.setattr(translation, "_TRANSLATIONS", {})  # a new process: nothing in memory
    monkeypatch.setattr(grammar_cache, "_LOGICS", {})
    assert _intro(src) == intro
    assert len(entries) == 2 and all(e.read_bytes() != b"not a pickle" for e in entries)


class _Explodes:
    """An entry whose loading fails as a bug would (not as a damaged or foreign entry)."""

    def __reduce__(self):
        return (_explode, ())


def _explode():
    raise RuntimeError("a bug while loading")


def test_an_unreadable_entry_is_said_in_one_line_and_another_failure_is_raised(tmp_path, monkeypatch, capfd):
    """Issue 39 item 11: only what a cut, damaged or foreign entry raises is caught (one line
    on stderr, the entry made again); any other failure is raised, not swallowed."""
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path))
    (tmp_path / "alfworld-sas").mkdir()
    entry = tmp_path / "alfworld-sas" / "k.pkl"
    entry.write_bytes(translation.pickle.dumps({"x": 1})[:-3])  # cut short
    assert translation.disk_memo("k", lambda: {"x": 2}) == {"x": 2}
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 1 and "k.pkl is unreadable" in err[0] and "making it again" in err[0]
    assert translation.disk_memo("k", lambda: {"x": 3}) == {"x": 2}  # made again, read back
    entry.write_bytes(translation.pickle.dumps(_Explodes()))
    with pytest.raises(RuntimeError, match="a bug while loading"):
        translation.disk_memo("k", lambda: {"x": 4})
