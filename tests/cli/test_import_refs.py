"""Issue 11 item 10: task ids resolve only inside their data root, and an imported episode
that points at a local file (game, ZIM) or a URL outside the configured roots is not opened
until a person confirms it (`react-editor confirm`, or the Editor's button)."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from envs.alfworld import tasks
from envs.base import EnvError
from envs.registry import family
from sessions.store import Store
from tests.cli_helpers import cli
from trajectory.records import AgentConfig, Task


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """ALFWORLD_DATA with one official-layout game, and a game planted outside it."""
    root = tmp_path / "alfworld"
    game_dir = root / "json_2.1.1" / "valid_unseen" / "some-task" / "trial_1"
    game_dir.mkdir(parents=True)
    outside = tmp_path / "elsewhere" / "trial_1"
    outside.mkdir(parents=True)
    (outside / "game.tw-pddl").write_text('{"solvable": true}')
    monkeypatch.setenv("ALFWORLD_DATA", str(root))
    return root


@pytest.mark.parametrize(
    "task_id",
    [
        "valid_unseen/../..",
        "valid_unseen/../../../elsewhere/trial_1",
        "valid_unseen//etc/x",
        "valid_unseen/some-task/../../../../elsewhere",
    ],
)
def test_an_official_task_id_cannot_leave_the_data_root(data_root, task_id):
    with pytest.raises(EnvError, match="outside"):
        tasks.get_task(task_id, source="official")


def test_an_official_split_cannot_leave_the_data_root(data_root, capsys):
    code, _, err = cli(capsys, "tasks", "--env", "alfworld", "--source", "official", "--split", "valid_unseen/../../..")
    assert code == 2 and err.count("\n") == 1 and "outside" in err, err


def test_a_wikipedia_task_id_is_only_a_name(tmp_path):
    with pytest.raises(EnvError, match="no hotpotqa task"):
        family("hotpotqa").get_task("../../../etc/passwd")


def export_and_import(capsys, db: str, tmp_path, task: Task, env_options: dict) -> int:
    """An episode made here, exported, then imported back (the imported copy's id)."""
    store = Store(db)
    ep, _ = store.episodes.create(task, AgentConfig(), env_options)
    store.close()
    out = tmp_path / f"ep{ep.id}.jsonl"
    assert cli(capsys, "export", str(ep.id), "--format", "jsonl", "--out", str(out), "--db", db)[0] == 0
    code, res, err = cli(capsys, "import", str(out), "--db", db, "--json")
    assert code == 0, err
    (new,) = json.loads(res)["episodes"]
    return new


def test_an_imported_game_outside_the_roots_waits_for_confirmation(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    builtin = tasks.list_tasks()[0]
    game = tmp_path / "evil" / "trial_1" / "game.tw-pddl"
    shutil.copytree(builtin.data["game"].rsplit("/", 1)[0], game.parent)
    task = builtin.model_copy(update={"id": "custom/evil", "source": "custom", "data": {"game": str(game)}})
    ep = export_and_import(capsys, db, tmp_path, task, {"wording": "paper"})
    code, _, err = cli(capsys, "step", str(ep), "--action", "look", "--db", db)
    assert code == 2 and err.count("\n") == 1, err
    assert str(game) in err and f"react-editor confirm {ep}" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from steps").fetchone() == (0,)
    code, out, err = cli(capsys, "confirm", str(ep), "--db", db)
    assert code == 0 and str(game) in out, err
    code, out, err = cli(capsys, "step", str(ep), "--action", "look", "--db", db)
    assert code == 0, err
    # the episode made here (not imported) never needed a confirmation
    assert cli(capsys, "step", "1", "--action", "look", "--db", db)[0] == 0


def test_an_imported_builtin_game_needs_no_confirmation(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    ep = export_and_import(capsys, db, tmp_path, tasks.list_tasks()[0], {"wording": "paper"})
    code, _, err = cli(capsys, "step", str(ep), "--action", "look", "--db", db)
    assert code == 0, err


@pytest.mark.parametrize(
    "options, ref",
    [
        ({"wiki": "live", "wiki_url": "http://127.0.0.1:9/w/api.php"}, "http://127.0.0.1:9/w/api.php"),
        ({"wiki": "zim:/srv/other/wiki.zim"}, "/srv/other/wiki.zim"),
    ],
)
def test_an_imported_wiki_backend_waits_for_confirmation_or_a_new_one(tmp_path, capsys, options, ref):
    db = str(tmp_path / "r.db")
    task = family("hotpotqa").list_tasks()[0]
    ep = export_and_import(capsys, db, tmp_path, task, options)
    code, _, err = cli(capsys, "step", str(ep), "--action", "Search[Velmora]", "--db", db)
    assert code == 2 and ref in err and f"react-editor confirm {ep}" in err, err
    code, out, err = cli(capsys, "confirm", str(ep), "--wiki", "builtin", "--db", db)
    assert code == 0, err
    assert {k: v for k, v in Store(db).episodes.get(ep).env_options.items() if k != "import_digest"} == {
        "wiki": "builtin"
    }
    code, _, err = cli(capsys, "step", str(ep), "--action", "Search[Velmora]", "--db", db)
    assert code == 0, err


def test_the_editor_offers_the_confirmation(tmp_path, capsys, monkeypatch):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.app_helpers import APP

    db = str(tmp_path / "r.db")
    task = family("hotpotqa").list_tasks()[0]
    ep = export_and_import(capsys, db, tmp_path, task, {"wiki": "zim:/srv/other/wiki.zim"})
    monkeypatch.setenv("REACT_EDITOR_DB", db)
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(APP, default_timeout=30)
        at.switch_page("app_pages/editor.py")
        at.query_params["episode"] = str(ep)
        at.run()
        assert "/srv/other/wiki.zim" in [t.value for t in at.text]
        at.button(key="btn_step").click().run()  # refused: names the confirmation
        assert any("react-editor confirm" in t.value for t in at.text)
        at.button(key="confirm_refs_btn").click().run()
        assert not at.exception
        assert "unconfirmed_references" not in Store(db).episodes.get(ep).env_options
    finally:
        st.cache_resource.clear()


@pytest.mark.parametrize("wiki", ["bogus", "zim:/missing/wiki.zim", "zim:/etc/hostname", "zim:"])
def test_confirm_refuses_a_backend_that_run_refuses(tmp_path, capsys, wiki):
    """Issue 26 item 18: `confirm --wiki bogus` said yes (exit 0) and kept it."""
    db = str(tmp_path / "r.db")
    task = family("hotpotqa").list_tasks()[0]
    ep = export_and_import(capsys, db, tmp_path, task, {"wiki": "zim:/srv/other/wiki.zim"})
    before = Store(db).episodes.get(ep).env_options
    code, _, err = cli(capsys, "run", "--env", "hotpotqa", "--task", task.id, "--human", "--wiki", wiki, "--db", db)
    assert code == 2 and err.count("\n") == 1, err
    code, _, err2 = cli(capsys, "confirm", str(ep), "--wiki", wiki, "--db", db)
    assert code == 2 and err2.count("\n") == 1 and err2 == err, (err, err2)
    assert Store(db).episodes.get(ep).env_options == before  # nothing kept
