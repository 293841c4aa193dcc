"""How many times the Editor draws its trajectory for one click: a click that only opens or
closes a step's panels costs one run of the page (the Edit button set the state and then
called st.rerun(), which drew the whole page twice per click)."""

from __future__ import annotations

import pytest

from tests.app_helpers import _won, ok


@pytest.fixture
def draws(monkeypatch):
    """The number of times the Editor's body (the trajectory and what is under it) is drawn."""
    from app_pages import editor_body

    calls = []
    body = editor_body.body
    monkeypatch.setattr(editor_body, "body", lambda *a, **k: calls.append(1) or body(*a, **k))
    return calls


def test_opening_and_cancelling_an_edit_draws_the_page_once_each(app, draws):
    toy, make = app
    ep, v = _won(toy)
    at = make("editor", episode=ep.id)
    draws.clear()
    ok(at.button(key=f"editbtn_{v.id}_2").click().run())
    assert at.radio(key=f"ed_kind_{v.id}_2") and at.session_state["edit_at"] == (v.id, 2)
    assert len(draws) == 1
    ok(at.button(key=f"ed_cancel_{v.id}_2").click().run())
    assert not [r for r in at.radio if r.key == f"ed_kind_{v.id}_2"] and "edit_at" not in at.session_state
    assert len(draws) == 2
