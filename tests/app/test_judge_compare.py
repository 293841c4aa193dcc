"""Compare's pairwise judgment (issue 43 item 4): left is better / right is better / tie with
an optional reason, recorded with the annotator's name (the signed-in person under OIDC login),
the pair's judgments by everyone shown as plain text; on an ALFWorld-family episode and a
HotpotQA one."""

from __future__ import annotations

import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.app_helpers import APP, EVIL, alerts, cfg, markdownish, ok
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.records import Version


def _pair(toy, task):
    """An episode with two sibling versions (v1 and v2)."""
    ep, v1 = toy.engine.start_episode(task, cfg(toy.llm))
    toy.engine.human_step(v1.id, action="go to cabinet 1" if task is ROOM_TASK else "Search[Colorado orogeny]")
    v2 = toy.store.versions.create(Version(episode_id=ep.id), make_current=False)
    return ep, v1, v2


def _save(at, choice: str | None, reason: str = "", by: str | None = None, key: str = "") -> AppTest:
    if choice is not None:
        at.radio(key=f"{key}-better").set_value(choice)
    at.text_area(key=f"{key}-reason").set_value(reason)
    if by is not None:
        at.text_input(key=f"{key}-by").set_value(by)
    (button,) = [b for b in at.button if b.label == "Save judgment"]
    return ok(button.click().run())


def _rows(at) -> list[dict]:
    frames = [d.value for d in at.dataframe if "judgment" in d.value.columns]
    return frames[0].to_dict("records") if frames else []


def test_judging_a_pair_on_an_alfworld_episode_records_who_and_shows_everyones(app):
    toy, make = app
    ep, v1, v2 = _pair(toy, ROOM_TASK)
    at = make("compare", episode=ep.id, left=v1.id, right=v2.id)
    key = f"judge-{v1.id}-{v2.id}"
    assert [s.value for s in at.subheader] == ["Which is better?"]
    assert at.radio(key=f"{key}-better").options == ["left is better", "right is better", "tie"]
    # no choice: said, nothing saved
    at = _save(at, None, by="alice", key=key)
    assert any("Choose left is better" in a for a in alerts(at, "error")) and toy.store.judgments.list() == []
    at = _save(at, "right is better", reason=EVIL, by="alice", key=key)
    (j,) = toy.store.judgments.of_pair(v1.id, v2.id)
    assert (j.version_a, j.better, j.annotator, j.reason) == (v1.id, "B", "alice", EVIL)
    assert any("Judgment saved: v2 (right) is better (alice)." in a for a in alerts(at, "success"))
    at = _save(at, "tie", by=EVIL, key=key)  # a second person: both kept
    rows = _rows(at)
    assert [(r["by"], r["judgment"], r["reason"]) for r in rows] == [
        ("alice", "v2 (right) is better", EVIL),
        (EVIL, "tie", ""),
    ]
    # the reason and the name are plain text: in a dataframe cell, never markdown
    assert not any("<script>" in m or "evil" in m for m in markdownish(at))
    # the same pair seen the other way round: the judgments are read oriented as shown
    at = make("compare", episode=ep.id, left=v2.id, right=v1.id)
    assert [r["judgment"] for r in _rows(at)] == ["v2 (left) is better", "tie"]
    expander_text = [t.value for t in at.text if "Cohen's kappa" in t.value]
    assert expander_text and "nan" not in expander_text[0].lower()


def _signed_in(monkeypatch, db, email: str, name: str) -> AppTest:
    monkeypatch.setenv("REACT_EDITOR_DB", str(db))
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=30)
    at.secrets = {
        "auth": {
            "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
            "cookie_secret": "x" * 32,
            "client_id": "id",
            "client_secret": "secret",
            "server_metadata_url": "http://127.0.0.1:1/.well-known",
        },
        "access": {"allowed_emails": [email]},
    }
    at.user = {"is_logged_in": True, "email_verified": True, "email": email, "name": name}
    return at


def test_a_signed_in_person_judges_a_hotpotqa_pair_under_their_own_name(app, monkeypatch):
    toy, _make = app
    ep, v1, v2 = _pair(toy, WIKI_TASK)
    at = _signed_in(monkeypatch, toy.db, "ann@lab.example", "Ann Example")
    at.switch_page("app_pages/compare.py")
    for k, v in {"episode": ep.id, "left": v1.id, "right": v2.id}.items():
        at.query_params[k] = str(v)
    ok(at.run())
    key = f"judge-{v1.id}-{v2.id}"
    assert not [t for t in at.text_input if t.key == f"{key}-by"]  # no name to type: the sign-in gives it
    at = _save(at, "left is better", reason="v1 searched first", key=key)
    (j,) = toy.store.judgments.list(ep.id)
    assert (j.annotator, j.better, j.reason, j.version_a) == ("Ann Example", "A", "v1 searched first", v1.id)
    # judging again replaces her judgment, it adds none
    at = _save(at, "tie", key=key)
    assert [(j.annotator, j.better) for j in toy.store.judgments.list(ep.id)] == [("Ann Example", "tie")]
    assert [r["by"] for r in _rows(at)] == ["Ann Example"]
