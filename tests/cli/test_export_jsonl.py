"""jsonl export (versioned schema, provenance, labels), lossless round trip, chat-sft
weights, filters, and exports that never hold an API key."""

from __future__ import annotations

import json

import pytest

from react_editor.main import main as cli
from sessions import annotations
from sessions.exchange import Filters, export, import_file, parse_ref
from sessions.exchange.export import ExportError
from sessions.exchange.schema import SCHEMA_VERSION, TrajectoryRecord, json_schema_text
from sessions.store import Store
from tests.export_support import ROOM_SCRIPT, ROOT, WIKI_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK, WIKI_TASK

FIX = "The mug should be in cabinet 1; I open it first."


def _populate(toy):
    """An ALFWorld episode with a thought edit (keep_rest) and an action edit, annotated;
    a Wikipedia episode with the paper's fallback call; an unfinished third one."""
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm), name="room")
    toy.engine.run(v.id)
    v2 = toy.engine.editor.edit(v.id, 1, "rewrite_thought", FIX, keep_rest=True)
    toy.llm.push(" go to table 1", " go to cabinet 1")
    v3 = toy.engine.editor.edit(v.id, 2, "rewrite_action", "go to shelf 1")
    toy.engine.run(v3.id, max_steps=2)
    toy.store.versions.set_current(ep.id, v2.id)
    annotations.annotate_version(toy.store, v2.id, by="alice", verdict="success", exemplar_ready=True, notes="good")
    annotations.annotate_version(toy.store, v3.id, by="bob", verdict="failure", add_failure_modes=["invalid_action"])
    steps3 = toy.store.versions.steps(v3.id)
    annotations.tag_step(toy.store, steps3[0].id, by="bob", add=["good_subgoal"])
    annotations.tag_step(toy.store, steps3[2].id, by="bob", add=["hallucinated"], note="wrong place")
    toy.llm.push(*WIKI_SCRIPT)
    ew, vw = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    toy.engine.run(vw.id)
    eu, vu = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.llm.push(ROOM_SCRIPT[1])
    toy.engine.step(vu.id)
    return {"room": (ep, v, v2, v3), "wiki": (ew, vw), "open": (eu, vu)}


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_jsonl_round_trip_is_byte_identical_and_rebuilds_the_tree(toy, tmp_path):
    _populate(toy)
    a = tmp_path / "a.jsonl"
    rep = export(toy.store, "jsonl", a, filters=Filters(all_versions=True))
    assert (rep.episodes, rep.versions) == (3, 5)
    text = a.read_text(encoding="utf-8")
    assert "sk-test-key-not-real" not in text and "api_key" not in text
    recs = [TrajectoryRecord.model_validate_json(line) for line in _lines(a)]
    assert all(r.schema_version == SCHEMA_VERSION for r in recs)
    room = [r for r in recs if r.episode.ref == 1]
    # provenance: model calls with usage, the edit with what it replaced, annotations
    assert room[0].steps[1].calls and room[0].calls[0].usage.prompt_tokens is not None
    edited = room[1]
    assert edited.steps[0].source == "human" and edited.steps[0].edit.old_thought.startswith("To solve the task")
    assert edited.steps[0].edit.replaced_step == room[0].steps[0].ref
    assert edited.steps[1].info["carried_from"] == room[0].steps[1].ref
    assert edited.version.current and edited.version.annotations[0].annotator == "alice"
    assert room[2].steps[0].ref == room[0].steps[0].ref  # shared prefix: same step ref
    assert room[2].steps[2].annotations[0].tags == ["hallucinated"]
    wiki = [r for r in recs if r.episode.ref == 2][0]
    assert [c.purpose for c in wiki.calls[:2]] == ["step", "step"] or any(
        c.purpose == "action_fallback" for c in wiki.calls
    )
    # import into a fresh database, export again: identical bytes, tree rebuilt
    other = Store(tmp_path / "b.db")
    got = import_file(other, a)
    assert len(got.episodes) == 3 and got.versions == 5
    b = tmp_path / "b.jsonl"
    export(other, "jsonl", b, filters=Filters(all_versions=True))
    assert b.read_bytes() == a.read_bytes()
    n_steps = toy.store.db.execute("select count(*) from steps").fetchone()[0]
    assert other.db.execute("select count(*) from steps").fetchone()[0] == n_steps
    assert other.db.execute("select count(*) from model_calls").fetchone()[0] == sum(
        len({c.ref for r in recs if r.episode.ref == e for c in r.calls}) for e in (1, 2, 3)
    )
    ep1 = other.episodes.get(got.episodes[0])
    assert other.versions.get(ep1.current_version).edits[0].old_thought.startswith("To solve the task")
    # the imported episode is editable
    from agent.engine import Engine

    eng = Engine(other)
    v_new = eng.editor.edit(ep1.current_version, 1, "rewrite_thought", "Another thought.", keep_rest=True)
    assert other.versions.steps(v_new.id)[0].thought == "Another thought."


def test_jsonl_subset_round_trip(toy, tmp_path):
    made = _populate(toy)
    ep, v, v2, v3 = made["room"]
    a = tmp_path / "a.jsonl"
    export(toy.store, "jsonl", a, refs=[parse_ref(f"{ep.id}:{v3.id}")])  # not the current version
    rec = TrajectoryRecord.model_validate_json(_lines(a)[0])
    assert rec.version.current is True and rec.steps[1].edit.replaced_step is None
    other = Store(tmp_path / "b.db")
    import_file(other, a)
    b = tmp_path / "b.jsonl"
    export(other, "jsonl", b, filters=Filters(all_versions=True))
    assert b.read_bytes() == a.read_bytes()


def test_filters(toy, tmp_path):
    made = _populate(toy)
    ep, v, v2, v3 = made["room"]

    def versions(**kw):
        out = tmp_path / "f.jsonl"
        try:
            export(toy.store, "jsonl", out, filters=Filters(**kw))
        except ExportError:
            return []
        recs = [json.loads(line)["episode"] for line in _lines(out)]
        return [e["name"] or e["task"]["id"] for e in recs]

    assert versions(env="hotpotqa") == ["toy-1"]
    assert versions(env="alfworld") == ["room", "toy/room-1"]
    assert versions(task_type="pick_and_place") == ["room", "toy/room-1"]
    assert versions(all_versions=True, edited=True) == ["room", "room"]
    assert versions(all_versions=True, exemplar_ready=True) == ["room"]
    # bob tagged step 1 of v3, which v shares (the prefix before the action edit)
    assert versions(all_versions=True, annotator="bob") == ["room", "room"]
    assert versions(all_versions=True, annotator="alice") == ["room"]
    assert versions(all_versions=True, verdict="failure") == ["room"]
    assert versions(outcome="unfinished") == ["toy/room-1"]
    assert versions(all_versions=True, outcome="success", env="alfworld") == ["room", "room"]


def test_chat_sft_weights(toy, tmp_path):
    """chat-sft in TRL's conversational tool-calling form (issue 42 item 4): the weights keep
    their rules; a paper-format version's actions become tool calls through its family's tools."""
    made = _populate(toy)
    ep, v, v2, v3 = made["room"]
    out = tmp_path / "c.jsonl"
    export(toy.store, "chat-sft", out, refs=[parse_ref(f"{ep.id}:all")])
    rows = [json.loads(line) for line in _lines(out)]
    assert len(rows) == 3
    assert "sk-test" not in out.read_text()

    def said(m):
        calls = m.get("tool_calls")
        return json.loads(calls[0]["function"]["arguments"])["command"] if calls else m["content"]

    def weights(row):
        return [(said(m), m["weight"]) for m in row["messages"] if m["role"] == "assistant"]

    orig, fixed, failed = (weights(r) for r in rows)
    assert rows[0]["messages"][0]["role"] == "system" and rows[0]["messages"][1]["content"] == ROOM_TASK.text
    assert [t["function"]["name"] for t in rows[0]["tools"]] == ["act"]
    assert all(w == 1 for _, w in orig)  # model steps of a successful run
    assert fixed[0] == (FIX, 1) and all(w == 1 for _, w in fixed)
    # failure verdict: model steps masked; human action kept; hallucinated step masked
    assert failed[0] == ("To solve the task, I need to find a mug, then put it in table 1.", 1)  # good_subgoal
    assert failed[1] == ("go to shelf 1", 1)  # human-written
    assert failed[2][1] == 0 and failed[3][1] == 0
    # a thought turn is answered by a user message, an action by a tool message naming its call
    msgs = rows[0]["messages"]
    roles = [m["role"] for m in msgs]
    assert roles[:4] == ["system", "user", "assistant", "user"] and roles[-1] == "assistant" and "tool" in roles
    for i, m in enumerate(msgs):
        if m["role"] == "tool":
            assert msgs[i - 1]["tool_calls"][0]["id"] == m["tool_call_id"]
    wiki = tmp_path / "w.jsonl"
    export(toy.store, "chat-sft", wiki, filters=Filters(env="hotpotqa"))
    msgs = json.loads(_lines(wiki)[0])["messages"]
    assert msgs[2]["content"].startswith("I need to search Velmora")
    call = msgs[2]["tool_calls"][0]
    assert call["function"] == {"name": "search", "arguments": '{"entity": "Velmora"}'}
    assert msgs[3] == {"role": "tool", "tool_call_id": call["id"], "content": msgs[3]["content"]}
    assert msgs[3]["content"].startswith("Velmora is a province.")


def test_export_errors_leave_no_file(toy, tmp_path):
    _populate(toy)
    out = tmp_path / "x.json"
    with pytest.raises(ExportError, match="one environment"):
        export(toy.store, "react-json", out, filters=Filters())
    assert not out.exists() and list(tmp_path.glob(".export-*")) == []
    with pytest.raises(ExportError, match="unknown export format"):
        export(toy.store, "csv", out, filters=Filters())


def test_cli_export_reports_counts(toy, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    _populate(toy)
    out = tmp_path / "e.jsonl"
    assert (
        cli(
            [
                "export",
                "--filter",
                "env=alfworld",
                "--filter",
                "versions=all",
                "--format",
                "jsonl",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    rep = json.loads(capsys.readouterr().out)
    assert rep["versions"] == 4 and rep["episodes"] == 2 and rep["records"] == len(_lines(out))
    assert cli(["export", "--format", "jsonl", "--out", str(out)]) == 2
    assert "choose what to export" in capsys.readouterr().err
    assert cli(["export", "999", "--format", "jsonl", "--out", str(out)]) == 2
    assert "unknown episode 999" in capsys.readouterr().err


def test_published_json_schema_is_current():
    doc = ROOT / "docs" / "trajectory.schema.json"
    assert doc.read_text(encoding="utf-8") == json_schema_text(), "regenerate: python -m sessions.exchange.schema"
    schema = json.loads(doc.read_text())
    assert schema["properties"]["schema_version"]["default"] == SCHEMA_VERSION
    assert "api_key" not in doc.read_text()
