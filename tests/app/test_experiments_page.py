"""The Experiments page through AppTest: create and launch in the background, progress with
Stop / Resume, the paper-style table, comparison, and failures opening in the Editor."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest

from sessions import experiments
from sessions.store import Store
from tests.app_helpers import alerts, captions
from tests.experiment_agents import wiki_agent
from tests.experiments_page_helpers import HOTPOT, _create, _frame, _wait_done

EVIL = "<b>bold</b> [x](http://evil)"


def test_create_launch_results_compare_and_open_a_failure(page):
    make, db, llm = page
    answers = {r["question"]: (r["answer"] if n % 2 == 0 else EVIL) for n, r in enumerate(HOTPOT)}
    llm.set_responder(wiki_agent(answers))
    at = make()
    _create(at, limit=4, name="react4")
    _wait_done(db, 1)
    _create(at, limit=4, name="act4", method="act")
    _wait_done(db, 2)
    at.run()
    assert not at.exception
    table = _frame(at, "EM")
    assert list(table["name"]) == ["react4", "act4"] and list(table["EM"]) == ["50.0", "50.0"]
    assert "F1" in table.columns
    cmp = _frame(at, "exact McNemar p")
    assert cmp["tasks"][0] == "all" and cmp["both"][0] == 2 and cmp["exact McNemar p"][0] == "1.0"
    failed = _frame(at, "answer")
    assert len(failed) == 2 and set(failed["answer"]) == {EVIL}  # shown as data, not markup
    assert all(EVIL not in m.value for m in at.markdown)
    ep = at.selectbox(key="x_fail_pick").value
    at.button(key="x_open").click().run()
    assert not at.exception
    assert at.query_params.get("episode") in (str(ep), [str(ep)])


def test_a_running_batch_does_not_block_the_page_and_stop_then_resume(page):
    make, db, llm = page
    llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT}, latency_s=0.3, react_steps=2))
    at = make()
    _create(at, limit=8, name="slow")
    at.run()  # the page renders while the batch runs in its background thread
    assert not at.exception
    assert any(b.key == "x_stop" for b in at.button)  # it is still running: the page did not wait for it
    at.button(key="x_stop").click().run()
    _wait_done(db, 1)
    with closing(Store(db)) as store:
        done = experiments.counts(store, 1).get("done", 0)
        assert experiments.get(store, 1).status == "stopped" and done < 8
    at.run()
    at.button(key="x_resume").click().run()
    _wait_done(db, 1, every_task=True)
    with closing(Store(db)) as store:
        assert experiments.counts(store, 1) == {"done": 8} and len(store.episodes.ids()) == 8


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("x_tasks", "hp-001,hp-404", "hp-404"),  # a task that does not exist
        ("x_base_url", "http://user:secret@127.0.0.1:9/v1", "credentials"),  # refused, not silently stripped
    ],
)
def test_bad_input_is_shown_inline_and_nothing_is_created(page, field, value, needle):
    make, db, _ = page
    at = make()
    at.selectbox(key="x_env").set_value("hotpotqa")
    at.run()
    at.text_input(key=field).set_value(value)
    at.button(key="x_create").click().run()
    assert not at.exception
    assert any(needle in t.value for t in at.text)
    with closing(Store(db)) as store:
        assert experiments.list_all(store) == []


def test_failures_are_counted_per_signal_and_a_count_opens_its_episodes(page):
    make, db, llm = page
    wrong = {r["question"]: "Nowhere at all" for r in HOTPOT}
    llm.set_responder(wiki_agent(wrong, react_steps=2, search="Search[Zzyzx Unheard-of Place]"))
    at = make()
    _create(at, limit=3, name="misses")
    _wait_done(db, 1)
    at.run()
    assert not at.exception
    table = _frame(at, "search_miss")
    assert table["search_miss"].sum() == 3  # every failure searched for a page that is not there
    (cell,) = [b for b in at.selectbox if b.label == "Episodes with"]
    assert cell.value[1] == "search_miss" and cell.key.startswith("x_signal_cell_")  # the key follows the counts
    ep = at.selectbox(key="x_signal_pick").value
    at.button(key="x_signal_open").click().run()
    assert not at.exception
    assert at.query_params.get("episode") in (str(ep), [str(ep)])
    assert "Part of experiment 1 “misses” (react on hotpotqa)" in [t.value for t in at.text]  # the Editor says so
    at.button(key="ed_open_exp").click().run()
    assert not at.exception and at.session_state["x_sel"] == 1 and at.selectbox(key="x_pick").value == 1


def _exemplar_set_of_first_task(db: Path, exp_id: int, name: str = "fixed") -> str:
    """A set holding the episode of the experiment's first task (as 'Add to exemplar set' makes it)."""
    from sessions import exemplar_sets

    with closing(Store(db)) as store:
        first = experiments.items(store, exp_id)[0]
        exemplar_sets.create_set(store, name, "hotpotqa")
        exemplar_sets.add_version(store, name, first.version_id)
        return first.task.id


def test_rerun_with_an_exemplar_set_leaves_out_the_leak_and_opens_its_comparison(page):
    make, db, llm = page
    llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT[:2]}))
    at = make()
    _create(at, limit=4, name="base")
    _wait_done(db, 1)
    leaked = _exemplar_set_of_first_task(db, 1)
    at.run()
    assert "4/4 done: 2 successes, 2 failures, 0 errors" in at.get("progress")[0].proto.text
    at.selectbox(key="x_rr_set_1").set_value("fixed").run()
    assert any("Leakage" in w for w in alerts(at, "warning")) and leaked in [t.value for t in at.text]
    assert at.checkbox(key="x_rr_leave_1").value is True  # offered, and on by default
    llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT[:4]}))
    at.button(key="x_rerun").click().run()
    assert not at.exception, at.exception
    _wait_done(db, 2)
    at.run()
    at.run()
    with closing(Store(db)) as store:
        new = experiments.get(store, 2)
        assert new.params["rerun_of"] == 1 and new.config.exemplar_set == "fixed" and new.config.model == "m"
        assert [it.task.id for it in experiments.items(store, 2)] == [r["id"] for r in HOTPOT[1:4]]
    assert at.selectbox(key="x_pick").value == 2 and at.selectbox(key="x_compare").value == 1
    assert any("re-ran" in c for c in captions(at))
    cmp = _frame(at, "exact McNemar p")
    assert cmp["n"][0] == 3 and cmp["A only"][0] == 2  # the re-run solved the two the base missed


def test_the_launch_form_names_leaked_tasks_and_compare_leaves_them_out(page):
    make, db, llm = page
    llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT[:1]}))
    at = make()
    _create(at, limit=4, name="base")
    _wait_done(db, 1)
    leaked = _exemplar_set_of_first_task(db, 1)
    at.run()
    at.selectbox(key="x_exemplars_hotpotqa").set_value("fixed").run()
    assert any("Leakage" in w for w in alerts(at, "warning")) and leaked in [t.value for t in at.text]
    at.checkbox(key="x_leave_out").uncheck()
    _create(at, limit=4, name="leaky")
    _wait_done(db, 2)
    at.run()
    with closing(Store(db)) as store:
        assert (
            experiments.get(store, 2).params["leaked"] == [f"hotpotqa:{leaked}"]
            and len(experiments.items(store, 2)) == 4
        )
    at.selectbox(key="x_compare").set_value(1).run()
    assert any("Leaked" in w.value and "left out of" in w.value for w in at.warning) and leaked in [
        t.value for t in at.text
    ]
    assert _frame(at, "exact McNemar p")["n"][0] == 3
    at.toggle(key="x_include_leaked").set_value(True).run()
    assert _frame(at, "exact McNemar p")["n"][0] == 4
