"""Issue 39 item 1: an exemplar set builds on a base (`exemplars create NAME --from builtin|SET`),
so a set holding one fixed trajectory still drives a multi-type ALFWorld experiment; a set
that lacks a type says how to go on; the base is recorded in the set's revision; the leakage
rule still names the fixed task."""

from __future__ import annotations

import json
from contextlib import closing

import pytest

from react_editor.main import main
from sessions import exemplar_sets, experiments
from sessions.store import Store
from tests.alfworld_helpers import first_task
from tests.cli_helpers import run_args
from tests.experiment_agents import alfworld_agent

HINT = "Fixed: I should look in the places the task names first."
TYPES = ("look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _story_start(tmp_path, capsys, llm):
    """A 3-game ALFWorld experiment (look, pick, clean; all fail) and the pick failure fixed
    by a person: (db, experiment id, fixed version ref)."""
    llm.set_responder(alfworld_agent())
    db = tmp_path / "x.db"
    ids = ",".join(first_task(t).id for t in TYPES)
    code, out, err = cli(
        capsys,
        *run_args(llm, db, "--env", "alfworld", "--tasks", ids, "--method", "react", "--max-steps", "3", "--name", "A"),
    )
    assert code == 0, err
    a = json.loads(out.strip().splitlines()[-1])
    assert a["done"] == 3 and a["success"] == 0
    store = Store(db)
    try:
        pick = next(it for it in experiments.items(store, a["experiment"]) if it.task.type == "pick_and_place_simple")
        ep = store.versions.get(pick.version_id).episode_id
    finally:
        store.close()
    code, out, err = cli(capsys, "edit", f"{ep}:1", "--step", "1", "--insert-thought", HINT, "--keep-rest", "--db", db)
    assert code == 0, err
    return db, a["experiment"], out.split()[0]


def _task_line(prompt: str) -> str:
    return prompt[prompt.rfind("Your task is to:") :].split("\n")[0]


def test_a_set_built_on_the_builtin_exemplars_reruns_every_alfworld_type(tmp_path, capsys, scripted_llm):
    db, exp, fixed = _story_start(tmp_path, capsys, scripted_llm)
    code, out, err = cli(capsys, "exemplars", "create", "fixes", "--env", "alfworld", "--from", "builtin", "--db", db)
    assert code == 0 and "from builtin sha256:" in out, (out, err)
    code, out, err = cli(capsys, "exemplars", "add", "fixes", fixed, "--db", db)
    assert code == 0 and out.startswith(f"{fixed} -> react_put_0"), (out, err)  # in place of the pick type's nearest
    before = len(scripted_llm.completion_requests)
    code, out, err = cli(
        capsys, "experiment", "rerun", "A", "--exemplars", "fixes", "--name", "B", "--db", db, "--json"
    )
    assert code == 0, err
    b = json.loads(out.strip().splitlines()[-1])
    assert b["done"] == 3 and set(b["by_type"]) >= set(TYPES), b  # every type ran
    # the leakage rule still names the fixed task (its own trajectory is an exemplar now)
    assert "holds a trajectory of 1 evaluated task(s): pick_and_place_simple" in err, err
    prompts = [r.prompt for r in scripted_llm.completion_requests[before:]]
    pick_prompts = [p for p in prompts if "put" in _task_line(p) and "clean" not in _task_line(p)]
    assert pick_prompts and all(HINT in p for p in pick_prompts)  # the fix is one of the pick type's two exemplars
    assert all(HINT not in p for p in prompts if p not in pick_prompts)  # other types: the built-in ones
    with closing(Store(db)) as store:
        rows = store.db.execute(  # (experiment A's versions pin the built-in exemplars' own revision)
            "select distinct v.exemplar_rev from versions v join exemplar_set_revisions r on r.id = v.exemplar_rev "
            "join exemplar_sets s on s.id = r.set_id where s.name = 'fixes'"
        ).fetchall()
        assert len(rows) == 1
        assert exemplar_sets.revision_base(store, rows[0][0]).startswith("builtin sha256:")


def test_a_set_lacking_a_type_says_how_to_go_on(tmp_path, capsys, scripted_llm):
    db, exp, fixed = _story_start(tmp_path, capsys, scripted_llm)
    code, out, err = cli(capsys, "exemplars", "add", "lonely", fixed, "--create", "--db", db)
    assert code == 0, err
    code, out, err = cli(capsys, "experiment", "rerun", "A", "--exemplars", "lonely", "--db", db)
    last = err.strip().splitlines()[-1]  # (after the leakage warning) one line that says how to go on
    assert code == 2 and last.startswith("error: no 'react' exemplars of type"), err
    assert "exemplars create NAME --env alfworld --from builtin" in last, err


def test_hotpotqa_a_fix_joins_the_builtin_block_and_a_set_builds_on_a_set(tmp_path, capsys, scripted_llm):
    from tests.experiment_agents import HOTPOT, wiki_agent

    scripted_llm.set_responder(wiki_agent({r["question"]: "Nowhere at all" for r in HOTPOT[:3]}))
    db = tmp_path / "x.db"
    code, out, err = cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "3", "--name", "A"))
    assert code == 0, err
    a = json.loads(out.strip().splitlines()[-1])
    with closing(Store(db)) as store:
        first = experiments.items(store, a["experiment"])[0]
        ep = store.versions.get(first.version_id).episode_id
    gold = HOTPOT[0]["answer"]
    code, out, err = cli(capsys, "edit", f"{ep}:1", "--step", "1", "--action", f"Finish[{gold}]", "--db", db)
    assert code == 0, err
    fixed = out.split()[0]
    assert cli(capsys, "exemplars", "create", "hp-fixes", "--env", "hotpotqa", "--from", "builtin", "--db", db)[0] == 0
    code, out, err = cli(capsys, "exemplars", "add", "hp-fixes", fixed, "--db", db)
    assert code == 0 and out.startswith(f"{fixed} -> webthink_simple6"), (out, err)  # it joins the paper's block
    code, out, err = cli(capsys, "exemplars", "show", "hp-fixes", "--prompts", "--db", db, "--json")
    prompts = json.loads(out)["prompts"]
    from agent.exemplars import builtin_prompt_dict

    builtin = builtin_prompt_dict("hotpotqa")
    assert list(prompts) == list(builtin)  # the same entries, the react block one example longer
    assert prompts["webthink_simple6"].startswith(builtin["webthink_simple6"])
    assert f"Finish[{gold}]" in prompts["webthink_simple6"][len(builtin["webthink_simple6"]) :]
    assert {k: v for k, v in prompts.items() if k != "webthink_simple6"} == {
        k: v for k, v in builtin.items() if k != "webthink_simple6"
    }
    # a set built on that set: a copy (its entries and the fix), the base's revision named
    code, out, err = cli(
        capsys, "exemplars", "create", "hp-more", "--env", "hotpotqa", "--from", "hp-fixes", "--db", db
    )
    assert code == 0 and "from hp-fixes r1" in out, (out, err)
    assert (
        json.loads(cli(capsys, "exemplars", "show", "hp-more", "--prompts", "--db", db, "--json")[1])["prompts"]
        == prompts
    )
    code, out, err = cli(
        capsys,
        "experiment",
        "rerun",
        "A",
        "--exemplars",
        "hp-more",
        "--name",
        "B",
        "--db",
        db,
        "--json",
        "--leave-out-leaked",
    )
    assert code == 0 and "left out" in err, err  # the copied fix still leaks its own task
    b = json.loads(out.strip().splitlines()[-1])
    assert b["episodes"] == 2
    for argv, said in (
        (["exemplars", "create", "x", "--env", "alfworld", "--from", "hp-fixes"], "is for hotpotqa"),
        (["exemplars", "create", "x", "--env", "hotpotqa", "--from", "nope"], "unknown exemplar set"),
    ):
        code, out, err = cli(capsys, *argv, "--db", db)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_a_single_run_on_a_set_lacking_its_type_says_how_to_go_on(tmp_path, capsys, scripted_llm):
    db, exp, fixed = _story_start(tmp_path, capsys, scripted_llm)
    assert cli(capsys, "exemplars", "add", "lonely", fixed, "--create", "--db", db)[0] == 0
    clean = first_task("pick_clean_then_place_in_recep")
    code, out, err = cli(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        clean.id,
        "--exemplars",
        "lonely",
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "2",
        "--db",
        db,
    )
    assert code != 0 and "no 'react' exemplars of type 'clean'" in err and "--from builtin" in err, (out, err)
