"""Importing transcripts as the notebooks and our own `export --format prompt` write them:
the final observation keeps its newline (a resume replays and compares it), a transcript
that ends in an accepted Finish is finished, and the gold answer comes from the dataset
(`import --source`), never from the model's own Finish."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import pytest

from react_editor.main import main
from sessions.store import Store
from tests.experiment_agents import wiki_agent
from trajectory import formats

ROOT = Path(__file__).resolve().parents[2]
HOTPOT = [
    json.loads(line)
    for line in (ROOT / "envs/wikipedia/corpus/hotpotqa.jsonl").read_text().splitlines()
    if line.strip()
]
REACT_REPO = ROOT.parent / "shared" / "reference" / "react-repo"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return code, (json.loads(lines[-1]) if lines and lines[-1].startswith(("{", "[")) else None), err


@pytest.mark.parametrize("notebook", [False, True])
def test_export_prompt_import_resume_round_trip(tmp_path, capsys, scripted_llm, notebook):
    """The project's own `export --format prompt` and a notebook's saved `traj` (which ends
    "Observation i: Episode finished, reward = 0\\n\\n") -> import -> resume: the notebook
    form used to stop with "replay mismatch" (the import dropped the observation's newline)."""
    row = HOTPOT[0]
    scripted_llm.set_responder(wiki_agent({row["question"]: "a wrong answer"}, react_steps=2))
    db = tmp_path / "x.db"
    code, ran, err = cli(
        capsys,
        "run",
        "--env",
        "hotpotqa",
        "--task",
        row["id"],
        "--model",
        "m",
        "--base-url",
        scripted_llm.base_url,
        "--db",
        db,
        "--json",
    )
    assert code == 0 and ran["done"], err
    out = tmp_path / "t.txt"
    if notebook:
        with closing(Store(db)) as store:
            ep = store.episodes.get(ran["episode"])
            out.write_text(formats.render_wiki(ep.task.text, store.versions.steps(ran["version"])))
        assert out.read_text().endswith("Episode finished, reward = 0\n\n")
    else:
        assert main(["export", str(ran["episode"]), "--format", "prompt", "--out", str(out), "--db", str(db)]) == 0
    capsys.readouterr()
    code, rep, err = cli(capsys, "import", out, "--format", "prompt", "--db", db, "--json")
    assert code == 0, err
    (ep_id,) = rep["episodes"]
    with closing(Store(db)) as store:
        ep = store.episodes.get(ep_id)
        v = store.versions.get(ep.current_version)
        last = store.versions.steps(v.id)[-1]
        assert last.done and v.outcome.done
        if notebook:
            assert last.observation == "Episode finished, reward = 0\n" and v.outcome.success is False
        assert ep.task.gold is None  # not "a wrong answer", the model's own Finish
    code, res, err = cli(
        capsys, "resume", ep_id, "--db", db, "--json", "--model", "m", "--base-url", scripted_llm.base_url
    )
    assert code == 0 and "mismatch" not in err, err
    assert res["done"]


def test_import_takes_the_gold_answer_from_the_dataset(tmp_path, capsys):
    row = HOTPOT[1]
    text = (
        f"Question: {row['question']}\nThought 1: I know it.\nAction 1: Finish[nonsense]\n"
        "Observation 1: Episode finished, reward = 0\n\n"
    )
    src = tmp_path / "t.txt"
    src.write_text(text)
    db = tmp_path / "x.db"
    code, rep, err = cli(
        capsys, "import", src, "--format", "prompt", "--env", "hotpotqa", "--source", "builtin", "--db", db, "--json"
    )
    assert code == 0, err
    with closing(Store(db)) as store:
        ep = store.episodes.get(rep["episodes"][0])
        assert ep.task.gold == row["answer"] and ep.task.type == row.get("type")
        assert store.versions.get(ep.current_version).outcome.done
    code, rep, err = cli(capsys, "import", src, "--format", "prompt", "--env", "hotpotqa", "--db", db, "--json")
    with closing(Store(db)) as store:
        assert store.episodes.get(rep["episodes"][0]).task.gold is None


@pytest.mark.parametrize(
    "action,done", [("Finish[yes]", True), ("finish[yes]", True), ("\n\nFinish[yes]", False), ("Search[yes]", False)]
)
def test_a_transcript_that_ends_in_finish_is_finished(action, done):
    step = formats.finished_step(formats.Step(index=1, action=action, observation="Episode finished, reward = 1\n"))
    assert step.done is done and (step.reward == 1.0) is done


@pytest.mark.skipif(
    not (REACT_REPO / "data" / "hotpot_dev_v1_simplified.json").exists(),
    reason="the ReAct release (../shared/reference/react-repo) is not here",
)
def test_gold_from_the_react_release(tmp_path, capsys, monkeypatch):
    """With the release's data files, a transcript of its dev question gets the dataset's answer."""
    monkeypatch.setenv("REACT_EDITOR_DATA", str(tmp_path / "data"))
    (tmp_path / "data" / "react").mkdir(parents=True)
    (tmp_path / "data" / "react" / "data").symlink_to(REACT_REPO / "data")
    first = json.loads((REACT_REPO / "data" / "hotpot_dev_v1_simplified.json").read_text())[0]
    src = tmp_path / "t.txt"
    src.write_text(
        f"Question: {first['question']}\nThought 1: x\nAction 1: Finish[surely not]\n"
        "Observation 1: Episode finished, reward = 0\n\n"
    )
    code, rep, err = cli(
        capsys,
        "import",
        src,
        "--format",
        "prompt",
        "--env",
        "hotpotqa",
        "--source",
        "react",
        "--db",
        tmp_path / "x.db",
        "--json",
    )
    assert code == 0, err
    with closing(Store(tmp_path / "x.db")) as store:
        assert store.episodes.get(rep["episodes"][0]).task.gold == first["answer"]
