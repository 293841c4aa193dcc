"""The original ReAct prompt files in and out: every trajectory becomes an editable
episode (steps marked imported), and exporting the unchanged import reproduces every entry
- and the whole file - byte for byte. Skips when ../shared is absent."""

from __future__ import annotations

import json

import pytest

from agent.engine import Engine
from react_editor.main import main as cli
from sessions import exemplar_sets
from sessions.exchange import export, import_file, parse_ref
from sessions.store import Store
from tests.export_support import reference_prompts
from trajectory import formats

FILES = ("alfworld_3prompts.json", "fever.json", "prompts_naive.json")


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "p.db")
    yield s
    s.close()


@pytest.mark.parametrize("name", FILES)
def test_react_json_export_of_unchanged_import_is_byte_identical(store, tmp_path, name):
    src = reference_prompts() / name
    original = json.loads(src.read_text(encoding="utf-8"))
    rep = import_file(store, src)
    out = tmp_path / name
    export(store, "react-json", out, exemplar_set=rep.exemplar_set)
    assert out.read_bytes() == src.read_bytes()  # the whole file, not only each entry
    env, d = exemplar_sets.prompt_dict(store, rep.exemplar_set)
    assert d == original and list(d) == list(original)
    for key, value in original.items():  # each entry alone, through the prompt format
        one = tmp_path / f"{key}.txt"
        export(store, "prompt", one, exemplar_set=rep.exemplar_set, keys=[key])
        assert one.read_text(encoding="utf-8") == value


def test_alfworld_entries_become_named_episodes(store, tmp_path):
    src = reference_prompts() / "alfworld_3prompts.json"
    original = json.loads(src.read_text(encoding="utf-8"))
    rep = import_file(store, src)
    assert len(rep.episodes) == 36 and rep.raw_entries == 0
    by_name = {store.episodes.get(e).name: store.episodes.get(e) for e in rep.episodes}
    ep = by_name["react_clean_0"]
    assert ep.task.env == "alfworld" and ep.task.id == "react_clean_0"
    assert ep.task.type == "pick_clean_then_place_in_recep" and ep.config.style == "react"
    assert (
        by_name["act_puttwo_2"].task.type == "pick_two_obj_and_place" and by_name["act_puttwo_2"].config.style == "act"
    )
    steps = store.versions.steps(ep.current_version)
    assert all(s.source == "imported" for s in steps)
    assert ep.task.text.endswith("Your task is to: put a clean lettuce in diningtable.")
    # one episode exported as prompt text = its original entry
    out = tmp_path / "one.txt"
    export(store, "prompt", out, refs=[parse_ref(str(ep.id))])
    assert out.read_text(encoding="utf-8") == original["react_clean_0"]
    # a selection of imported episodes as react-json keeps their keys and text
    sel = tmp_path / "sel.json"
    export(store, "react-json", sel, refs=[parse_ref(str(by_name[k].id)) for k in ("react_put_1", "react_put_0")])
    assert json.loads(sel.read_text()) == {k: original[k] for k in ("react_put_1", "react_put_0")}


def test_wiki_blocks_become_one_episode_per_example(store):
    src = reference_prompts() / "prompts_naive.json"
    original = json.loads(src.read_text(encoding="utf-8"))
    rep = import_file(store, src)
    names = [store.episodes.get(e).name for e in rep.episodes]
    assert names[:8] == [f"webthink_simple#{n}" for n in range(1, 9)]
    assert names.count("webthink_simple6#1") == 1 and len(rep.episodes) == 8 + 3 + 6 + 6
    assert rep.raw_entries == 4  # cotqa_*, webqa_*: kept as text
    ep = store.episodes.get(rep.episodes[names.index("webthink_simple6#2")])
    assert ep.task.env == "hotpotqa" and ep.task.text.startswith("Question: ")
    steps = store.versions.steps(ep.current_version)
    assert steps[-1].action.startswith("Finish[") and steps[-1].observation is None
    assert formats.render_wiki(ep.task.text, steps) in original["webthink_simple6"]
    fever = import_file(store, reference_prompts() / "fever.json")
    assert store.episodes.get(fever.episodes[0]).task.env == "fever"


def test_imported_exemplar_is_editable_and_the_set_uses_the_fix(store, tmp_path):
    src = reference_prompts() / "alfworld_3prompts.json"
    original = json.loads(src.read_text(encoding="utf-8"))
    rep = import_file(store, src, set_name="paper")
    ep = next(store.episodes.get(e) for e in rep.episodes if store.episodes.get(e).name == "react_clean_0")
    steps = store.versions.steps(ep.current_version)
    k = next(s.index for s in steps if s.thought is not None)
    fixed = Engine(store).editor.edit(ep.current_version, k, "rewrite_thought", "A corrected plan.", keep_rest=True)
    exemplar_sets.add_version(store, "paper", fixed.id)  # replaces react_clean_0 in place
    env, d = exemplar_sets.prompt_dict(store, "paper")
    assert list(d) == list(original)
    assert "> think: A corrected plan.\n" in d["react_clean_0"]
    assert all(d[k2] == original[k2] for k2 in original if k2 != "react_clean_0")


def test_plain_text_transcripts_import(store, tmp_path):
    original = json.loads((reference_prompts() / "alfworld_3prompts.json").read_text(encoding="utf-8"))
    t = tmp_path / "heat.txt"
    t.write_text(original["react_heat_1"], encoding="utf-8")
    rep = import_file(store, t)
    ep = store.episodes.get(rep.episodes[0])
    assert ep.task.type == "pick_heat_then_place_in_recep"
    out = tmp_path / "back.txt"
    export(store, "prompt", out, refs=[parse_ref(str(ep.id))])
    assert out.read_text(encoding="utf-8") == original["react_heat_1"]
    wiki = json.loads((reference_prompts() / "fever.json").read_text(encoding="utf-8"))
    w = tmp_path / "fever.txt"
    w.write_text(wiki["webthink_simple3"], encoding="utf-8")
    rep = import_file(store, w)
    assert len(rep.episodes) == 3 and store.episodes.get(rep.episodes[0]).task.env == "fever"
    out = tmp_path / "fever_back.json"
    export(store, "react-json", out, exemplar_set=rep.exemplar_set)
    assert json.loads(out.read_text()) == {"webthink_simple3": wiki["webthink_simple3"]}


def test_cli_import_json_prints_episode_ids(tmp_path, capsys, monkeypatch):
    src = reference_prompts() / "fever.json"
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "c.db"))
    assert cli(["import", str(src), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["episodes"] == [1, 2, 3, 4, 5, 6] and out["exemplar_set"] == "fever"
    assert cli(["import", str(src), "--set", "fever"]) == 2
    assert "exists already" in capsys.readouterr().err
    dest = tmp_path / "fever.json"
    assert cli(["export", "--set", "fever", "--format", "react-json", "--out", str(dest)]) == 0
    assert dest.read_bytes() == src.read_bytes()
