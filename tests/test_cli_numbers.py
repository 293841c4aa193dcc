"""Issue 28 items 22 and 24: every place a person reads or types a version on the command
line uses the per-episode `EP:N` (docs/versions.md; `--json` keeps the global `id` beside
the `number`), and `resume --max-steps K` below the version's steps is refused."""

from __future__ import annotations

import json

from react_editor.main import main

def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_resume_with_max_steps_below_the_versions_steps_is_refused(toy, capsys):
    db = str(toy.db)
    assert cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--human", "--db", db)[0] == 0
    for action in ("go to cabinet 1", "open cabinet 1", "take mug 1 from cabinet 1"):
        assert cli(capsys, "step", "1", "--action", action, "--db", db)[0] == 0
    versions = toy.store.db.execute("select count(*) from versions").fetchone()[0]
    for k in ("2", "3"):
        code, out, err = cli(capsys, "resume", "1", "--max-steps", k, "--db", db)
        assert code == 2 and err.count("\n") == 1 and "1:1 already has 3 steps" in err, err
    assert toy.store.db.execute("select count(*) from versions").fetchone()[0] == versions  # no empty child
    toy.llm.push(" go to table 1", " put mug 1 in/on table 1")
    code, out, err = cli(capsys, "resume", "1", "--max-steps", "10", "--base-url", toy.llm.base_url, "--db", db,
                         "--json")
    assert code == 0 and json.loads(out)["steps"] == 5 and json.loads(out)["success"] is True, (out, err)
