"""Test-set leakage (issue 28 item 3): an exemplar set holding a trajectory of an evaluated
task is named at launch (stderr), recorded on the experiment, and `experiment compare`
reports the task as `leaked` and leaves it out of the paired test unless --include-leaked."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

from agent import leakage
from react_editor.main import main
from sessions import experiments
from sessions.store import Store
from tests.experiment_agents import wiki_agent

ROOT = Path(__file__).resolve().parents[2]
HOTPOT = [
    json.loads(line)
    for line in (ROOT / "envs/wikipedia/corpus/hotpotqa.jsonl").read_text().splitlines()
    if line.strip()
]


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return code, (json.loads(lines[-1]) if lines else None), err


def _base_and_set(tmp_path, capsys, llm):
    """Experiment A over 4 tasks, and set `fixed` holding A's episode of the first task."""
    monkey_db = tmp_path / "x.db"
    llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT[:1]}))
    code, a, err = cli(
        capsys,
        "experiment",
        "run",
        "--env",
        "hotpotqa",
        "--limit",
        "4",
        "--name",
        "A",
        "--model",
        "m",
        "--base-url",
        llm.base_url,
        "--db",
        monkey_db,
        "--json",
    )
    assert code in (0, 1), err
    with closing(Store(monkey_db)) as store:
        first = experiments.items(store, a["experiment"])[0]
    assert main(["exemplars", "create", "fixed", "--env", "hotpotqa", "--db", str(monkey_db)]) == 0
    assert main(["exemplars", "add", "fixed", str(first.version_id), "--db", str(monkey_db)]) == 0
    capsys.readouterr()
    return monkey_db, a


def test_run_warns_records_and_compare_leaves_leaked_tasks_out(tmp_path, capsys, scripted_llm, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    db, a = _base_and_set(tmp_path, capsys, scripted_llm)
    scripted_llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT[:4]}))
    code, b, err = cli(
        capsys,
        "experiment",
        "run",
        "--env",
        "hotpotqa",
        "--limit",
        "4",
        "--name",
        "B",
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--exemplars",
        "fixed",
        "--db",
        db,
        "--json",
    )
    assert code == 0, err
    assert "warning" in err and HOTPOT[0]["id"] in err and HOTPOT[1]["id"] not in err.split("warning")[1].split("\n")[0]
    with closing(Store(db)) as store:
        assert experiments.get(store, b["experiment"]).params["leaked"] == [f"hotpotqa:{HOTPOT[0]['id']}"]
        assert [
            t.id
            for t in leakage.leaked_tasks(store, "fixed", [it.task for it in experiments.items(store, a["experiment"])])
        ] == [HOTPOT[0]["id"]]
    code, c, _ = cli(capsys, "experiment", "compare", "A", "B", "--db", db, "--json")
    assert code == 0 and c["leaked"] == [HOTPOT[0]["id"]] and c["common"] == 3 and not c["leaked_included"]
    code, c, _ = cli(capsys, "experiment", "compare", "A", "B", "--db", db, "--json", "--include-leaked")
    assert code == 0 and c["leaked"] == [HOTPOT[0]["id"]] and c["common"] == 4


def test_compare_text_names_leaked_tasks(tmp_path, capsys, scripted_llm, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    db, a = _base_and_set(tmp_path, capsys, scripted_llm)
    code, b, err = cli(capsys, "experiment", "rerun", "A", "--exemplars", "fixed", "--name", "B", "--db", db, "--json")
    assert code == 0 and "warning" in err, err
    assert main(["experiment", "compare", "A", "B", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "leaked 1 task(s)" in out and HOTPOT[0]["id"] in out and "left out of the paired test" in out


def test_rerun_leaving_out_leaked_tasks_runs_the_rest_and_names_its_source(tmp_path, capsys, scripted_llm, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    db, a = _base_and_set(tmp_path, capsys, scripted_llm)
    code, b, err = cli(
        capsys, "experiment", "rerun", "A", "--exemplars", "fixed", "--leave-out-leaked", "--db", db, "--json"
    )
    assert code == 0, err
    assert "left out" in err and b["episodes"] == 3
    with closing(Store(db)) as store:
        exp = experiments.get(store, b["experiment"])
        assert exp.params["rerun_of"] == a["experiment"] and exp.params["leaked"] == []
        assert exp.config.exemplar_set == "fixed" and exp.config.model == "m"
        assert [it.task.id for it in experiments.items(store, exp.id)] == [r["id"] for r in HOTPOT[1:4]]
