"""Issue 28 items 22 and 24: every place a person reads or types a version on the command
line uses the per-episode `EP:N` (docs/versions.md; `--json` keeps the global `id` beside
the `number`), and `resume --max-steps K` below the version's steps is refused."""

from __future__ import annotations

import json

import pytest

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
    code, out, err = cli(
        capsys, "resume", "1", "--max-steps", "10", "--base-url", toy.llm.base_url, "--db", db, "--json"
    )
    assert code == 0 and json.loads(out)["steps"] == 5 and json.loads(out)["success"] is True, (out, err)


def test_every_version_a_person_reads_is_ep_n(toy, capsys):
    """Episode 2's v1 is the database's version 2: before, `search` printed `2:2`, `annotate`
    "version 2", the frozen notice "version 2 ... new version 3", errors "version 3 has no
    step 9", `exemplars add/show` "v3" / "episode 2 v3" and `jobs` "episode 2 v3"."""
    db = str(toy.db)
    for _ in range(2):
        code, out, err = cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--human", "--db", db)
        assert code == 0, err
    assert "episode 2, v1:" in err and "version 2" not in err
    assert cli(capsys, "step", "2", "--action", "go to cabinet 1", "--db", db)[0] == 0
    code, out, err = cli(capsys, "search", "cabinet", "--db", db)
    assert code == 0 and out.startswith("2:1\t"), out
    hit = json.loads(cli(capsys, "search", "cabinet", "--db", db, "--json")[1])[0]
    assert (hit["version"], hit["number"], hit["ref"]) == (2, 1, "2:1")
    code, out, err = cli(capsys, "annotate", "2:1", "--verdict", "success", "--db", db)
    assert code == 0 and out.startswith("2:1: verdict success"), out
    assert json.loads(cli(capsys, "annotate", "2:1", "--db", db, "--json")[1])["version_id"] == 2
    code, out, err = cli(capsys, "step", "2", "--action", "open cabinet 1", "--db", db, "--json")
    assert code == 0 and "version 2:1 is frozen (annotated); continuing in new version 2:2" in err, err
    assert (json.loads(out)["version"], json.loads(out)["number"]) == (3, 2)
    code, out, err = cli(capsys, "exemplars", "add", "mine", "2:2", "--create", "--db", db)
    assert code == 0 and out.startswith("2:2 -> "), out
    code, out, err = cli(capsys, "exemplars", "show", "mine", "--db", db)
    assert code == 0 and out.rstrip().endswith("\t2:2"), out
    for argv, said in (
        (["edit", "2:2", "--step", "9", "--thought", "x"], "version 2:2 has no step 9"),
        (["tag", "2:2", "--step", "9", "--add", "x"], "2:2 has no step 9"),
    ):
        code, out, err = cli(capsys, *argv, "--db", db)
        assert code == 2 and said in err, (argv, err)
    toy.llm.push(" go to table 1")
    code, out, err = cli(capsys, "resume", "2:2", "--max-steps", "3", "--base-url", toy.llm.base_url, "--db", db)
    assert code == 0 and "version 2:2 keeps the settings it ran with; continuing in new version 2:3" in err, err
    assert out.startswith("episode 2 v3: 3 steps"), out
    code, out, err = cli(capsys, "jobs", "--db", db)
    assert code == 0 and "\trun\tdone\t1\t2:3\t" in out, out
    job = json.loads(cli(capsys, "jobs", "--db", db, "--json")[1])[0]
    assert (job["version"], job["ref"]) == (4, "2:3")


def test_a_lost_race_names_the_version_as_ep_n(toy):
    """ "version 2 changed meanwhile" named the global id of episode 2's v1."""
    from envs.registry import family
    from sessions.store import VersionChanged
    from trajectory.records import AgentConfig, Step

    task = family("alfworld").get_task("toy/room-1")
    for _ in range(2):
        _, v = toy.store.episodes.create(task, AgentConfig(), {})  # episode 2's v1 is version 2
    step = Step(index=1, thought=None, action="look", observation="ok", source="human")
    toy.store.versions.append(v.id, [step])
    with pytest.raises(VersionChanged, match=r"^version 2:1 changed meanwhile"):
        toy.store.versions.append(v.id, [step.model_copy(update={"index": 2})], expected_leaf=None)
