"""Issue 39 item 1 in the app: the researcher's loop on ALFWorld (three types) and HotpotQA -
a fixed version goes to a NEW exemplar set that starts from the built-in exemplars (or the
set the episode ran with), and "Re-run with a change" with that set runs every task; a set
that lacks a type says how to go on."""

from __future__ import annotations

import json
from contextlib import closing

from streamlit.testing.v1 import AppTest

from react_editor.main import main
from sessions import exemplar_sets, experiments
from sessions.store import Store
from tests.alfworld_helpers import first_task
from tests.app_helpers import APP, alerts
from tests.cli_helpers import run_args
from tests.experiment_agents import HOTPOT, alfworld_agent, wiki_agent
from tests.experiments_page_helpers import _wait_done

TYPES = ("look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep")
HINT = "Fixed: I should look in the places the task names first."


def _experiment(capsys, llm, db, *argv) -> int:
    code = main([str(a) for a in run_args(llm, db, *argv)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])["experiment"]


def _fix(db, exp_id: int, task_type: str | None, edit: tuple) -> int:
    """A person's fix of the experiment's failure of that type (first item when None): its version id."""
    from agent.engine import Engine

    with closing(Store(db)) as store:
        item = next(it for it in experiments.items(store, exp_id) if task_type in (None, it.task.type))
        return Engine(store).editor.edit(item.version_id, *edit[:3], keep_rest=edit[3]).id


def _editor(db, vid: int) -> AppTest:
    with closing(Store(db)) as store:
        ep = store.versions.get(vid).episode_id
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("app_pages/editor.py")
    at.query_params["episode"], at.query_params["version"] = str(ep), str(vid)
    at.run()
    assert not at.exception, at.exception
    return at


def _add_to_new_set(at: AppTest, vid: int, name: str, start: str | None = None, *, expect_start: str) -> None:
    """The annotation panel's "Add to exemplar set" with (new set) NAME starting from `start`."""
    at.selectbox(key=f"ed-xset-{vid}").set_value("(new set)").run()
    base = at.selectbox(key=f"ed-xbase-{vid}")
    assert base.value == expect_start, base.value  # the default: the set the episode ran with, else built-in
    if start:
        base.set_value(start)
    at.text_input(key=f"ed-xnew-{vid}").set_value(name)
    at.button(key=f"ed-xadd-{vid}").click().run()
    assert not at.exception, at.exception
    assert any(f"Added to exemplar set {name!r}" in a for a in alerts(at, "success")), alerts(at, "success")


def _rerun(make, exp_id: int, set_name: str, *, leave_out: bool = True) -> AppTest:
    at = make()
    at.selectbox(key="x_pick").set_value(exp_id).run()
    at.selectbox(key=f"x_rr_set_{exp_id}").set_value(set_name).run()
    if not leave_out:  # run the leaked task too (the offer is on by default)
        at.checkbox(key=f"x_rr_leave_{exp_id}").set_value(False).run()
    at.button(key="x_rerun").click().run()
    assert not at.exception, at.exception
    return at


def test_alfworld_loop_add_to_a_set_from_builtin_then_rerun_runs_every_type(page, capsys):
    make, db, llm = page
    llm.set_responder(alfworld_agent())
    ids = ",".join(first_task(t).id for t in TYPES)
    exp = _experiment(capsys, llm, db, "--env", "alfworld", "--tasks", ids, "--max-steps", "3", "--name", "A")
    fixed = _fix(db, exp, "pick_and_place_simple", (1, "insert_thought", HINT, True))
    ed = _editor(db, fixed)
    _add_to_new_set(ed, fixed, "lonely", "nothing (an empty set)", expect_start="the built-in exemplars")
    _add_to_new_set(ed, fixed, "alfworld-fixes", expect_start="the built-in exemplars")
    # a set made of the fix alone cannot drive three types: the page says how to go on
    at = _rerun(make, exp, "lonely")
    said = " ".join(t.value for t in at.text)
    assert "no 'react' exemplars of type" in said and "Start from: built-in" in said and "--from builtin" in said, said
    with closing(Store(db)) as store:
        assert len(experiments.list_all(store)) == 1  # nothing was made
        assert exemplar_sets.get_set(store, "alfworld-fixes").base == "builtin"
    before = len(llm.completion_requests)
    _rerun(make, exp, "alfworld-fixes", leave_out=False)
    with closing(Store(db)) as store:
        new = experiments.list_all(store)[-1]
    _wait_done(db, new.id, every_task=True)
    with closing(Store(db)) as store:
        items = experiments.items(store, new.id)
        assert sorted(it.task.type for it in items) == sorted(TYPES)  # every type ran
        assert all(len(store.versions.steps(it.version_id)) == 3 for it in items)
    prompts = [r.prompt for r in llm.completion_requests[before:]]
    task_line = [p[p.rfind("Your task is to:") :].split("\n")[0] for p in prompts]
    pick = [p for p, t in zip(prompts, task_line) if "put" in t and "clean" not in t]
    assert pick and all(HINT in p for p in pick)  # the fix is an exemplar of its own type
    assert all(HINT not in p for p in prompts if p not in pick)  # the other types: the built-in ones


def test_hotpotqa_new_set_defaults_to_the_set_the_experiment_ran_with(page, capsys):
    make, db, llm = page
    llm.set_responder(wiki_agent({r["question"]: "Nowhere at all" for r in HOTPOT[:3]}))
    with closing(Store(db)) as store:
        from agent import exemplars

        exemplars.create_set(store, "paper", "hotpotqa", "builtin")
    exp = _experiment(capsys, llm, db, "--env", "hotpotqa", "--limit", "3", "--name", "A", "--exemplars", "paper")
    fixed = _fix(db, exp, None, (1, "rewrite_action", f"Finish[{HOTPOT[0]['answer']}]", False))
    ed = _editor(db, fixed)
    _add_to_new_set(ed, fixed, "hp-fixes", expect_start="a copy of set paper")
    with closing(Store(db)) as store:
        s = exemplar_sets.get_set(store, "hp-fixes")
        assert s.base == "paper" and s.base_note == "paper r1"
        env, prompts = exemplar_sets.prompt_dict(store, "hp-fixes")
        assert f"Finish[{HOTPOT[0]['answer']}]" in prompts["webthink_simple6"]  # joined the paper's block
    _rerun(make, exp, "hp-fixes")
    with closing(Store(db)) as store:
        new = experiments.list_all(store)[-1]
    _wait_done(db, new.id, every_task=True)
    with closing(Store(db)) as store:
        assert new.config.exemplar_set == "hp-fixes" and len(experiments.items(store, new.id)) == 2  # the leak left out
