"""The Export page and the annotation widgets, driven through Streamlit's AppTest."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from sessions import annotations, exemplar_sets
from tests.export_support import ROOM_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK, WIKI_TASK


def _export_script():
    from app_pages.export import page

    page()


def _panel_script():
    import os

    from app_pages.annotate_widgets import step_tag_panel, version_annotation_panel
    from sessions.store import Store

    store = Store(os.environ["REACT_EDITOR_DB"])
    vid = int(os.environ["T_VERSION"])
    version_annotation_panel(store, vid, "ed")
    step_tag_panel(store, store.versions.steps(vid)[0].id, "ed")


@pytest.fixture
def db(toy, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    ew, vw = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.llm.push(" I search Velmora.\nAction 1: Search[Velmora]")
    toy.engine.step(vw.id)
    return toy, ep, v


def _button(at, label):
    return next(b for b in at.button if b.label == label)


def test_export_page_exports_jsonl_and_reports_errors(db):
    toy, ep, v = db
    at = AppTest.from_function(_export_script, default_timeout=30).run()
    assert not at.exception
    at.selectbox(key="exp-format").set_value("jsonl")
    at.selectbox(key="exp-env").set_value("alfworld")
    at.run()
    assert any("1 version matches" in c.value for c in at.caption)
    _button(at, "Prepare export").click().run()
    data, rep, fmt, _name = at.session_state["exp-data"]
    assert fmt == "jsonl" and rep["versions"] == 1
    rec = json.loads(data.decode().splitlines()[0])
    assert rec["episode"]["task"]["id"] == ROOM_TASK.id and len(rec["steps"]) == 6
    assert b"sk-test" not in data
    # two environments cannot share one react-json file: one clear error, no download
    at.selectbox(key="exp-env").set_value("(any)")
    at.selectbox(key="exp-format").set_value("react-json")
    at.run()
    _button(at, "Prepare export").click().run()
    boxes = [h.proto.body for h in at.get("html") if "re-alert-error" in h.proto.body]
    assert boxes and any("one environment" in b for b in boxes)  # the message is escaped text inside the box
    assert any("pick one in Environment above" in b for b in boxes) and not any("--env" in b for b in boxes)
    assert "exp-data" not in at.session_state


def test_export_page_builds_an_exemplar_set(db):
    toy, ep, v = db
    at = AppTest.from_function(_export_script, default_timeout=30).run()
    at.text_input(key="set-name").set_value("ui-set")
    at.text_input(key="set-refs").set_value(f"{ep.id}:{v.id}")
    assert at.selectbox(key="set-base").value == "the built-in exemplars"
    at.selectbox(key="set-base").set_value("nothing (an empty set)")
    _button(at, "Add to set").click().run()
    assert not at.error, [e.value for e in at.error]
    assert exemplar_sets.prompt_dict(toy.store, "ui-set")[1].keys() == {"react_put_0"}
    (table,) = [d.value for d in at.dataframe if "entries" in d.value.columns]  # the table refreshed at once
    assert list(table["name"]) == ["ui-set"] and list(table["entries"]) == [1]


def test_annotation_widgets_save_new_rows(db, monkeypatch):
    toy, ep, v = db
    monkeypatch.setenv("T_VERSION", str(v.id))
    at = AppTest.from_function(_panel_script, default_timeout=30).run()
    assert not at.exception
    at.selectbox(key=f"ed-verdict-{v.id}").set_value("failure")
    at.multiselect(key=f"ed-modes-{v.id}").set_value(["hallucination"])
    at.checkbox(key=f"ed-ready-{v.id}").check()
    at.text_input(key=f"ed-by-{v.id}").set_value("erin")
    _button(at, "Save annotation").click().run()
    a = annotations.version_annotation(toy.store, v.id)
    assert (a.verdict, a.failure_modes, a.exemplar_ready, a.annotator) == ("failure", ["hallucination"], True, "erin")
    sid = toy.store.versions.steps(v.id)[0].id
    at.multiselect(key=f"ed-tags-{sid}").set_value(["good_subgoal"])
    at.text_input(key=f"ed-extra-{sid}").set_value("Key Observation")
    _button(at, "Save tags").click().run()
    assert annotations.step_annotation(toy.store, sid).tags == ["good_subgoal", "key_observation"]
