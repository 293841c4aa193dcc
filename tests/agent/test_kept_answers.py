"""A paid answer kept after a blocked write is used by the next attempt whatever the cache
setting (issue 26, item 16): `--no-cache` used to pay for it again."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

import sessions.store
from react_editor.main import main
from sessions.store import Store


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("temperature", ["0", "0.7"])
def test_no_cache_still_uses_the_kept_answer(toy, capsys, monkeypatch, temperature):
    db = str(toy.db)
    assert (
        _cli(
            capsys,
            "run",
            "--env",
            "alfworld",
            "--task",
            "toy/room-1",
            "--base-url",
            toy.llm.base_url,
            "--temperature",
            temperature,
            "--no-cache",
            "--human",
            "--db",
            db,
        )[0]
        == 0
    )
    toy.llm.push(" go to cabinet 1")
    monkeypatch.setattr(sessions.store, "LOCK_TIMEOUT_S", 0.2)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("begin immediate")  # another program holds the write lock
    try:
        code, _, err = _cli(capsys, "step", "1", "--db", db)
    finally:
        other.execute("rollback")
        other.close()
    assert code == 2 and "kept" in err, err
    assert len(toy.llm.completion_requests) == 1
    toy.llm.push(" open cabinet 1")  # what a second, paid request would get
    code, _, err = _cli(capsys, "resume", "1", "--no-cache", "--db", db, "--json", "--max-steps", "1")
    assert code == 0, err
    assert len(toy.llm.completion_requests) == 1  # the kept answer, not a second payment
    shown = json.loads(_cli(capsys, "show", "1", "--db", db, "--json")[1])
    assert [s["action"] for s in shown] == ["go to cabinet 1"]
    with closing(Store(db)) as store:
        paid, used = store.calls.of_episode(1)
        assert not paid.cached and used.cached and used.completion == paid.completion
