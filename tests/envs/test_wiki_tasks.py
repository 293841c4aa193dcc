"""Task sets (built-in, ReAct release, official), custom tasks, the registered families,
make_env options, and dataset downloads from a local HTTP server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.base import EnvError
from envs.registry import family
from envs.wikipedia import datasets
from tests.mediawiki_server import SAMPLE_HOTPOT, write_corpus
from tests.wiki_rows import FEVER_ROWS, HOTPOT_OFFICIAL

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "reference" / "react-repo" / "data"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_families_registered_with_step_limits():
    hp, fv = family("hotpotqa"), family("fever")
    assert (hp.kind, hp.default_max_steps) == ("hotpotqa", 7)
    assert (fv.kind, fv.default_max_steps) == ("fever", 7)


def test_builtin_tasks_from_corpus(corpus):
    hp = family("hotpotqa").list_tasks("builtin", corpus_dir=corpus)
    assert [t.id for t in hp] == ["t-001", "t-002"]
    assert hp[0].text == "Question: " + SAMPLE_HOTPOT[0]["question"]
    assert (hp[0].gold, hp[0].type, hp[0].env, hp[0].source) == ("1,800 to 7,000 ft", "bridge", "hotpotqa", "builtin")
    fv = family("fever").list_tasks("builtin", corpus_dir=corpus)
    assert fv[1].text == "Claim: AT&T Tower has 12 floors." and fv[1].gold == fv[1].type == "REFUTES"
    assert family("fever").get_task("f-003", "builtin", corpus_dir=corpus).gold == "NOT ENOUGH INFO"
    with pytest.raises(EnvError, match="no fever task 'nope'"):
        family("fever").get_task("nope", "builtin", corpus_dir=corpus)


def test_react_files_from_a_path(tmp_path):
    (tmp_path / "hotpot_dev_v1_simplified.json").write_text(
        json.dumps([{"question": q["question"], "answer": q["answer"], "type": q["type"]} for q in HOTPOT_OFFICIAL])
    )
    (tmp_path / "paper_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in FEVER_ROWS))
    hp = family("hotpotqa").list_tasks("react", path=tmp_path)
    assert [(t.id, t.type, t.gold) for t in hp] == [("0", "comparison", "yes"), ("1", "bridge", "Chief of Protocol")]
    assert hp[0].text == "Question: Were Scott Derrickson and Ed Wood of the same nationality?"
    fv = family("fever").list_tasks("react", path=tmp_path)
    assert [(t.id, t.gold, t.text) for t in fv][1] == ("194462", "REFUTES", "Claim: Tilda Swinton is a vegan.")


def test_react_env_var_and_missing_file(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_DATA_DIR", str(tmp_path))
    with pytest.raises(EnvError, match=str(tmp_path / "paper_dev.jsonl")):
        family("fever").list_tasks("react")
    (tmp_path / "paper_dev.jsonl").write_text("{broken\n")
    with pytest.raises(EnvError, match="not valid JSON"):
        family("fever").list_tasks("react")


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="ReAct reference data not available")
def test_react_release_files_when_present():
    hp = family("hotpotqa").list_tasks("react", path=SHARED_DATA)
    assert len(hp) == 7405 and hp[0].text.startswith("Question: Were Scott Derrickson")
    assert hp[0].gold == "yes" and hp[0].type == "comparison"
    fv = family("fever").list_tasks("react", path=SHARED_DATA, limit=3)
    assert fv[0].id == "91198" and fv[0].gold == "NOT ENOUGH INFO"


def test_official_files_and_missing_message(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DATA", str(tmp_path))
    with pytest.raises(EnvError, match=r"react-editor data hotpotqa"):
        family("hotpotqa").list_tasks("official")
    (tmp_path / "hotpotqa").mkdir()
    (tmp_path / "hotpotqa" / "hotpot_dev_distractor_v1.json").write_text(json.dumps(HOTPOT_OFFICIAL))
    hp = family("hotpotqa").list_tasks("official")
    assert hp[0].id == "5a8b57f25542995d1e6f1371" and hp[0].gold == "yes" and hp[0].source == "official"
    assert hp[0].data["supporting"] == ["Ed Wood", "Scott Derrickson"]
    (tmp_path / "fever").mkdir()
    (tmp_path / "fever" / "shared_task_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in FEVER_ROWS))
    assert family("fever").get_task("194462", "official").text == "Claim: Tilda Swinton is a vegan."


def test_unknown_source():
    with pytest.raises(EnvError, match="unknown task source"):
        family("hotpotqa").list_tasks("somewhere")


def test_custom_tasks():
    t = family("hotpotqa").custom_task(question="  Who   wrote it? ", answer="Me")
    assert t.text == "Question: Who wrote it?" and t.gold == "Me" and t.id.startswith("custom-")
    assert family("hotpotqa").custom_task(question="Q?").gold is None
    f = family("fever").custom_task(question="Claim: Sky is blue.", answer="supports")
    assert f.text == "Claim: Sky is blue." and f.gold == "SUPPORTS" and f.type == "SUPPORTS"
    assert family("fever").custom_task(claim="X.", label="REFUTES").gold == "REFUTES"
    with pytest.raises(EnvError, match="FEVER label"):
        family("fever").custom_task(question="X.", answer="maybe")
    with pytest.raises(EnvError, match="needs a question"):
        family("hotpotqa").custom_task(question="  ")


def test_make_env_builtin_zim_and_errors(corpus, cache, tmp_path):
    fam = family("hotpotqa")
    task = fam.list_tasks("builtin", corpus_dir=corpus)[0]
    env = fam.make_env(task, {"corpus_dir": corpus}, None)
    assert env.reset(task) == task.text
    assert env.step("Search[Colorado orogeny]").observation.startswith("The Colorado orogeny")
    zims = list(cache.glob("builtin-wiki-*.zim"))
    assert len(zims) == 1
    env2 = fam.make_env(task, {"wiki": f"zim:{zims[0]}"}, None)
    assert env2.step("Search[Colorado orogeny]").observation.startswith("The Colorado orogeny")
    with pytest.raises(EnvError, match="missing.zim"):
        fam.make_env(task, {"wiki": f"zim:{tmp_path / 'missing.zim'}"}, None)
    with pytest.raises(EnvError, match="unknown wiki backend"):
        fam.make_env(task, {"wiki": "ftp"}, None)


def test_builtin_zim_rebuilds_when_corpus_changes(tmp_path, cache):
    from envs.wikipedia.builtin import builtin_zim

    d = write_corpus(tmp_path / "c")
    first = builtin_zim(d)
    assert builtin_zim(d) == first
    with (d / "articles.jsonl").open("a") as f:
        f.write(json.dumps({"title": "New page", "redirects": [], "body": ["A brand new page appears here."]}) + "\n")
    second = builtin_zim(d)
    assert second != first and second.is_file()


# -- downloads ------------------------------------------------------------------------------


def test_download_hotpotqa_and_fever(file_server, tmp_path, monkeypatch):
    root, url = file_server
    (root / "hotpot_dev_distractor_v1.json").write_text(json.dumps(HOTPOT_OFFICIAL))
    (root / "paper_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in FEVER_ROWS))
    monkeypatch.setenv("REACT_EDITOR_DATA", str(tmp_path / "data"))
    lines = []
    p = datasets.download("hotpotqa", base_url=url, progress=lines.append)
    assert p == tmp_path / "data" / "hotpotqa" / "hotpot_dev_distractor_v1.json"
    assert any("saved 2 records" in line for line in lines)
    assert family("hotpotqa").list_tasks("official")[1].gold == "Chief of Protocol"
    f = datasets.download("fever", dest=tmp_path / "fv", base_url=url, progress=lines.append)
    assert f.name == "paper_dev.jsonl"
    assert family("fever").list_tasks("official", path=tmp_path / "fv")[0].id == "91198"
    # present already: no second download
    assert datasets.download("hotpotqa", base_url="http://127.0.0.1:9/", progress=lines.append) == p


def test_download_failures_leave_nothing(file_server, tmp_path):
    root, url = file_server
    with pytest.raises(EnvError, match="HTTP 404"):
        datasets.download("fever", dest=tmp_path / "x", base_url=url, progress=lambda m: None)
    (root / "paper_dev.jsonl").write_text("<html>not data</html>")
    with pytest.raises(EnvError, match="not valid"):
        datasets.download("fever", dest=tmp_path / "x", base_url=url, progress=lambda m: None)
    assert list((tmp_path / "x").iterdir()) == []
    with pytest.raises(EnvError, match="unknown dataset"):
        datasets.download("squad")


@pytest.mark.skipif(
    not (Path(__file__).resolve().parents[2] / "envs/wikipedia/corpus/articles.jsonl").is_file(),
    reason="built-in corpus not written yet",
)
def test_builtin_corpus_tasks_are_reachable_on_the_builtin_wiki(cache):
    """Every supporting title of every built-in task opens a page on the default backend."""
    for kind in ("hotpotqa", "fever"):
        fam = family(kind)
        tasks_ = fam.list_tasks()
        assert tasks_ and all(t.text.startswith("Question: " if kind == "hotpotqa" else "Claim: ") for t in tasks_)
        env = fam.make_env(tasks_[0], {}, None)
        for t in tasks_:
            env.reset(t)
            for title in t.data["supporting"]:
                obs = env.step(f"Search[{title}]").observation
                assert not obs.startswith("Could not find"), (t.id, title, obs[:80])


def test_a_task_file_rewritten_within_the_same_mtime_is_read_again(tmp_path):
    """Issue 26 item 20: the file's stamp (size and mtime) is what the task cache checks, so
    a file rewritten in the same clock tick is not served from the old parse."""
    import os

    f = tmp_path / "paper_dev.jsonl"
    f.write_text(json.dumps(FEVER_ROWS[0]) + "\n")
    stamp = f.stat().st_mtime_ns
    assert [t.id for t in family("fever").list_tasks("react", path=tmp_path)] == ["91198"]
    f.write_text("".join(json.dumps(r) + "\n" for r in FEVER_ROWS))
    os.utime(f, ns=(stamp, stamp))
    assert [t.id for t in family("fever").list_tasks("react", path=tmp_path)] == ["91198", "194462"]
