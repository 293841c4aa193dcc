"""Issue 39 in the app (AppTest): the Export page opens on a choice that works (5), the
Experiments and Versions pages (7), and untrusted names stay plain text (18)."""

from __future__ import annotations

import json

from tests.app_helpers import APP, captions, cfg, click, markdownish, ok, texts
from tests.engine_scripts import ROOM_SCRIPT
from tests.toy_envs import ROOM_TASK, WIKI_TASK


def _alerts(at, kind: str = "error") -> list[str]:
    return [h.proto.body for h in at.get("html") if f"re-alert-{kind}" in h.proto.body]


def _two_environments(toy) -> None:
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    _, w = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.llm.push(" I search Velmora.\nAction 1: Search[Velmora]")
    toy.engine.step(w.id)


# ---------------------------------------------------------------------- 5: Export's defaults


def test_the_export_page_opens_on_a_choice_that_works_with_two_environments(app):
    """It opened on `prompt` with every environment: "a prompt export holds one environment"."""
    toy, make = app
    _two_environments(toy)
    at = make("export")
    at = click(at, "exp-go")  # Prepare export, nothing changed
    assert not _alerts(at), _alerts(at)
    data, rep, fmt, name = at.session_state["exp-data"]
    assert rep["versions"] == 2 and rep["episodes"] == 2
    envs = {json.loads(line)["episode"]["task"]["env"] for line in data.decode().splitlines()}
    assert envs == {"alfworld", "hotpotqa"}
    # a one-environment format over two environments is said before the button is pressed
    at.selectbox(key="exp-format").set_value("prompt")
    ok(at.run())
    assert any("holds one environment" in c.value for c in at.caption), [c.value for c in at.caption]
    at.selectbox(key="exp-env").set_value("alfworld")
    ok(at.run())
    assert not any("holds one environment" in c.value for c in at.caption)


# ---------------------------------------------------------------------- 18: names are plain text

INJECT = "**bold** [link](http://evil.example) ![x](http://evil.example/x.png)"


def _no_markdown_injection(at) -> None:
    for value in markdownish(at):
        assert "](http" not in value and "**bold**" not in value, value


def _two_experiments(db, name: str) -> None:
    """An experiment named `name` and its re-run, neither run yet (partial: the comparison says so)."""
    from contextlib import closing

    from agent import experiment
    from agent.task_selection import select_tasks
    from sessions.store import Store
    from trajectory.records import AgentConfig

    with closing(Store(db)) as store:
        tasks = select_tasks("hotpotqa", "builtin", source=None, limit=2, sample=None, seed=0)
        experiment.create(store, env="hotpotqa", method="react", config=AgentConfig(model="m"), tasks=tasks, name=name)
        experiment.rerun(store, 1, config={"model": "m2"}, name=name + " again")


def test_experiment_names_in_the_comparison_captions_are_plain_text(page):
    make, db, _llm = page
    _two_experiments(db, INJECT)
    at = make()
    assert at.selectbox(key="x_pick").value == 2 and at.selectbox(key="x_compare").value == 1
    shown = captions(at)
    assert any(c.startswith(f"2 · {INJECT} again") and "re-ran" in c for c in shown), shown
    assert any(c.startswith(f"Partial: 2 · {INJECT} again") for c in shown), shown
    at.text_input(key="x_rr_model_2").set_value("[m3](http://evil.example)")
    ok(at.run())
    assert any(c.startswith("Changes: model m2 -> [m3](http://evil.example)") for c in captions(at))
    _no_markdown_injection(at)


def _oidc_app(monkeypatch, toy_db, user: dict, allowed: list[str]):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("REACT_EDITOR_DB", str(toy_db))
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
        "access": {"allowed_emails": allowed},
    }
    at.user = {"is_logged_in": True, "email_verified": True, **user}
    return at


def test_the_signed_in_e_mail_and_name_are_plain_text(app, monkeypatch):
    toy, make = app
    evil_mail = "[x](http://evil.example)**@evil.example"
    at = _oidc_app(monkeypatch, toy.db, {"email": evil_mail}, ["ann@lab.example"])
    ok(at.run())
    assert [t.value for t in at.title] == ["Not on the list"]
    assert f"Signed in as: {evil_mail}" in texts(at)
    _no_markdown_injection(at)
    # an allowed person whose provider name is markdown: the annotator line shows it as written
    ep, v = _two_steps(toy)
    at = _oidc_app(monkeypatch, toy.db, {"email": "ann@lab.example", "name": INJECT}, ["ann@lab.example"])
    at.switch_page("app_pages/versions.py")
    at.query_params["episode"] = str(ep.id)
    ok(at.run())
    assert f"Annotator: {INJECT} (signed in)" in captions(at)
    _no_markdown_injection(at)


def _two_steps(toy):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.human_step(v.id, action="go to cabinet 1")
    toy.engine.human_step(v.id, action="open cabinet 1")
    return ep, v


def test_exemplar_set_names_in_the_annotation_panel_are_plain_text(app):
    from sessions import exemplar_sets

    toy, make = app
    ep, v = _two_steps(toy)
    name = "a__b__c"  # a valid set name that markdown may draw with a bold "b"
    exemplar_sets.create_set(toy.store, name, "alfworld")
    exemplar_sets.add_version(toy.store, name, v.id)
    at = make("versions", episode=ep.id)
    assert f"In exemplar set {name}" in captions(at)
    assert not any(name in value for value in markdownish(at)), markdownish(at)


# ---------------------------------------------------------------------- 7: the Experiments page


def _experiment(db, env: str, name: str) -> None:
    from contextlib import closing

    from agent import experiment
    from agent.task_selection import select_tasks
    from sessions.store import Store
    from trajectory.records import AgentConfig

    with closing(Store(db)) as store:
        tasks = select_tasks(env, "builtin", source=None, limit=1, sample=None, seed=0)
        experiment.create(store, env=env, method="react", config=AgentConfig(model="m"), tasks=tasks, name=name)


def test_a_hotpotqa_experiment_opens_on_its_own_table_and_caption(page):
    """Both kinds exist: the HotpotQA experiment's page showed ALFWorld's table and caption first."""
    make, db, _llm = page
    _experiment(db, "alfworld", "on games")
    _experiment(db, "hotpotqa", "on questions")
    at = make()
    assert at.selectbox(key="x_pick").value == 2  # the HotpotQA one
    folded = [c.value for e in at.expander for c in e.caption]
    shown = [c.value for c in at.caption if c.value not in folded]
    tables = [c for c in shown if "(paper layout" in c]
    assert tables and tables[0].startswith("HotpotQA") and not any(c.startswith("ALFWorld") for c in shown), shown
    assert any(c.startswith("ALFWorld") for c in folded)  # still there, folded under the selected one
    at.selectbox(key="x_pick").set_value(1)
    ok(at.run())
    folded = [c.value for e in at.expander for c in e.caption]
    shown = [c.value for c in at.caption if c.value not in folded]
    assert [c for c in shown if "(paper layout" in c][0].startswith("ALFWorld"), shown


def _column_of(at, key: str) -> int:
    """The place (0, 1, ...) among its row's columns of the column holding button `key`."""
    from streamlit.testing.v1.element_tree import Column

    def walk(node):
        kids = list(getattr(node, "children", {}).values())
        for i, kid in enumerate(kids):
            if isinstance(kid, Column) and any(getattr(b, "key", None) == key for b in kid.button):
                return i
            found = walk(kid)
            if found is not None:
                return found
        return None

    place = walk(at._tree)
    assert place is not None, f"no column holds {key}"
    return place


def test_resume_takes_the_place_stop_had(page):
    """After Stop, Resume was drawn in the second column: an empty gap before it."""
    make, db, _llm = page
    _experiment(db, "hotpotqa", "stopped before it began")
    at = make()
    assert at.button(key="x_resume").label == "Resume"
    assert _column_of(at, "x_resume") == 0


def _menu(at) -> dict[str, str]:
    """The sidebar's page links: label -> the query they carry."""
    return {p.proto.label: p.proto.query_string for p in at.get("page_link")}


def test_the_page_menu_carries_the_episode_shown_so_a_new_tab_opens_it(app):
    """Streamlit's own menu linked to bare /versions: opened in a new tab, "No episode selected"."""
    toy, make = app
    ep, v = _two_steps(toy)
    at = make("editor", episode=ep.id, version=v.id)
    menu = _menu(at)
    assert menu["Versions"] == menu["Editor"] == menu["Compare"] == f"episode={ep.id}&version={v.id}", menu
    assert menu["Episodes"] == menu["Experiments"] == menu["Export"] == "", menu  # they show no one episode
    fresh = make("versions", **dict(kv.split("=") for kv in menu["Versions"].split("&")))  # a new tab: a new session
    assert not any("No episode selected" in i.value for i in fresh.info)
    assert f"Episode {ep.id} · alfworld · {ROOM_TASK.type} · {ROOM_TASK.id}" in texts(fresh)
    # a page that shows no episode keeps the session's choice in the menu
    at.switch_page("app_pages/experiments.py")
    ok(at.run())
    assert _menu(at)["Versions"] == f"episode={ep.id}&version={v.id}"


# ---------------------------------------------------------------------- 4: human mode's warning


def _in_order(at) -> list[str]:
    """The human panel's alerts and buttons in the order they are drawn."""
    out: list[str] = []

    def walk(node):
        for kid in getattr(node, "children", {}).values():
            if getattr(kid, "type", None) == "html" and "re-alert" in kid.proto.body:
                out.append("warning")
            elif getattr(kid, "type", None) == "button":
                out.append(kid.key)
            walk(kid)

    walk(at._tree)
    return out


def test_the_human_mode_warning_comes_before_its_buttons_in_both_environments(app):
    from tests.app_helpers import opened, take

    toy, make = app
    for task, wrong in ((ROOM_TASK, "go to drwer 2"), (WIKI_TASK, "Finish Marrowgate")):
        ep, v, at = opened(toy, make, task=task, human=True)
        assert "optional" not in at.text_area(key=f"h_action_{v.id}_0").label
        take(at, f"h_action_{v.id}_0", wrong)
        drawn = [x for x in _in_order(at) if x in ("warning", "h_submit", "h_confirm")]
        assert drawn == ["warning", "h_submit", "h_confirm"], drawn
