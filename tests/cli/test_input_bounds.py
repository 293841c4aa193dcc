"""Inputs that hang or mislead: FIFOs, non-UTF-8 task lists, empty selections and model
names, duplicate experiment names, settings a game cannot start with. Each is one line,
and nothing is written."""

from __future__ import annotations

import json
import os
from contextlib import closing

import pytest

from sessions import experiments
from sessions.store import Store
from tests.cli_helpers import cli


@pytest.mark.parametrize("what", ["import", "tasks"])
def test_a_fifo_is_refused_not_waited_on(tmp_path, capsys, what):
    """(In this process: were the FIFO opened, the per-test timeout would end the wait.)"""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    db = str(tmp_path / "x.db")
    if what == "import":
        code, _, err = cli(capsys, "import", str(fifo), "--db", db)
    else:
        code, _, err = cli(
            capsys,
            "experiment",
            "run",
            "--env",
            "hotpotqa",
            "--tasks",
            f"@{fifo}",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--db",
            db,
        )
    assert code == 2 and err.count("\n") == 1 and "not a regular file" in err, err


def _experiment(capsys, db, *extra: str) -> tuple[int, str]:
    code, _, err = cli(
        capsys,
        "experiment",
        "run",
        "--env",
        "hotpotqa",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--db",
        db,
        *extra,
    )
    return code, err


def _nothing_written(db) -> None:
    if os.path.exists(db):
        with closing(Store(db)) as store:
            assert experiments.list_all(store) == [] and store.episodes.ids() == []


def test_a_task_list_that_is_not_utf8_is_one_line(tmp_path, capsys):
    bad = tmp_path / "ids.txt"
    bad.write_bytes(b"hp-001\n\xff\xfe\x00bad\n")
    db = str(tmp_path / "x.db")
    code, err = _experiment(capsys, db, "--tasks", f"@{bad}")
    assert code == 2 and err.count("\n") == 1 and "not UTF-8" in err, err
    _nothing_written(db)


@pytest.mark.parametrize(
    "content", ["hp-001\ndaemon:$6$Qz9hashQz9:19000:0:99999:7:::\n", '["hp-001", "PASSWORD=hunter2"]']
)
def test_a_task_list_error_never_echoes_the_file(tmp_path, capsys, content):
    """Issue 26 item 18: `--tasks @/etc/shadow` printed the file's lines in its error."""
    bad = tmp_path / "ids.txt"
    bad.write_text(content, encoding="utf-8")
    db = str(tmp_path / "x.db")
    code, err = _experiment(capsys, db, "--tasks", f"@{bad}")
    assert code == 2 and err.count("\n") == 1 and "entry 2 of task list" in err, err
    assert "Qz9hashQz9" not in err and "hunter2" not in err and "daemon" not in err, err
    _nothing_written(db)


def test_an_empty_task_selection_is_refused(tmp_path, capsys):
    db = str(tmp_path / "x.db")
    code, err = _experiment(capsys, db, "--tasks", "")
    assert code == 2 and err.count("\n") == 1 and "empty" in err, err
    _nothing_written(db)


@pytest.mark.parametrize("model", ["", "   "])
def test_a_blank_model_name_writes_nothing(toy, capsys, model):
    db = str(toy.db)
    code, _, err = cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--model", model, "--db", db)
    assert code == 2 and err.count("\n") == 1 and "model name is empty" in err, err
    assert toy.store.episodes.ids() == []
    code, err = _experiment(capsys, db, "--model", model, "--tasks", "toy-1")
    assert code == 2 and "model name is empty" in err, err


def test_a_duplicate_experiment_name_is_one_clear_line(tmp_path, scripted_llm, capsys):
    from tests.cli_helpers import run_args

    db = tmp_path / "x.db"
    scripted_llm.set_default("Thought 1: x\nAction 1: Finish[yes]")
    base = [str(a) for a in run_args(scripted_llm, db, "--env", "hotpotqa", "--tasks", "hp-001", "--name", "mine")]
    assert cli(capsys, *base)[0] == 0
    code, _, err = cli(capsys, *base)
    assert code == 2 and err.count("\n") == 1 and "an experiment named 'mine' already exists" in err, err
    assert "constraint" not in err.lower()


def test_settings_a_game_cannot_start_with_write_nothing(toy, capsys, monkeypatch):
    """A game loaded with a wording its grammar lacks fails inside the environment (the
    official json 2.1.1 games have no `help` for alfworld-0.4): one line, no empty episode."""
    from tests.toy_envs import ToyRoom

    real = ToyRoom.reset

    def reset(self, task):
        if self.options.get("wording") == "alfworld-0.4":
            raise KeyError("help")
        return real(self, task)

    monkeypatch.setattr(ToyRoom, "reset", reset)
    db = str(toy.db)
    code, _, err = cli(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--wording",
        "alfworld-0.4",
        "--base-url",
        toy.llm.base_url,
        "--db",
        db,
    )
    assert code == 2 and err.count("\n") == 1 and "KeyError" in err and "help" in err, err
    assert toy.store.episodes.ids() == [] and toy.llm.requests == []


def _exported(toy, capsys, tmp_path):
    from tests.engine_scripts import ROOM_SCRIPT

    db = str(toy.db)
    toy.llm.push(*ROOM_SCRIPT[:2])
    assert (
        cli(
            capsys,
            "run",
            "--env",
            "alfworld",
            "--task",
            "toy/room-1",
            "--base-url",
            toy.llm.base_url,
            "--max-steps",
            "2",
            "--db",
            db,
        )[0]
        == 0
    )
    out = tmp_path / "ep.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(out), "--db", db)[0] == 0
    return out


def test_importing_the_same_file_twice_adds_nothing_the_second_time(toy, capsys, tmp_path):
    import json

    out = _exported(toy, capsys, tmp_path)
    db2 = str(tmp_path / "second.db")
    code, first, _ = cli(capsys, "import", str(out), "--db", db2, "--json")
    assert code == 0 and json.loads(first)["episodes"] == [1]
    code, again, err = cli(capsys, "import", str(out), "--db", db2, "--json")
    assert code == 0 and json.loads(again)["episodes"] == [] and json.loads(again)["already_present"] == [1]
    assert "already here" in err and "--as-new" in err
    with closing(Store(db2)) as store:
        assert store.episodes.ids() == [1]
    code, copied, _ = cli(capsys, "import", str(out), "--db", db2, "--json", "--as-new")
    assert code == 0 and json.loads(copied)["episodes"] == [2]
    # the mark is this database's state: an export of the imported episode does not carry it
    back = tmp_path / "back.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(back), "--db", db2)[0] == 0
    assert "import_digest" not in back.read_text()


@pytest.mark.parametrize("field", ["thought", "action"])
def test_imported_text_obeys_the_20000_character_limit(toy, capsys, tmp_path, field):
    import json

    out = _exported(toy, capsys, tmp_path)
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    recs[0]["steps"][-1][field] = "x" * 20_001
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    db2 = str(tmp_path / "second.db")
    code, _, err = cli(capsys, "import", str(out), "--db", db2)
    assert code == 2 and err.count("\n") == 1 and "20,000" in err and field in err, err
    with closing(Store(db2)) as store:
        assert store.episodes.ids() == []


def test_a_write_lock_held_past_the_timeout_keeps_the_paid_answer(toy, capsys, monkeypatch):
    """The model answered, then the database stayed locked: exit 2 with one line, and the
    answer is kept - the next attempt is answered from it without paying again."""
    import sqlite3

    import sessions.store
    from tests.engine_scripts import ROOM_SCRIPT

    db = str(toy.db)
    assert (
        cli(
            capsys,
            "run",
            "--env",
            "alfworld",
            "--task",
            "toy/room-1",
            "--base-url",
            toy.llm.base_url,
            "--human",
            "--db",
            db,
        )[0]
        == 0
    )
    toy.llm.push(ROOM_SCRIPT[1])
    monkeypatch.setattr(sessions.store, "LOCK_TIMEOUT_S", 0.2)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("begin immediate")  # another program holds the write lock
    try:
        code, out, err = cli(capsys, "step", "1", "--db", db)
    finally:
        other.execute("rollback")
        other.close()
    assert code == 2 and err.count("\n") == 1 and "locked" in err and "kept" in err, err
    assert len(toy.llm.completion_requests) == 1
    code, out, err = cli(capsys, "resume", "1", "--db", db, "--json", "--max-steps", "1")
    assert code == 0, err
    assert len(toy.llm.completion_requests) == 1  # answered from the kept call, not paid again
    shown = json.loads(cli(capsys, "show", "1", "--db", db, "--json")[1])
    assert [s["action"] for s in shown] == ["go to cabinet 1"]
    with closing(Store(db)) as store:
        assert len(store.calls.of_episode(1)) == 2  # the paid call and its cached answer, both recorded


def test_kept_answers_are_given_back_when_recording_them_fails(toy, monkeypatch):
    """A drainer that fails to record the kept answers gives them back to the pending file,
    even when another blocked writer started a new one meanwhile: no answer is stranded."""
    from sessions.store import StoreError
    from tests.engine_scripts import cfg
    from tests.toy_envs import ROOM_TASK
    from trajectory.records import ModelCall

    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    store = toy.store
    first = ModelCall(model="m", api_style="completions", prompt_hash="p1", prompt_chars=2, completion="go to desk 1")
    second = ModelCall(model="m", api_style="completions", prompt_hash="p2", prompt_chars=2, completion="go to bed 1")
    assert store.calls.keep_pending(ep.id, [first])
    real = store.calls.insert

    def blocked(call, eid):
        store.calls.keep_pending(ep.id, [second])  # another writer, blocked too, starts a new file
        raise StoreError("database is locked")

    monkeypatch.setattr(store.calls, "insert", blocked)
    with pytest.raises(StoreError):
        store.calls.record_pending()
    pending = store.calls.pending_file
    assert sorted(p.name for p in pending.parent.iterdir() if p.name.startswith(pending.name)) == [pending.name]
    assert {json.loads(x)["call"]["prompt_hash"] for x in pending.read_text().splitlines()} == {"p1", "p2"}
    monkeypatch.setattr(store.calls, "insert", real)
    assert store.calls.record_pending() == 2 and not pending.exists()


def _rows(db) -> dict[str, int]:
    with closing(Store(db)) as store:
        return {
            t: store.db.execute(f"select count(*) from {t}").fetchone()[0]
            for t in ("episodes", "versions", "steps", "model_calls", "experiments", "rollout_groups", "suggestions")
        }


@pytest.mark.parametrize("value", ["1e308", "2.5", "-0.5"])
def test_a_temperature_outside_0_to_2_is_refused_and_never_sent(toy, capsys, value):
    """Issue 39 item 17: `--temperature 1e308` was accepted, stored and sent to the model."""
    from tests.engine_scripts import ROOM_SCRIPT
    from tests.suggest_agents import fail_episode

    db = str(toy.db)
    fail_episode(toy)  # episode 1: a failed version to resume, resample and suggest fixes for
    before, sent = _rows(db), len(toy.llm.requests)
    run = ("run", "--env", "alfworld", "--task", "toy/room-1", "--base-url", toy.llm.base_url)
    for argv in (
        run,
        ("experiment", "run", "--env", "hotpotqa", "--tasks", "toy-1", "--base-url", toy.llm.base_url),
        ("resume", "1"),
        ("step", "1"),
        ("resample", "1", "--step", "2", "--n", "2"),
        ("whatif", "1", "--step", "2", "--insert-thought", "x", "--n", "2"),
        ("suggest", "1", "--verify", "1"),
    ):
        code, out, err = cli(capsys, *argv, "--temperature", value, "--db", db)
        assert code == 2 and err.count("\n") == 1 and out == "", (argv, err)
        assert "temperature" in err and "between 0 and 2" in err, (argv, err)
        assert _rows(db) == before and len(toy.llm.requests) == sent, argv
    toy.llm.push(*ROOM_SCRIPT)
    assert cli(capsys, *run, "--temperature", "2", "--max-steps", "1", "--db", db)[0] == 0  # 2 is the API's maximum


@pytest.mark.parametrize(
    "argv",
    [
        ("run", "--env", "alfworld", "--task", "toy/room-1", "--human"),
        ("episodes",),
        ("import", "{file}"),
        ("exemplars", "create", "mine", "--env", "alfworld"),
        ("jobs",),
    ],
)
def test_a_database_in_a_missing_folder_is_refused_as_export_refuses_it(toy, capsys, tmp_path, argv):
    """Issue 39 item 17: `--db typo/x.db` made the folders silently (export's --out refuses
    the same path): one line, exit 2, no folder made."""
    seed = tmp_path / "seed.jsonl"
    seed.write_text("{}\n")
    db = tmp_path / "typo" / "deeper" / "x.db"
    code, out, err = cli(capsys, *(a.format(file=seed) for a in argv), "--db", str(db))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err == f"error: database '{db}': no folder '{db.parent}'; create it first\n"
    assert not (tmp_path / "typo").exists()
    code, _, err = cli(capsys, "export", "1", "-f", "jsonl", "--out", str(db.parent / "x.jsonl"), "--db", str(toy.db))
    assert code == 2 and "no folder" in err and "create it first" in err, err  # the same words as export


def test_the_app_refuses_a_database_in_a_missing_folder(monkeypatch, tmp_path, capsys):
    from react_editor import launch

    started = []
    monkeypatch.setattr(launch, "serve", lambda argv, env: started.append(env) or 0)
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "app", "--no-browser", "--db", str(tmp_path / "typo" / "x.db"))
    assert code == 2 and err.count("\n") == 1 and "no folder" in err and started == [], err
    assert not (tmp_path / "typo").exists()
