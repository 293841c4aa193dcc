"""`react-editor data react`: the ReAct release's prompt and data files, downloaded into the data
folder (from a local HTTP server on 127.0.0.1), where the task sets and importers find them."""

from __future__ import annotations

import json

import pytest

from envs.base import EnvError
from envs.registry import family
from envs.wikipedia import datasets
from react_editor.main import main
from tests.wiki_rows import FEVER_ROWS, HOTPOT_OFFICIAL

PROMPTS = {
    "alfworld_3prompts.json": {"react_put_0": "You are in the middle of a room. ...\n> think: To solve the task, ..."},
    "fever.json": {"webthink_simple3": "Determine if there is Observation that SUPPORTS or REFUTES a Claim ..."},
    "prompts_naive.json": {"webthink_simple6": "Question: What is the elevation range ...?\nThought 1: ..."},
}


def _serve_release(root):
    (root / "data").mkdir()
    (root / "prompts").mkdir()
    (root / "data" / "hotpot_dev_v1_simplified.json").write_text(
        json.dumps([{"question": q["question"], "answer": q["answer"], "type": q["type"]} for q in HOTPOT_OFFICIAL])
    )
    (root / "data" / "paper_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in FEVER_ROWS))
    for name, content in PROMPTS.items():
        (root / "prompts" / name).write_text(json.dumps(content))


def test_data_react_downloads_the_release_into_the_data_folder(file_server, tmp_path, monkeypatch, capsys):
    root, url = file_server
    _serve_release(root)
    monkeypatch.setenv("REACT_EDITOR_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("REACT_DATA_DIR", raising=False)
    with pytest.raises(EnvError, match="react-editor data react"):
        family("fever").list_tasks("react")
    assert main(["data", "react", "--url", url, "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    here = tmp_path / "data" / "react"
    assert out == {"dataset": "react", "path": str(here)}
    for name, content in PROMPTS.items():
        assert json.loads((here / "prompts" / name).read_text()) == content
    # the task sets and the prompt reader find them without any path
    hp = family("hotpotqa").list_tasks("react")
    assert [(t.id, t.gold) for t in hp] == [("0", "yes"), ("1", "Chief of Protocol")]
    assert family("fever").list_tasks("react")[0].id == "91198"
    from envs.wikipedia.exemplars import reference_prompt

    assert reference_prompt("fever", "react") == PROMPTS["fever.json"]["webthink_simple3"]
    # present already: nothing fetched again, even from a dead server
    assert datasets.download_react(base_url="http://127.0.0.1:9/", progress=lambda m: None) == here


def test_a_broken_release_file_is_refused_and_nothing_half_written_stays(file_server, tmp_path):
    root, url = file_server
    _serve_release(root)
    (root / "prompts" / "fever.json").write_text("<html>rate limited</html>")
    with pytest.raises(EnvError, match="fever.json is not valid"):
        datasets.download_react(tmp_path / "r", base_url=url, progress=lambda m: None)
    assert not (tmp_path / "r" / "prompts" / "fever.json").exists()
    assert not list((tmp_path / "r").rglob("*.part"))


def test_readme_figures_match_what_ships():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    games = root / "envs" / "alfworld" / "games" / "builtin"
    shipped = {split: len(list((games / split).rglob("game.tw-pddl"))) for split in ("sample", "exemplars")}
    assert int(re.search(r"(\d+) built-in games", readme).group(1)) == shipped["sample"]
    assert int(re.search(r"(\d+) exemplar games", readme).group(1)) == shipped["exemplars"]
    assert "not ALFWorld's games" in readme and not (root / "envs" / "alfworld" / "games" / "json_2.1.1").exists()
    assert "../shared/reference" not in readme and "react-editor data react" in readme
