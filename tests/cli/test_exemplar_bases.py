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
    code, out, err = cli(capsys, *run_args(llm, db, "--env", "alfworld", "--tasks", ids, "--method", "react",
                                           "--max-steps", "3", "--name", "A"))
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
    return prompt[prompt.rfind("Your task is to:"):].split("\n")[0]


def test_a_set_built_on_the_builtin_exemplars_reruns_every_alfworld_type(tmp_path, capsys, scripted_llm):
    db, exp, fixed = _story_start(tmp_path, capsys, scripted_llm)
    code, out, err = cli(capsys, "exemplars", "create", "fixes", "--env", "alfworld", "--from", "builtin", "--db", db)
    assert code == 0 and "from builtin sha256:" in out, (out, err)
    code, out, err = cli(capsys, "exemplars", "add", "fixes", fixed, "--db", db)
    assert code == 0 and out.startswith(f"{fixed} -> react_put_0"), (out, err)  # in place of the pick type's nearest
    before = len(scripted_llm.completion_requests)
    code, out, err = cli(capsys, "experiment", "rerun", "A", "--exemplars", "fixes", "--name", "B", "--db", db, "--json")
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
        rows = store.db.execute("select distinct exemplar_rev from versions where exemplar_rev is not null").fetchall()
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
