"""The Export page's training formats (issue 43 item 7): chat-sft, dpo, kto and steps with their
options, the counts written and left out, a preview of the first records as JSON and a table
(never HTML or markdown: a thought here is hostile markup), JSONL or Parquet, and a download -
the bytes of the library's own export. AppTest over a toy ALFWorld-family store with a won run,
a rollout group, two edits and a person's judgment."""

from __future__ import annotations

import io
import json
import zipfile

import datasets
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from agent import rollouts
from sessions.exchange import export
from sessions.exchange.training_options import TrainingOptions
from tests.app_helpers import EVIL, markdownish
from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig

OPENING = " think: To solve the task, I need to find a mug, then put it in table 1. "
WINNING = (
    ("OK.\n>", " go to cabinet 1"),
    ("The cabinet 1 is closed.\n>", " open cabinet 1"),
    ("In it, you see a mug 1.\n>", " take mug 1 from cabinet 1"),
    ("from the cabinet 1.\n>", " go to table 1"),
    ("On the table 1, you see nothing.\n>", " put mug 1 in/on table 1"),
)


def _winner(body: dict) -> str:
    """The toy room's winning path, whatever step the prompt is at."""
    prompt = body["prompt"]
    tail = prompt[prompt.rfind("Here is the task.") :]
    return next((action for obs, action in WINNING if tail.endswith(obs)), OPENING)


def _export_script():
    from app_pages.export import page

    page()


@pytest.fixture
def tree(toy, monkeypatch):
    """v1 won; 2 rollouts from its step 3; v2 and v3 rewrite its opening thought (v2's text is
    hostile markup) and stop there; alice judged v1 better than v2."""
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    toy.llm.set_responder(_winner)
    cfg = AgentConfig(model="scripted-model", base_url=toy.llm.base_url, max_retries=1, timeout_s=5, max_steps=8)
    ep, v1 = toy.engine.start_episode(ROOM_TASK, cfg)
    assert toy.engine.run(v1.id).success
    rollouts.resample(toy.engine, rollouts.Request(v1.id, 3, 2, temperature=0.7), concurrency=1)
    v2 = toy.engine.editor.edit(v1.id, 1, "rewrite_thought", f"I will look for it. {EVIL}", keep_rest=False)
    v3 = toy.engine.editor.edit(v1.id, 1, "rewrite_thought", "Maybe the mug is on the shelf.", keep_rest=False)
    toy.store.judgments.add(v1.id, v2.id, "A", "alice", reason="v1 finishes the task")
    return toy, ep, v1, v2, v3


def _open(fmt: str, **widgets) -> AppTest:
    at = AppTest.from_function(_export_script, default_timeout=30).run()
    assert not at.exception, at.exception
    at.selectbox(key="exp-format").set_value(fmt)
    at.run()
    for key, value in widgets.items():
        _widget(at, key).set_value(value)
    at.run()
    (go,) = [b for b in at.button if b.label == "Prepare export"]
    go.click().run()
    assert not at.exception, at.exception
    return at


def _widget(at, key: str):
    for kind in ("radio", "checkbox", "number_input", "multiselect", "selectbox"):
        found = [w for w in at.get(kind) if getattr(w, "key", None) == key]
        if found:
            return found[0]
    raise KeyError(key)


def _library(toy, fmt: str, **options) -> bytes:
    out = toy.db.parent / f"lib.{fmt}.jsonl"
    export(toy.store, fmt, str(out), options=TrainingOptions(**options))
    return out.read_bytes()


def _no_markup(at) -> None:
    assert not any("<script" in m or "evil" in m for m in markdownish(at))
    assert not any("<script" in h.proto.body for h in at.get("html"))


def test_dpo_options_counts_preview_and_download(tree):
    toy, _ep, _v1, _v2, _v3 = tree
    at = _open("dpo")
    cont = _widget(at, "exp-continuation")
    assert list(cont.options) == ["the one step they differ at", "the rest of each branch"]
    for key in ("exp-implicit", "exp-proven", "exp-min-effect"):
        _widget(at, key)
    data, rep, fmt, name = at.session_state["exp-data"]
    assert fmt == "dpo" and name.endswith(".dpo.jsonl") and rep["output"] == "jsonl"
    assert data == _library(toy, "dpo")  # the library's own bytes
    lines = [json.loads(x) for x in data.decode().splitlines()]
    assert rep["records"] == len(lines) >= 1 and sum(rep["left_out"].values()) >= 1  # v3: no evidence either way
    assert EVIL in json.dumps(lines[:3], ensure_ascii=False)  # the hostile thought is in the preview's records
    shown = [t.value for t in at.text]
    assert any(
        t.startswith(f"dpo: wrote {rep['records']} record") and f"left out {sum(rep['left_out'].values())}" in t
        for t in shown
    ), shown
    (left,) = [d.value for d in at.dataframe if "why" in d.value.columns]
    assert left["left out"].sum() == sum(rep["left_out"].values())
    (preview,) = [d.value for d in at.dataframe if "chosen" in d.value.columns]
    assert {"prompt", "chosen", "rejected"} <= set(preview.columns) and len(preview) == len(lines[:3])
    assert [json.loads(j.proto.body) for j in at.json] == lines[:3]  # each record whole, as JSON
    (dl,) = at.get("download_button")
    assert dl.proto.label == "Download"
    _no_markup(at)


def test_dpo_as_parquet_previews_the_file_it_wrote(tree):
    toy, *_ = tree
    at = _open("dpo", **{"exp-output": "Parquet", "exp-continuation": "step"})
    data, rep, _fmt, name = at.session_state["exp-data"]
    assert data[:4] == b"PAR1" and name.endswith(".dpo.parquet") and rep["output"] == "parquet"
    rows = pq.read_table(io.BytesIO(data)).to_pylist()
    assert len(rows) == rep["records"] and [json.loads(j.proto.body) for j in at.json] == rows[:3]
    jsonl = [json.loads(x) for x in _library(toy, "dpo", continuation="step").decode().splitlines()]
    assert [r["chosen"] for r in rows] == [r["chosen"] for r in jsonl]


def test_dpo_as_a_zipped_datasets_folder_loads_with_its_card(tree, tmp_path, monkeypatch):
    """`export --hf` from the page: a zip of the `datasets` folder and its card, whose records
    `load_from_disk` reads back as the preview shows them."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    toy, *_ = tree
    at = _open("dpo", **{"exp-output": "datasets folder (zip)"})
    data, rep, _fmt, name = at.session_state["exp-data"]
    assert name.endswith(".dpo.zip") and rep["output"] == "hf" and data[:2] == b"PK"
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        z.extractall(tmp_path / "unzipped")
    folder = tmp_path / "unzipped" / "dataset"
    assert "dpo" in (folder / "README.md").read_text("utf-8")  # the dataset card
    rows = datasets.load_from_disk(str(folder)).to_list()
    assert len(rows) == rep["records"] >= 1
    assert [json.loads(j.proto.body) for j in at.json] == json.loads(json.dumps(rows[:3], default=str))
    jsonl = [json.loads(x) for x in _library(toy, "dpo").decode().splitlines()]
    assert [r["chosen"] for r in rows] == [r["chosen"] for r in jsonl]
    (dl,) = at.get("download_button")
    assert dl.proto.label == "Download"
    _no_markup(at)


def test_kto_per_step_steps_and_chat_sft(tree):
    toy, *_ = tree
    at = _open("kto", **{"exp-unit": "step"})
    data, rep, *_ = at.session_state["exp-data"]
    assert data == _library(toy, "kto", unit="step") and rep["records"] >= 1
    (preview,) = [d.value for d in at.dataframe if "label" in d.value.columns]
    assert {"prompt", "completion", "label"} <= set(preview.columns)
    _no_markup(at)
    at = _open("steps")
    data, rep, *_ = at.session_state["exp-data"]
    first = json.loads(data.decode().splitlines()[0])
    assert rep["records"] >= 1 and {"prompt", "completions", "labels", "rates"} <= set(first)
    at = _open("chat-sft")
    data, rep, *_ = at.session_state["exp-data"]
    assert data == _library(toy, "chat-sft") and "messages" in json.loads(data.decode().splitlines()[0])
    _no_markup(at)


def test_an_experiments_tasks_can_be_left_out(tree):
    toy, ep, *_ = tree
    from sessions import experiments

    experiments.create(
        toy.store, env=ep.task.env, method="react", config=AgentConfig(model="m"), tasks=[ep.task], name="heldout"
    )
    at = _open("kto", **{"exp-exclude": ["heldout"]})
    _data, rep, *_ = at.session_state["exp-data"]
    assert rep["records"] == 0 and any("heldout" in why for why in rep["left_out"])
    assert "No record was written." in [c.value for c in at.caption]
