"""Issue 13: signals recorded with each step (engine, imports, upgrade), `show --json`
signals, `episodes --signal`, and full-text search over every version (`react-editor search`)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from sessions import schema, writer
from sessions.search import episodes_with_signal, search, signal_counts
from sessions.store import Store
from tests.cli_helpers import cli, cli_json
from tests.engine_scripts import cfg
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.records import AgentConfig


@pytest.fixture
def room(toy):
    """Episode 1: a toy ALFWorld run of five human steps that loops, names an unseen drawer,
    takes an admissible but unseen mug, and ends at its step limit (5)."""
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=5))
    for action in ("go to shelf 1", "go to table 1", "go to shelf 1", "go to drawer 3", "take mug 1 from cabinet 1"):
        toy.engine.human_step(v.id, action=action)
    return toy, ep, v


def test_signals_recorded_with_each_step_and_shown(room, capsys):
    toy, ep, v = room
    shown = cli_json(capsys, "show", str(ep.id), "--db", str(toy.db))
    assert [s["signals"] for s in shown] == [
        [],
        [],
        ["repeated_action"],
        ["hallucinated_object"],
        ["no_effect", "step_limit"],
    ]
    # stored with the step: the same steps read back carry them (step_limit is the version's)
    assert [s.signals for s in toy.store.versions.steps(v.id)][2:4] == [["repeated_action"], ["hallucinated_object"]]


def test_episodes_by_signal_current_or_any_version(room, capsys):
    toy, ep, v = room
    db = str(toy.db)
    other, _ = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    rows = cli_json(capsys, "episodes", "--signal", "repeated_action", "--db", db)
    assert [r["episode"] for r in rows] == [ep.id]
    assert cli_json(capsys, "episodes", "--signal", "search_miss", "--db", db) == []
    assert [r["episode"] for r in cli_json(capsys, "episodes", "--signal", "step_limit", "--db", db)] == [ep.id]
    counts = signal_counts(toy.store, [ep.id, other.id])
    assert counts.counts() == {
        "pick_and_place_simple": {"hallucinated_object": 1, "no_effect": 1, "repeated_action": 1, "step_limit": 1}
    }
    assert counts.totals == {"pick_and_place_simple": 2} and counts.episodes["pick_and_place_simple"]["no_effect"] == [
        ep.id
    ]
    # a new current version without the loop: only --all-versions still finds the episode
    toy.engine.editor.edit(v.id, 3, "rewrite_action", "go to cabinet 1")
    assert cli_json(capsys, "episodes", "--signal", "repeated_action", "--db", db) == []
    rows = cli_json(capsys, "episodes", "--signal", "repeated_action", "--all-versions", "--db", db)
    assert [r["episode"] for r in rows] == [ep.id]
    assert episodes_with_signal(toy.store, "step_limit") == []
    assert signal_counts(toy.store, [ep.id, other.id]).counts() == {}  # the current versions carry none now
    code, _, err = cli(capsys, "episodes", "--all-versions", "--db", db)
    assert code == 2 and err.count("\n") == 1


def test_search_maps_step_hits_to_versions_and_filters(room, capsys):
    toy, ep, v = room
    db = str(toy.db)
    v2 = toy.engine.editor.edit(v.id, 3, "rewrite_action", "go to cabinet 1")
    hits = cli_json(capsys, "search", "drawer", "--db", db)
    one = {"episode": ep.id, "version": v.id, "ref": f"{ep.id}:1", "number": 1}  # (v1 of the episode)
    assert hits == [
        {**one, "step": 4, "field": "action", "snippet": "go to drawer 3"},
        {**one, "step": 4, "field": "observation", "snippet": "On the drawer 3, you see nothing."},
    ]
    # step 2 is shared by both versions: the current one (v2) is reported ...
    table = cli_json(capsys, "search", "action: table", "--db", db)
    assert [(h["version"], h["step"], h["field"]) for h in table] == [(v2.id, 2, "action")]
    # ... unless the filters want the other one
    assert [h["version"] for h in cli_json(capsys, "search", "action: table", "--outcome", "failure", "--db", db)] == [
        v.id
    ]
    # a signal filter finds the steps carrying the signal (step 3 repeats step 1), not every step of such a version
    assert cli_json(capsys, "search", "action: table", "--signal", "repeated_action", "--db", db) == []
    assert [
        (h["version"], h["step"])
        for h in cli_json(capsys, "search", "action: shelf", "--signal", "repeated_action", "--db", db)
    ] == [(v.id, 3)]
    assert cli_json(capsys, "search", "action: table", "--signal", "search_miss", "--db", db) == []
    assert cli_json(capsys, "search", "drawer", "--outcome", "unfinished", "--db", db) == []
    assert cli_json(capsys, "search", "drawer", "--env", "hotpotqa", "--db", db) == []
    assert cli_json(capsys, "search", "zebra", "--db", db) == []
    (task,) = cli_json(capsys, "search", '"put a mug"', "--db", db)
    assert (task["version"], task["step"], task["field"]) == (v2.id, None, "task")
    assert task["snippet"].endswith("Your task is to: put a mug in table."), task
    assert len(cli_json(capsys, "search", "shelf OR table", "--limit", "2", "--db", db)) == 2


def test_search_names_and_notes_latest_only(room, capsys):
    toy, ep, v = room
    db = str(toy.db)
    cli_json(capsys, "current", str(ep.id), "--version", str(v.id), "--name", "looping try", "--db", db)
    cli_json(capsys, "annotate", f"{ep.id}:{v.id}", "--notes", "keeps pacing between furniture", "--db", db)
    cli_json(capsys, "tag", f"{ep.id}:{v.id}", "--step", "4", "--note", "no drawer here", "--db", db)
    one = {"episode": ep.id, "version": v.id, "ref": f"{ep.id}:1", "number": 1}  # (v1 of the episode)
    assert cli_json(capsys, "search", "looping", "--db", db) == [
        {**one, "step": None, "field": "name", "snippet": "looping try"}
    ]
    assert cli_json(capsys, "search", "pacing", "--db", db) == [
        {**one, "step": None, "field": "notes", "snippet": "keeps pacing between furniture"}
    ]
    assert [(h["step"], h["field"]) for h in cli_json(capsys, "search", "note: drawer", "--db", db)] == [(4, "note")]
    cli_json(capsys, "annotate", f"{ep.id}:{v.id}", "--notes", "walks in circles", "--db", db)
    assert cli_json(capsys, "search", "pacing", "--db", db) == []  # replaced notes are history
    assert [h["field"] for h in cli_json(capsys, "search", "circles", "--db", db)] == ["notes"]


def test_bad_queries_are_one_line_errors(room, capsys):
    toy, _, _ = room
    for query in (" ", '"((', "&& ||", "x " * 65, "y" * 1001):
        code, out, err = cli(capsys, "search", query, "--json", "--db", str(toy.db))
        assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, (query, err)
    code, _, err = cli(capsys, "search", "shelf", "--limit", "0", "--db", str(toy.db))
    assert code == 2 and "limit" in err


def test_search_hit_marks_the_match(room):
    toy, ep, v = room
    (hit,) = search(toy.store, "observation: drawer")
    assert [hit.snippet[a:b] for a, b in hit.marks] == ["drawer"]


def test_wikipedia_misses_and_imported_steps_get_signals(toy, tmp_path, capsys):
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.human_step(v.id, thought="Find it.", action="Search[Velmorra]")
    toy.engine.human_step(v.id, thought="Try again.", action="Search[Velmora]")
    toy.engine.human_step(v.id, thought="Look.", action="Lookup[zebra]")
    shown = cli_json(capsys, "show", str(ep.id), "--db", str(toy.db))
    assert [s["signals"] for s in shown] == [["search_miss"], [], ["lookup_miss"]]
    hits = cli_json(capsys, "search", "Velmorra", "--signal", "search_miss", "--env", "hotpotqa", "--db", str(toy.db))
    assert {(h["step"], h["field"]) for h in hits} == {(1, "action"), (1, "observation")}
    # an import records steps without signals: the store computes them
    out = tmp_path / "x.jsonl"
    cli_json(capsys, "export", str(ep.id), "--format", "jsonl", "--out", str(out), "--db", str(toy.db))
    other = str(tmp_path / "other.db")
    cli_json(capsys, "import", str(out), "--db", other)
    assert [s["signals"] for s in cli_json(capsys, "show", "1", "--db", other)] == [
        ["search_miss"],
        [],
        ["lookup_miss"],
    ]


def test_upgrade_backfills_signals_and_builds_the_index(tmp_path, monkeypatch):
    """A database made before issue 13 (schema 3): opening it computes every step's signals
    and indexes what it holds."""
    path = tmp_path / "old.db"
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:3])
    Store(path).close()
    monkeypatch.undo()
    conn = sqlite3.connect(path)
    conn.executescript(f"""
        insert into tasks (id, key, env, type, json) values (1, 'alfworld:t', 'alfworld', 'pick', '{ROOM_TASK.model_dump_json()}');
        insert into configs (id, key, json) values (1, 'c', '{{}}');
        insert into episodes (id, task_id, config_id, created_at) values (1, 1, 1, 'now');
        insert into steps (id, episode_id, parent_id, idx, action, observation, source, created_at) values
            (1, 1, null, 1, 'go to shelf 1', 'On the shelf 1, you see nothing.', 'model', 'now'),
            (2, 1, 1, 2, 'go to shelf 1', 'On the shelf 1, you see nothing.', 'model', 'now'),
            (3, 1, 1, 2, 'go to sofa 2', 'Nothing happens.', 'human', 'now');
        insert into versions (id, episode_id, leaf_step_id, status, outcome, created_at, updated_at) values
            (1, 1, 2, 'done', '{{"done":true,"success":false,"metrics":{{"limit":true}}}}', 'now', 'now'),
            (2, 1, 3, 'open', null, 'now', 'now');
        update episodes set current_version = 2;
    """)
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.db.execute("select value from meta where key = 'schema_version'").fetchone()[0] == str(
        len(schema.MIGRATIONS)
    )
    assert [s.signals for s in store.versions.steps(1)] == [[], ["repeated_action"]]
    assert [s.signals for s in store.versions.steps(2)] == [[], ["no_effect", "hallucinated_object"]]
    assert episodes_with_signal(store, "step_limit") == [] and episodes_with_signal(
        store, "step_limit", all_versions=True
    ) == [1]
    assert [(h.version, h.step, h.field) for h in search(store, "sofa")] == [(2, 2, "action")]
    # a signal filter points at the step carrying it (step_limit: the version's last step)
    assert {(h.version, h.step) for h in search(store, "shelf", signal="step_limit")} == {(1, 2)}
    assert [(h.version, h.step, h.field) for h in search(store, "mug")] == [(2, None, "task")]
    assert [(h.version, h.field) for h in search(store, "toy/room-1")] == [(2, "task id")]  # issue 28 #11


def test_text_copied_from_a_trajectory_is_searched_literally(toy, capsys):
    """Queries that are not FTS5 syntax (copied from a transcript) find the text they name."""
    db = str(toy.db)
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    for thought, action in (
        ("Tomas Rell can't be in C# Quartet; see hp-001.", "Search[Tomas Rell]"),
        ("Hale & Morrow wrote it.", "Lookup[born]"),
    ):
        toy.engine.human_step(v.id, thought=thought, action=action)
    room, rv = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.human_step(rv.id, action="put mug 1 in/on table 1")
    expected = {
        "Search[Tomas Rell]": (ep.id, 1, "action"),
        "Lookup[born]": (ep.id, 2, "action"),
        "in/on": (room.id, 1, "action"),
        "hp-001": (ep.id, 1, "thought"),
        "can't": (ep.id, 1, "thought"),
        "C# Quartet": (ep.id, 1, "thought"),
        "Hale & Morrow": (ep.id, 2, "thought"),
    }
    for query, place in expected.items():
        code, out, err = cli(capsys, "search", query, "--db", db, "--json")
        assert code == 0, (query, err)
        assert place in [(h["episode"], h["step"], h["field"]) for h in json.loads(out)], (query, out)
    # FTS5 syntax still works for those who use it, and documented column filters mean what they say
    assert {h["field"] for h in cli_json(capsys, "search", "thought: Rell", "--db", db)} == {"thought"}
    assert {h["field"] for h in cli_json(capsys, "search", "action: Rell", "--db", db)} == {"action"}
    assert [h["step"] for h in cli_json(capsys, "search", "Tomas NOT Search", "--db", db)] == []
    assert cli_json(capsys, "search", "thought:", "--db", db) == []  # the word itself: no step says "thought"


def test_a_flood_query_is_one_line_at_once(room, capsys):
    toy, _, _ = room
    code, out, err = cli(capsys, "search", " ".join(["shelf"] * 5000), "--db", str(toy.db))
    assert code == 2 and err.count("\n") == 1 and "limit" in err, err
    # refused before anything is opened: a missing database is not even looked at
    code, out, err = cli(capsys, "search", " ".join(f"w{i}" for i in range(200)), "--db", str(toy.db) + ".none")
    assert code == 2 and "200 words; the limit is 64" in err, err


def test_a_search_past_its_time_budget_is_stopped_with_one_line(room, capsys, monkeypatch):
    import sessions.search

    toy, _, _ = room
    monkeypatch.setattr(sessions.search, "TIME_BUDGET_S", 0.0)
    monkeypatch.setattr(sessions.search, "PROGRESS_EVERY", 1)  # a tiny database: look at the clock at once
    code, out, err = cli(capsys, "search", "shelf", "--db", str(toy.db))
    assert code == 2 and err.count("\n") == 1 and "budget" in err, err
    monkeypatch.setattr(sessions.search, "TIME_BUDGET_S", 5.0)
    assert cli_json(capsys, "search", "shelf", "--db", str(toy.db))  # the connection is usable again


def test_the_search_benchmark_runs(tmp_path):
    """Issue 26 item 19: its downgrade re-ran a later migration ("table jobs already exists")."""
    import os
    import subprocess
    import sys
    from pathlib import Path as _Path

    root = _Path(__file__).resolve().parents[2]
    p = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "search.py"), "--episodes", "5", "--keep", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.splitlines()[-1])["versions"] == 10


def test_a_task_id_copied_from_the_editor_header_is_found(toy, capsys):
    """Issue 28 #11: the id the Editor's header shows (`hp-002`) finds its episode."""
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.human_step(v.id, thought="Look it up.", action="Search[Velmora]")
    hits = cli_json(capsys, "search", WIKI_TASK.id, "--db", str(toy.db))
    assert [(h["episode"], h["field"], h["snippet"]) for h in hits] == [(ep.id, "task id", WIKI_TASK.id)]
    assert cli_json(capsys, "search", "toy", "--db", str(toy.db))[0]["field"] == "task id"


def _noted(store: Store) -> list[tuple[str, int]]:
    return store.db.execute("select tbl, row from search_pending order by tbl, row").fetchall()


def _index_is_true(store: Store) -> None:
    for table in ("tasks", "steps", "versions"):  # FTS5 checks its index against the rows it indexes
        store.db.execute(f"insert into {table}_fts ({table}_fts) values ('integrity-check')")


def test_rows_noted_for_the_index_are_found_before_it_is_written(toy, monkeypatch):
    """The runner's writer writes the index for its groups' new rows once per INDEX_WRITES
    writes, not at every commit (schema 15): a row written meanwhile is only noted, and search finds it all
    the same, in a read-only Store too; renamed or deleted while noted, the index stays
    true; the next transaction that writes outside the writer indexes it."""
    monkeypatch.setattr(writer, "INDEX_WRITES", 2)
    store = toy.store
    config = AgentConfig(model="m")
    store.episodes.create(ROOM_TASK, config, {}, "first")
    assert _noted(store) == []  # outside the writer: indexed as it commits
    with writer.attached(store):  # the index is written at its second write, not at its first or third
        writer.write(store, lambda: store.episodes.create(WIKI_TASK, config, {}, "second"))
        writer.write(store, lambda: store.settings.set("k", 1))
        task = WIKI_TASK.model_copy(update={"id": "toy-9", "text": "Question: Who founded Quenbridge?"})
        ep, v = writer.write(store, lambda: store.episodes.create(task, config, {}, version_name="third"))
    assert {t for t, _ in _noted(store)} == {"tasks", "versions"}
    assert [r for t, r in _noted(store) if t == "versions"] == [v.id]  # the second write indexed the first's
    reader = Store(toy.db, readonly=True)
    for s in (store, reader):
        assert [(h.episode, h.field) for h in search(s, "Quenbridge")] == [(ep.id, "task")]
        assert [(h.version, h.field) for h in search(s, "third")] == [(v.id, "name")]
        assert [h.episode for h in search(s, "Velmora")] != []  # indexed rows are still found
    store.versions.update(v.id, name="renamed while noted")  # (this transaction writes the index)
    assert _noted(store) == []
    assert search(reader, "third") == [] and [h.version for h in search(reader, "renamed")] == [v.id]
    with writer.attached(store):  # (a new writer: its count starts again)
        _, w = writer.write(store, lambda: store.episodes.create(task, config, {}, version_name="fourth"))
    assert ("versions", w.id) in _noted(store) and [h.version for h in search(reader, "fourth")] == [w.id]
    store.db.execute("delete from versions where id = ?", [w.id])  # deleted while noted
    assert ("versions", w.id) not in _noted(store) and search(reader, "fourth") == []
    _index_is_true(store)
    reader.close()
