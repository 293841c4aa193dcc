"""The Experiments page never misleads: the new run is selected, the table, progress and chart
agree while a run moves and after Stop, partial numbers are labelled and not compared unless
asked, and summaries are recomputed only when an experiment changed."""

from __future__ import annotations

import json

from agent import experiment_scores
from app_pages.experiment_views import chart_note, chart_spec, paper_row
from tests.app_helpers import captions
from tests.experiment_agents import wiki_agent
from tests.experiments_page_helpers import HOTPOT, _create, _frame, _wait_done

ANSWERS = {r["question"]: r["answer"] for r in HOTPOT}


def _after_first_run(page, *, limit: int = 2, name: str = "one"):
    """The page with one finished experiment (the wiki agent answering): (at, db, llm)."""
    make, db, llm = page
    llm.set_responder(wiki_agent(ANSWERS))
    at = make()
    _create(at, limit=limit, name=name)
    _wait_done(db, 1)
    return at, db, llm


def test_create_and_launch_selects_the_new_experiment(page):
    at, db, _ = _after_first_run(page, name="first")
    at.run()
    assert at.selectbox(key="x_pick").value == 1
    _create(at, limit=2, name="second")
    assert at.selectbox(key="x_pick").value == 2  # not left on the previous experiment
    _wait_done(db, 2)


def test_stopped_run_is_labelled_partial_and_not_compared_unless_asked(page):
    at, db, llm = _after_first_run(page, limit=3, name="full")
    llm.set_responder(wiki_agent(ANSWERS, latency_s=0.4, react_steps=2))
    _create(at, limit=8, name="cut")
    at.button(key="x_stop").click().run()
    _wait_done(db, 2)
    at.run()
    table, runs = _frame(at, "EM"), _frame(at, "wall_s")  # the rates, and how each run went
    row = {**table[table["name"] == "cut"].iloc[0], **runs[runs["name"] == "cut"].iloc[0]}
    assert row["status"].startswith("stopped")
    assert row["scored over"].startswith("partial: ") and row["done"].endswith("/8")
    assert table[table["name"] == "full"].iloc[0]["scored over"] == "all"
    assert any("scored over their finished tasks only" in c.value for c in at.caption)
    # the progress bar and the table say the same count
    (bar,) = at.get("progress")
    assert bar.proto.text.startswith(row["done"] + " done")
    assert not any("exact McNemar p" in d.value.columns for d in at.dataframe)  # no comparison while partial
    assert any(c.startswith("Partial: ") for c in captions(at))
    at.toggle(key="x_compare_partial").set_value(True).run()
    assert any("exact McNemar p" in d.value.columns for d in at.dataframe)


def test_chart_has_a_labelled_axis_level_labels_and_follows_the_selection(page):
    at, db, _ = _after_first_run(page)
    _create(at, limit=2, name="two")
    _wait_done(db, 2)
    at.run()
    assert at.multiselect(key="x_chart_2").value == [2]  # the picker follows the selected experiment
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert spec["encoding"]["y"]["title"] == "success %" and spec["encoding"]["x"]["axis"]["labelAngle"] == 0
    at.selectbox(key="x_pick").set_value(1).run()
    assert at.multiselect(key="x_chart_1").value == [1]


def test_summaries_are_recomputed_only_when_an_experiment_changes(page, monkeypatch):
    at, db, _ = _after_first_run(page)
    at.run()
    calls = []
    real = experiment_scores.summary
    monkeypatch.setattr(
        experiment_scores, "summary", lambda store, ref, **kw: calls.append(ref) or real(store, ref, **kw)
    )
    at.run()
    at.run()
    assert calls == []  # nothing changed: the cached summary is used
    from contextlib import closing

    from sessions import experiments
    from sessions.store import Store

    with closing(Store(db)) as store:
        experiments.set_status(store, 1, "done", add_wall_s=1.0)
    at.run()
    assert calls == [1]


def test_partial_summary_rows_and_chart_without_the_new_keys():
    s = {
        "experiment": 1,
        "name": "n",
        "env": "fever",
        "method": "react",
        "model": "m",
        "status": "stopped",
        "episodes": 10,
        "done": 4,
        "success": 2,
        "success_rate": 0.2,
        "by_type": {},
        "accuracy": 0.2,
        "tokens": 0,
        "cost": 0.0,
        "wall_s": 1.0,
    }
    assert paper_row(s)["scored over"] == "partial: 4 finished"
    assert paper_row({**s, "partial": False})["scored over"] == "all"
    spec = chart_spec([s])
    assert spec["data"]["values"][0]["experiment"] == "1 n (partial)"


def test_a_chart_of_zero_rates_shows_its_bars_and_says_so():
    """Issue 28 #20: a chart where every rate is 0% looked blank (bars of no height)."""
    s = {
        "experiment": 1,
        "name": "n",
        "env": "fever",
        "method": "react",
        "model": "m",
        "status": "done",
        "episodes": 4,
        "done": 4,
        "success": 0,
        "success_rate": 0.0,
        "by_type": {},
        "partial": False,
    }
    spec = chart_spec([s])
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["bar", "text"]
    assert [r["label"] for r in spec["data"]["values"]] == ["0%"]
    assert chart_note([s]).startswith("Every rate in this chart is 0%")
    assert chart_note([{**s, "success": 1, "success_rate": 0.25}]) is None


def test_the_page_keeps_its_title_on_every_run(page):
    """The title is the page's own, drawn on every run: written at the top level of a helper
    module (the form's, after a split) it showed on the process's first run only."""
    make, _, _ = page
    at = make()
    for _ in range(2):
        at.run()
        assert [t.value for t in at.title] == ["Experiments"]
