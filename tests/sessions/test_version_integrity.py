"""Versions you can trust (issue 11, the core half): compare-and-set appends, a failed write
that leaves the environment consistent, frozen versions, pinned prompts, database errors as
one line, caches filled after commit, durable writes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from agent.engine import Engine
from sessions import annotations, exemplar_sets
from sessions.store import Store, StoreError, VersionChanged
from tests.cli_helpers import CHILD, ROOT, cli, cli_json
from tests.engine_scripts import ROOM_SCRIPT, cfg
from tests.scripted_server import Reply
from tests.toy_envs import ROOM_EXEMPLARS, ROOM_TASK
from trajectory.records import ModelCall


def _child(tmp_path, scripted_llm, *argv: str) -> subprocess.Popen:
    script = tmp_path / "child.py"
    if not script.exists():
        script.write_text(CHILD.format(root=str(ROOT)))
    return subprocess.Popen(
        [sys.executable, str(script), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _indices(store: Store, vid: int) -> list[int]:
    return [s.index for s in store.versions.steps(vid)]


# ---------------------------------------------------------------------- 1. compare-and-set


def test_two_processes_stepping_one_version_never_interleave(toy, tmp_path, capsys):
    """Two writers in two processes: a child, and this test's process (the same toy families)
    once the child's first model call is in flight, so both step from the same leaf."""
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=12, cache=False))
    toy.llm.set_default(Reply(text=" go to shelf 1", delay_s=0.25))
    argv = ["resume", str(ep.id), "--version", str(v.id), "--db", str(toy.db)]
    child = _child(tmp_path, toy.llm, *argv)
    deadline = time.monotonic() + 120
    while not toy.llm.completion_requests and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert toy.llm.completion_requests, child.communicate()[1]
    code, _, here_err = cli(capsys, *argv)
    _, child_err = child.communicate(timeout=120)
    codes = sorted([child.returncode, code])
    errs = child_err + here_err
    assert _indices(toy.store, v.id) == list(range(1, 13))  # one writer's steps, in order
    assert toy.store.db.execute("select count(*) from steps").fetchone()[0] == 12
    assert codes == [0, 1], errs
    assert "changed meanwhile" in errs
    assert toy.store.versions.get(v.id).outcome.done


def test_append_is_compare_and_set_on_the_leaf(toy):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.human_step(v.id, action="go to shelf 1")
    from trajectory.records import Step

    with pytest.raises(VersionChanged, match="changed meanwhile"):
        toy.store.versions.append(v.id, [Step(index=2, action="x", observation="y")], expected_leaf=None)
    assert _indices(toy.store, v.id) == [1]


# ---------------------------------------------------------------------- 2. failed write mid-step


def test_failed_write_then_fresh_process_resumes_without_mismatch(toy, tmp_path):
    toy.llm.push(*ROOM_SCRIPT[1:3])  # go to cabinet 1, open cabinet 1
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, cache=False))
    toy.engine.run(v.id, max_steps=2)
    toy.store.db.conn.execute("pragma busy_timeout = 50")
    blocker = sqlite3.connect(toy.db, isolation_level=None)
    blocker.execute("begin immediate")  # another writer holds the database
    toy.llm.push(" take mug 1 from cabinet 1")
    with pytest.raises(StoreError, match="locked"):
        toy.engine.step(v.id)  # the env took the mug, the write failed
    blocker.execute("rollback")
    blocker.close()
    paid = len(toy.llm.requests)
    rep = toy.engine.step(v.id)  # the kept answer again (never paid twice, cache off too), from the recorded state
    assert rep.steps[0].observation == "You pick up the mug 1 from the cabinet 1."
    assert rep.steps[0].action == "take mug 1 from cabinet 1" and len(toy.llm.requests) == paid
    toy.llm.push(" go to table 1")
    proc = _child(tmp_path, toy.llm, "step", str(ep.id), "--db", str(toy.db))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [s.action for s in toy.store.versions.steps(v.id)][-2:] == ["take mug 1 from cabinet 1", "go to table 1"]


# ---------------------------------------------------------------------- 3. frozen versions


@pytest.mark.parametrize("why", ["annotated", "exemplar", "child"])
def test_a_version_relied_on_continues_in_a_new_child(toy, why):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    if why == "annotated":
        annotations.annotate_version(toy.store, v.id, notes="looks right so far", by="ann")
    elif why == "exemplar":
        exemplar_sets.create_set(toy.store, "mine", "alfworld")
        exemplar_sets.add_version(toy.store, "mine", v.id)
    else:
        toy.engine.editor.branch(v.id, 1)
    before = toy.store.versions.steps(v.id)
    rep = toy.engine.step(v.id)
    assert rep.version.id != v.id and rep.version.parent_version == v.id and rep.frozen == why
    assert toy.store.versions.steps(v.id) == before  # the relied-on version never changed
    assert _indices(toy.store, rep.version.id) == [1, 2, 3]
    assert toy.store.episodes.get(ep.id).current_version == rep.version.id
    run = toy.engine.run(v.id, max_steps=1)  # run of the frozen version: another child, reported
    assert run.version not in (v.id, rep.version.id) and run.added == 1


def test_cli_says_when_it_continues_a_frozen_version(toy, capsys):
    db = str(toy.db)
    toy.llm.push(*ROOM_SCRIPT[:4])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    assert cli(capsys, "annotate", "1:1", "--verdict", "success", "--db", db)[0] == 0
    code, out, err = cli(capsys, "step", "1", "--version", "1", "--db", db, "--json")
    assert code == 0, err
    assert "version 1:1 is frozen (annotated); continuing in new version 1:2" in err
    assert json.loads(out)["version"] == 2
    code, out, err = cli(capsys, "step", "1", "--db", db)  # the current version is the child: no notice
    assert code == 0 and "frozen" not in err
    assert _indices(toy.store, 2) == [1, 2, 3, 4] and _indices(toy.store, 1) == [1, 2]


def test_a_resumed_stopped_version_is_no_longer_stopped(toy):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, should_stop=lambda: True)
    assert toy.store.versions.get(v.id).status == "stopped"
    rep = toy.engine.run(v.id, max_steps=1)
    assert rep.version == v.id and toy.store.versions.get(v.id).status == "open"


# ---------------------------------------------------------------------- 4. pinned prompts


def test_show_prompt_is_byte_identical_across_config_and_set_changes(toy, capsys):
    db = str(toy.db)
    exemplar_sets.create_set(toy.store, "mine", "alfworld")
    for key in ("react_put_0", "react_put_1"):
        exemplar_sets.add_raw(toy.store, "mine", key, ROOM_EXEMPLARS[key])
    toy.llm.push(*ROOM_SCRIPT[:2])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, exemplar_set="mine"))
    toy.engine.run(v.id, max_steps=2)
    shown = cli(capsys, "show", "1", "--version", "1", "--prompt", "--db", db)[1]
    assert "a pen in desk" in shown
    # the set changes: a new revision; version 1 keeps the one it ran with
    exemplar_sets.remove(toy.store, "mine", key="react_put_1")
    exemplar_sets.add_raw(toy.store, "mine", "react_put_1", ROOM_EXEMPLARS["react_put_1"].replace("pen", "quill"))
    assert cli(capsys, "show", "1", "--version", "1", "--prompt", "--db", db)[1] == shown
    # new model flags on an existing version: a new child version, version 1 keeps its config
    toy.llm.push(" go to shelf 1")
    code, _, err = cli(
        capsys, "step", "1", "--version", "1", "--model", "other-model", "--exemplars", "mine", "--db", db
    )
    assert code == 0, err
    assert "continuing in new version 1:2" in err
    assert toy.llm.last_request.body["model"] == "other-model"
    assert "quill" in toy.llm.last_request.prompt
    assert cli(capsys, "show", "1", "--version", "1", "--prompt", "--db", db)[1] == shown
    rows = cli_json(capsys, "versions", "1", "--db", db)
    assert [r["version"] for r in rows] == [1, 2] and rows[1]["parent_version"] == 1
    assert _indices(toy.store, 1) == [1, 2] and _indices(toy.store, 2) == [1, 2, 3]
    assert toy.store.versions.config(1).model == "scripted-model"
    assert toy.store.versions.config(2).model == "other-model"


def test_reconfigure_makes_a_child_at_the_same_leaf(toy):
    toy.llm.push(*ROOM_SCRIPT[:2])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    same = toy.engine.editor.reconfigure(v.id, {"model": "scripted-model"})
    assert same.id == v.id  # nothing changes: no new version
    new = toy.engine.editor.reconfigure(v.id, {"temperature": 0.7})
    assert new.parent_version == v.id and new.leaf_step_id == toy.store.versions.get(v.id).leaf_step_id
    assert toy.store.versions.config(new.id).temperature == 0.7 and toy.store.versions.config(v.id).temperature == 0.0
    assert toy.store.episodes.get(ep.id).current_version == new.id
    with pytest.raises(Exception, match="unknown setting"):
        toy.engine.editor.reconfigure(v.id, {"colour": "blue"})


# ---------------------------------------------------------------------- 5. database errors


def test_database_errors_are_one_line_store_errors(toy, capsys):
    toy.llm.push(*ROOM_SCRIPT[:2])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, cache=False))
    toy.engine.run(v.id, max_steps=1)
    toy.store.db.conn.execute("pragma busy_timeout = 50")
    blocker = sqlite3.connect(toy.db, isolation_level=None)
    blocker.execute("begin exclusive")
    with pytest.raises(StoreError, match="locked") as info:
        toy.store.settings.set("x", 1)
    assert "\n" not in str(info.value)
    from agent.engine import WriteBlocked

    with pytest.raises(WriteBlocked, match="locked") as info:  # the paid answer is kept, the run stops
        toy.engine.run(v.id)
    assert "\n" not in str(info.value) and "kept" in str(info.value)
    blocker.execute("rollback")
    blocker.close()
    with pytest.raises(StoreError, match="FOREIGN KEY") as info:  # an integrity error
        toy.store.versions.update(v.id, parent_version=999)
    assert "\n" not in str(info.value)
    # disk full: the database may not grow
    pages = toy.store.db.execute("pragma page_count").fetchone()[0]
    toy.store.db.conn.execute(f"pragma max_page_count = {pages}")
    with pytest.raises(StoreError, match="full"):
        toy.store.blobs.put(b"x" * 200_000)
    assert toy.store.integrity_check() == "ok"


def test_jsonl_import_parses_before_its_write_transaction(toy, tmp_path, monkeypatch, capsys):
    from sessions.exchange import importer

    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    out = tmp_path / "x.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(out), "--db", str(toy.db))[0] == 0
    real = importer.parse_record
    seen = []

    def parse(n, line):
        seen.append(toy.store.db.conn.in_transaction)
        return real(n, line)

    monkeypatch.setattr(importer, "parse_record", parse)
    report = importer.import_file(toy.store, out)
    assert report.versions == 1 and seen == [False]


# ---------------------------------------------------------------------- 6. caches


def test_a_rollback_does_not_poison_the_params_cache(toy):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    call = ModelCall(model="fresh-model", api_style="completions", params={"t": 1}, prompt_hash="ab", prompt_chars=2)
    with pytest.raises(RuntimeError):
        with toy.store.transaction():
            toy.store.calls.record(ep.id, [call])
            raise RuntimeError("something later in the transaction failed")
    (cid,) = toy.store.calls.record(ep.id, [call])
    assert toy.store.calls.read([cid])[0].model == "fresh-model"


def test_live_environments_are_evicted_least_recently_used(toy):
    engine = Engine(toy.store, api_key="x", max_live_envs=2)
    eps = [engine.start_episode(ROOM_TASK, cfg(toy.llm))[1] for _ in range(3)]
    for v in eps:
        engine.human_step(v.id, action="go to shelf 1")
    made = len(toy.made)
    engine.human_step(eps[1].id, action="go to table 1")  # the second is still alive
    engine.human_step(eps[2].id, action="go to table 1")
    assert len(toy.made) == made
    engine.human_step(eps[0].id, action="go to table 1")  # the least recent one was closed
    assert len(toy.made) == made + 1


def test_the_path_cache_is_bounded(toy):
    from trajectory.records import Version

    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    for _ in range(300):
        toy.engine.steps(toy.store.versions.create(Version(episode_id=ep.id), make_current=False))
    assert len(toy.engine.paths._paths) <= 256


# ---------------------------------------------------------------------- 7. durability


def test_writes_are_synchronous_full_in_wal_mode(tmp_path):
    s = Store(tmp_path / "d.db")
    assert s.db.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert s.db.execute("pragma synchronous").fetchone()[0] == 2  # FULL


# ---------------------------------------------------------------------- smaller defects


def test_human_step_keeps_the_thought_given_with_a_think_action(toy):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    rep = toy.engine.human_step(v.id, thought="First the cabinet.", action="think: Then the table.")
    assert [(s.thought, s.action) for s in rep.steps] == [("First the cabinet.", None), ("Then the table.", None)]


# ---------------------------------------------------------------------- concurrency in one process


def test_a_slow_model_call_blocks_no_other_work_on_the_episode(toy):
    """The engine locks an episode only around environment and database work: while a step
    waits for the model, a person can still ask for suggestions and edit that episode."""
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, cache=False).model_copy(update={"timeout_s": 10}))
    toy.llm.push(Reply(text=" go to shelf 1", delay_s=2.0))
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("rep", _catch(toy.engine.step, v.id)))
    t.start()
    _wait_for_request(toy)
    toy.engine.human_step(v.id, action="go to cabinet 1")  # wins the leaf
    assert toy.engine.envs.admissible_actions(v.id)
    assert t.is_alive()  # done while the slow call is still waiting: it did not block
    t.join(10)
    assert isinstance(result["rep"], VersionChanged)  # the slow step lost; nothing interleaved
    assert _indices(toy.store, v.id) == [1]
    assert len(toy.store.calls.of_episode(ep.id)) == 1  # its call is recorded all the same


def _catch(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc


# ---------------------------------------------------------------------- concurrency in the app


def test_a_slow_step_in_one_tab_does_not_block_another_episode(app):
    """One app-wide lock held across the model call made every tab wait for the slowest."""
    from tests.app_helpers import cfg as app_cfg
    from tests.app_helpers import click

    toy, make = app
    ep_a, v_a = toy.engine.start_episode(ROOM_TASK, app_cfg(toy.llm, cache=False))
    ep_b, v_b = toy.engine.start_episode(ROOM_TASK, app_cfg(toy.llm, cache=False))
    toy.llm.push(Reply(text=" go to shelf 1", delay_s=4.0), " go to cabinet 1")
    slow, fast = make("editor", episode=ep_a.id), make("editor", episode=ep_b.id)
    t = threading.Thread(target=lambda: click(slow, "btn_step"))
    t.start()
    _wait_for_request(toy)
    click(fast, "btn_step")
    fast_first = t.is_alive()  # the other tab's step finished while the slow one still waits
    t.join(30)
    assert [s.action for s in toy.store.versions.steps(v_b.id)] == ["go to cabinet 1"]
    assert [s.action for s in toy.store.versions.steps(v_a.id)] == ["go to shelf 1"]
    assert fast_first


def test_cost_uses_the_price_of_each_calls_model(app):
    from tests.app_helpers import cfg as app_cfg

    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, app_cfg(toy.llm, cache=False))
    toy.llm.push(" go to cabinet 1", " open cabinet 1")
    toy.engine.step(v.id)
    new = toy.engine.editor.reconfigure(v.id, {"model": "dear-model"})
    toy.engine.step(new.id)
    prices = {
        "scripted-model": {"prompt": 1000.0, "completion": 0.0},
        "dear-model": {"prompt": 9000.0, "completion": 0.0},
    }
    toy.store.settings.set("model_prices", prices)
    calls = toy.store.calls.of_episode(ep.id)
    assert {c.model for c in calls} == {"scripted-model", "dear-model"}
    expected = sum(c.usage.prompt_tokens * prices[c.model]["prompt"] for c in calls) / 1e6
    df = make("versions", episode=ep.id).dataframe[0].value
    assert df[df["id"] == new.id].iloc[0]["cost"] == f"${expected:.4f}"


def test_the_app_shows_a_database_failure_as_one_line(app):
    """A write that the database refuses (here: locked by another writer) is a message on the
    page, not a traceback, and the next action works again."""
    from app_pages import app_engine

    toy, make = app
    at = make("settings")
    app_engine.store().set_busy_timeout(0.05)  # every thread's connection (the page runs on its own)
    blocker = sqlite3.connect(toy.db, isolation_level=None)
    blocker.execute("begin immediate")
    at.button(key="price_save").click().run()
    blocker.execute("rollback")
    blocker.close()
    assert not at.exception
    shown = [t.value for t in at.text]
    assert any("database is locked" in t and "\n" not in t for t in shown), shown
    at.button(key="price_save").click().run()
    assert not at.exception and toy.store.settings.get("model_prices")


def test_the_editor_continues_a_frozen_version_in_a_child_and_says_so(app):
    from tests.app_helpers import cfg as app_cfg
    from tests.app_helpers import click

    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, app_cfg(toy.llm, cache=False))
    toy.engine.human_step(v.id, action="go to cabinet 1")
    annotations.annotate_version(toy.store, v.id, verdict="failure", by="ann")
    toy.llm.push(" open cabinet 1")
    at = click(make("editor", episode=ep.id, version=v.id), "btn_step")
    child = toy.store.episodes.get(ep.id).current_version
    assert child != v.id and at.query_params["version"] == str(child)
    # people read per-episode numbers: the first version is v1, its new child v2
    assert any("v1 is frozen (annotated); continuing in new version v2" in i.value for i in at.info)
    assert _indices(toy.store, v.id) == [1] and _indices(toy.store, child) == [1, 2]


def test_the_editor_shows_the_settings_of_the_selected_version(app):
    from tests.app_helpers import cfg as app_cfg

    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, app_cfg(toy.llm, cache=False))
    new = toy.engine.editor.reconfigure(v.id, {"model": "other-model", "max_steps": 9})
    shown = " ".join(t.value for t in make("editor", episode=ep.id, version=v.id).text)
    assert "Model: scripted-model" in shown and "Max steps: 50" in shown
    shown = " ".join(t.value for t in make("editor", episode=ep.id, version=new.id).text)
    assert "Model: other-model" in shown and "Max steps: 9" in shown


def _wait_for_request(toy, timeout: float = 15) -> None:
    """Until the scripted server has seen a completion request (a regression fails, not hangs)."""
    deadline = time.monotonic() + timeout
    while not toy.llm.completion_requests:
        assert time.monotonic() < deadline, "the model was never called"
        time.sleep(0.01)
