"""Issue 44: every listing is paged. `episodes`, `jobs`, `search` and `experiment list` take
`--limit` (a default page, not the whole store) and `--offset`, say how many more there are
(on stdout in text, on stderr with --json so stdout stays one JSON list), and a page with
filters is the same rows as the filtered whole, cut."""

from __future__ import annotations

import pytest

import sessions.jobs
from sessions import experiments
from sessions.store import Store
from tests.cli_helpers import cli, cli_json
from trajectory.records import AgentConfig, Outcome, Step, Task

CONFIG = AgentConfig(model="m", base_url="http://127.0.0.1:1/v1")


def _episode(store: Store, n: int, *, success: bool | None, human: bool) -> int:
    task = Task(
        env="hotpotqa", id=f"q{n}", type="bridge" if n % 2 else "comparison", text=f"Question {n}: who wrote it?"
    )
    ep, v = store.episodes.create(task, CONFIG, {})
    step = Step(
        index=1,
        thought=f"I need to search {n}.",
        action=f"Search[Topic {n}]",
        observation=f"Topic {n} is a word.",
        source="human" if human else "model",
    )
    _, v = store.versions.append(v.id, [step], [])
    if success is not None:
        store.versions.update(v.id, outcome=Outcome(done=True, success=success, reward=float(success)))
    return ep.id


@pytest.fixture
def many(tmp_path) -> tuple[str, list[int]]:
    """63 episodes: every third a success, every fifth a failure, the rest unfinished; every
    fourth written by a person."""
    db = tmp_path / "pages.db"
    store = Store(db)
    with store.transaction():
        ids = [
            _episode(store, n, success=True if n % 3 == 0 else (False if n % 5 == 0 else None), human=n % 4 == 0)
            for n in range(63)
        ]
    store.close()
    return str(db), ids


def test_episodes_default_page_is_bounded_and_says_how_many_more(many, capsys):
    db, ids = many
    code, out, err = cli(capsys, "episodes", "--json", "--db", db)
    import json

    rows = json.loads(out)
    assert code == 0 and [r["episode"] for r in rows] == sorted(ids, reverse=True)[:50]
    assert err.strip() == "(episodes 1-50 of 63; the next page: --offset 50)"
    code, text, err = cli(capsys, "episodes", "--offset", "50", "--db", db)
    lines = text.splitlines()
    assert code == 0 and err == "" and len(lines) == 14 and lines[-1] == "(episodes 51-63 of 63)"
    assert [int(line.split("\t")[0]) for line in lines[:-1]] == sorted(ids, reverse=True)[50:]


@pytest.mark.parametrize(
    "flags",
    [
        ["--outcome", "success"],
        ["--outcome", "failure"],
        ["--outcome", "unfinished"],
        ["--edited"],
        ["--type", "bridge"],
        ["--outcome", "success", "--edited"],
    ],
)
def test_a_filtered_page_is_the_filtered_whole_cut(many, capsys, flags):
    db, _ = many
    whole = cli_json(capsys, "episodes", *flags, "--limit", "1000", "--db", db)
    assert whole, flags
    pages = [
        cli_json(capsys, "episodes", *flags, "--limit", "4", "--offset", str(k), "--db", db)
        for k in range(0, len(whole) + 4, 4)
    ]
    assert [r["episode"] for p in pages for r in p] == [r["episode"] for r in whole]
    for r in whole:  # and the filter means what the rows say
        if "success" in flags:
            assert r["success"] is True
        if "failure" in flags:
            assert r["done"] and r["success"] is not True
        if "unfinished" in flags:
            assert not r["done"]
        if "--edited" in flags:
            assert r["edited"]


def test_bad_page_flags_are_one_line(many, capsys):
    db, _ = many
    for flags in (["--limit", "0"], ["--limit", "-3"], ["--offset", "-1"], ["--limit", "99999999999999999999"]):
        code, out, err = cli(capsys, "episodes", *flags, "--db", db)
        assert code == 2 and out == "" and err.count("\n") == 1, (flags, err)


def test_jobs_are_paged(tmp_path, capsys):
    db = tmp_path / "jobs.db"
    store = Store(db)
    made = []
    for n in range(27):
        j = sessions.jobs.create(store, "run", target=f"t{n}")
        if n % 2:
            sessions.jobs.finish(store, j.id, "done")
        made.append(j.id)
    store.close()
    code, out, err = cli(capsys, "jobs", "--json", "--db", str(db))
    import json

    first = json.loads(out)
    assert code == 0 and len(first) == 20 and err.strip() == "(jobs 1-20 of 27; the next page: --offset 20)"
    rest = cli_json(capsys, "jobs", "--offset", "20", "--db", str(db))
    assert len(rest) == 7 and {j["id"] for j in first} | {j["id"] for j in rest} == set(made)


def test_search_is_paged(many, capsys):
    db, _ = many
    whole = cli_json(capsys, "search", "search", "--limit", "100", "--db", db)
    assert len(whole) > 25
    code, text, err = cli(capsys, "search", "search", "--limit", "10", "--offset", "10", "--db", db)
    assert code == 0 and text.splitlines()[-1] == "(hits 11-20; the next page: --offset 20)"
    page = cli_json(capsys, "search", "search", "--limit", "10", "--offset", "10", "--db", db)
    assert [(h["version"], h["step"], h["field"]) for h in page] == [
        (h["version"], h["step"], h["field"]) for h in whole[10:20]
    ]


def test_experiment_list_is_paged(tmp_path, capsys):
    db = tmp_path / "x.db"
    store = Store(db)
    for n in range(7):
        experiments.create(
            store,
            name=f"exp {n}",
            env="hotpotqa",
            method="react",
            config=CONFIG,
            tasks=[Task(env="hotpotqa", id=f"q{n}", text="Question?")],
        )
    store.close()
    rows = cli_json(capsys, "experiment", "list", "--limit", "3", "--offset", "3", "--db", str(db))
    assert [r["name"] for r in rows] == ["exp 3", "exp 4", "exp 5"]
    code, text, _ = cli(capsys, "experiment", "list", "--limit", "3", "--offset", "6", "--db", str(db))
    assert code == 0 and text.splitlines()[-1] == "(experiments 7-7 of 7)"


def test_versions_are_paged_and_a_closed_group_is_one_line(tmp_path, capsys):
    from sessions import rollouts

    db = tmp_path / "v.db"
    store = Store(db)
    task = Task(env="hotpotqa", id="q", type="bridge", text="Question?")
    ep, v = store.episodes.create(task, CONFIG, {})
    rows, v = store.versions.append(v.id, [Step(index=1, thought="Think.", action="Search[A]", observation="A.")], [])
    for _ in range(3):  # three branches a person made
        store.versions.branch(v, at_step=rows[0], steps=[])
    g = rollouts.open_group(store, episode_id=ep.id, source_version=v.id, step=2, kind="resample", n=40, config=CONFIG)
    for pos in range(40):
        child, _ = store.versions.branch(v, at_step=rows[0], steps=[])
        store.versions.update(child.id, outcome=Outcome(done=True, success=pos < 10))
        rollouts.add_member(store, g.id, pos, child.id)
    store.close()
    code, text, err = cli(capsys, "versions", str(ep.id), "--db", str(db))
    lines = text.splitlines()
    assert code == 0 and len(lines) == 5 and lines[-1] == f"  g{g.id}\tresample @2: 10/40 success"
    code, text, _ = cli(capsys, "versions", str(ep.id), "--expand", "--limit", "10", "--db", str(db))
    lines = text.splitlines()
    assert lines[4] == f"  g{g.id}\tresample @2: 10/40 success" and lines[5].startswith("    ") and "r1\t" in lines[5]
    assert lines[-1] == "(lines 1-10 of 45; the next page: --offset 10)"
    code, out, err = cli(capsys, "versions", str(ep.id), "--json", "--offset", "40", "--db", str(db))
    import json

    assert code == 0 and len(json.loads(out)) == 4 and err.strip() == "(versions 41-44 of 44)"
