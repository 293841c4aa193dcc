"""Training exports (issue 43; chat-sft of issue 42 item 4) checked field by field against TRL's
documented dataset formats, https://huggingface.co/docs/trl/dataset_formats ("Dataset formats
and types"; the conversational format is a list of {"role", "content"} messages):

- preference, conversational: {"prompt": [messages], "chosen": [messages], "rejected": [messages]};
  with implicit prompt: {"chosen": [messages], "rejected": [messages]}, the prompt inside both;
- unpaired preference, conversational: {"prompt": [messages], "completion": [messages], "label": bool};
- stepwise supervision (standard only): {"prompt": str, "completions": [str], "labels": [bool]},
  one label per completion;
- conversational language modeling with tools: {"messages": [...], "tools": [...]}; an assistant
  message's `tool_calls` items are {"type": "function", "function": {"name", "arguments"}} and a
  tool result is {"role": "tool", ...} (we add `id` / `tool_call_id` as OpenAI's API does and write
  `arguments` as a JSON string).
Every file loads with `datasets` from JSONL and Parquet (loopback only: local files, no hub).
"""

from __future__ import annotations

import json

import pytest

from react_editor.main import main as cli
from sessions.exchange import Filters, export, import_file
from sessions.exchange.training import export_records
from sessions.exchange.training_options import TrainingOptions
from sessions.store import Store
from tests import training_store
from tests.training_store import HINT

ROLES = {"system", "user", "assistant", "tool"}


@pytest.fixture
def made(toy):
    return training_store.build(toy)


def _records(store, fmt, **kw):
    recs, counts = export_records(store, fmt, filters=Filters(), **kw)
    recs = list(recs)
    return recs, counts


def _check_messages(msgs):
    assert isinstance(msgs, list) and msgs
    for m in msgs:
        assert m["role"] in ROLES and (m["content"] is None or isinstance(m["content"], str))
        for call in m.get("tool_calls") or []:
            assert call["type"] == "function" and set(call["function"]) == {"name", "arguments"}
            assert isinstance(call["function"]["arguments"], str)  # a JSON string
            json.loads(call["function"]["arguments"])
        if m["role"] == "tool":
            assert isinstance(m["tool_call_id"], str)


def _by_kind(recs):
    return {(r["metadata"]["edit_kind"] or r["metadata"]["pair"], r["metadata"]["task"]): r for r in recs}


def test_dpo_pairs_follow_the_evidence(toy, made):
    recs, counts = _records(toy.store, "dpo")
    room, wiki, tools = made.room, made.wiki, made.tools
    got = _by_kind(recs)
    for r in recs:  # TRL's conversational preference type, field by field
        assert set(r) == {"prompt", "chosen", "rejected", "tools", "metadata"}
        for part in ("prompt", "chosen", "rejected"):
            _check_messages(r[part])
        assert r["prompt"][0]["role"] == "system" and r["prompt"][1]["role"] == "user"
        assert r["chosen"][0]["role"] == "assistant" and r["rejected"][0]["role"] == "assistant"
        assert r["chosen"][-1]["role"] == "assistant" and r["rejected"][-1]["role"] == "assistant"
    # 1. people's judgments: both prefer the rewritten thought (one asked the other way round)
    r = got[("rewrite_thought", "alfworld:toy/room-1")]
    m = r["metadata"]
    assert m["evidence"] == "judgment" and m["chosen_version_id"] == room["rewrite_thought"].id
    assert m["rejected_version_id"] == room["v1"].id and m["step"] == 1 and m["edited_by"] == "person"
    assert sorted((j["annotator"], j["better"]) for j in m["judgments"]) == [("alice", "b"), ("bob", "b")]
    assert r["prompt"][1]["content"] == training_store.ROOM_TASK.text and len(r["prompt"]) == 2
    assert r["chosen"][0]["content"] == "think: First find the mug: cabinets first."
    assert r["tools"] is None and m["api_style"] == "messages"
    # one for the original, one tie: the original is chosen
    m = got[("insert_thought", "alfworld:toy/room-1")]["metadata"]
    assert m["evidence"] == "judgment" and m["chosen_version_id"] == room["v1"].id and m["step"] == 3
    # 2. a proven what-if: the edit is chosen though both runs succeed
    r = got[("rewrite_thought", "hotpotqa:toy-1")]
    m = r["metadata"]
    assert m["evidence"] == "whatif" and m["chosen_version_id"] == wiki["fixed"].id
    assert m["whatif"]["state"] == "proven" and m["whatif"]["effect"] == 1.0 and m["whatif"]["ci95"][0] > 0
    assert m["whatif"]["treatment"] == {"successes": 4, "n": 4} and m["whatif"]["control"] == {"successes": 0, "n": 4}
    assert r["chosen"][0]["content"].startswith(f"Thought 2: {HINT}")
    assert r["prompt"][2]["content"].startswith("Thought 1: I need to search Velmora")  # the shared step 1
    # 3. the outcomes: the accepted suggestion's what-if shows nothing; the original succeeded
    m = got[("rewrite_action", "hotpotqa:toy-1")]["metadata"]
    assert m["evidence"] == "outcome" and m["chosen_version_id"] == wiki["v1"].id
    assert m["edited_by"] == "suggestion" and m["critic_model"] == "critic-x" and m["whatif"]["state"] == "not shown"
    assert (m["chosen_success"], m["rejected_success"]) == (True, False)
    # a tools-style pair: stored calls, their ids and the reasoning channel; the tools column
    r = got[("judged", "alfworld:toy/tools-1")]
    assert r["metadata"]["chosen_version_id"] == tools["v1"].id and r["metadata"]["api_style"] == "tools"
    assert [t["function"]["name"] for t in r["tools"]] == ["act"]
    step1, result = r["prompt"][2], r["prompt"][3]
    assert step1["reasoning_content"] == "Mugs hide." and step1["content"] == "I go: go to cabinet 1."
    assert step1["tool_calls"] == [
        {
            "id": "call_t11",
            "type": "function",
            "function": {"name": "act", "arguments": '{"command": "go to cabinet 1"}'},
        }
    ]
    assert result == {"role": "tool", "tool_call_id": "call_t11", "content": "The cabinet 1 is closed."}
    assert json.loads(r["chosen"][0]["tool_calls"][0]["function"]["arguments"]) == {"command": "open cabinet 1"}
    # no evidence either way: left out and counted (delete_thought: the same outcome; rewrite_action: unfinished)
    assert ("delete_thought", "alfworld:toy/room-1") not in got and ("rewrite_action", "alfworld:toy/room-1") not in got
    assert counts.written == len(recs) == 5
    assert counts.left_out == {"no evidence either way (no judgment, no proven what-if, the same outcome)": 2}


def test_dpo_forms_and_hygiene(toy, made):
    base, _ = _records(toy.store, "dpo")
    recs, _ = _records(toy.store, "dpo", continuation="step", implicit_prompt=True)
    assert all(set(r) == {"chosen", "rejected", "tools", "metadata"} for r in recs)
    for full, r in zip(base, recs):  # the prompt inside both, then the one differing step
        n = len(full["prompt"])
        assert r["chosen"][:n] == full["prompt"] == r["rejected"][:n]
        assert r["chosen"][n:] == full["chosen"][:1] and r["rejected"][n:] == full["rejected"][:1]
    proven, counts = _records(toy.store, "dpo", proven_only=True)
    assert [r["metadata"]["chosen_version_id"] for r in proven] == [made.wiki["fixed"].id]
    assert counts.left_out["no what-if proved it (--proven-only)"] == 4
    big, counts = _records(toy.store, "dpo", min_effect=0.5)
    assert [r["metadata"]["chosen_version_id"] for r in big] == [made.wiki["fixed"].id]
    held, counts = _records(toy.store, "dpo", exclude_experiments=("heldout",))
    tasks = {r["metadata"]["task"] for r in base}
    assert {r["metadata"]["task"] for r in held} == tasks - {"hotpotqa:toy-1"}
    assert [r for r in base if r["metadata"]["task"] != "hotpotqa:toy-1"] == held
    assert counts.left_out["episode of a task experiment 'heldout' evaluates (--exclude-experiment)"] == 1
    with pytest.raises(ValueError, match="unknown experiment 'nope'"):
        export_records(toy.store, "dpo", exclude_experiments=("nope",))
    # judgments that settle nothing leave a pair out, with their reason, before any other evidence
    room = made.room
    toy.store.judgments.add(room["v1"].id, room["delete_thought"].id, "tie", "alice")
    toy.store.judgments.add(room["v1"].id, room["rewrite_action"].id, "A", "alice")
    toy.store.judgments.add(room["v1"].id, room["rewrite_action"].id, "B", "bob")
    recs, counts = _records(toy.store, "dpo")
    assert len(recs) == 5 and counts.left_out == {"judged a tie": 1, "people's judgments disagree": 1}


def test_kto_labels_per_trajectory_and_per_step(toy, made):
    recs, counts = _records(toy.store, "kto")
    for r in recs:  # TRL's conversational unpaired preference type
        assert set(r) == {"prompt", "completion", "label", "tools", "metadata"} and type(r["label"]) is bool
        _check_messages(r["prompt"])
        _check_messages(r["completion"])
        assert [m["role"] for m in r["prompt"]] == ["system", "user"] and r["completion"][-1]["role"] == "assistant"
    by = {r["metadata"]["version_id"]: r for r in recs}
    assert by[made.room["v1"].id]["label"] is True and by[made.room["v1"].id]["metadata"]["label_from"] == "outcome"
    rt = by[made.room["rewrite_thought"].id]  # alice's failure verdict beats its outcome
    assert rt["label"] is False and rt["metadata"]["label_from"] == "verdict"
    assert by[made.wiki["suggested"].id]["label"] is False and made.room["rewrite_action"].id not in by
    assert counts.left_out["trajectory: not finished and no verdict"] >= 1
    steps, counts = _records(toy.store, "kto", unit="step")
    room = {(r["metadata"]["version_id"], r["metadata"]["step"]): r for r in steps}
    v1 = made.room["v1"].id
    assert room[(v1, 2)]["label"] is False and room[(v1, 2)]["metadata"]["tags"] == ["hallucinated"]
    assert room[(v1, 1)]["label"] is True and room[(v1, 1)]["metadata"]["label_from"] == "tag"
    assert len(room[(v1, 2)]["completion"]) == 1 and len(room[(v1, 2)]["prompt"]) == 4  # system, task, step 1, OK.
    assert len({json.dumps([r["metadata"]["episode"], r["prompt"], r["completion"]]) for r in steps}) == len(steps)
    assert any(k.startswith("step: ") for k in counts.left_out)


def test_steps_values_from_rollout_groups(toy, made):
    recs, counts = _records(toy.store, "steps")
    for r in recs:  # TRL's stepwise supervision type, the measured values beside the labels
        assert isinstance(r["prompt"], str) and all(isinstance(c, str) for c in r["completions"])
        assert len(r["labels"]) == len(r["completions"]) == len(r["rates"]) == len(r["n"]) == len(r["ci95_low"])
        assert all(type(x) is bool for x in r["labels"])
    by = {r["metadata"]["version_id"]: r for r in recs}
    sug, fixed = by[made.wiki["suggested"].id], by[made.wiki["fixed"].id]
    # the control at step 2 measures the prefix through step 1 (0 of 4), the one at step 4 through step 3
    # (0 of 2); the treatment at step 4 the accepted suggestion's own step 4 (0 of 2); the original's
    # record would be a prefix of this one: left out
    assert sug["rates"] == [0.0, None, 0.0, 0.0] and sug["n"] == [4, 0, 2, 2] and sug["labels"] == [False] * 4
    assert sug["completions"][0].startswith("Thought 1: I need to search Velmora") and made.wiki["v1"].id not in by
    assert sug["completions"][3].endswith("Action 4: Finish[1712]")
    # the treatment measures the person's edited step 2: 4 of 4 (Math-Shepherd: it can reach the answer)
    assert fixed["rates"] == [0.0, 1.0] and fixed["labels"] == [False, True] and fixed["n"] == [4, 4]
    assert fixed["completions"][1].startswith(f"Thought 2: {HINT}") and fixed["ci95_low"][1] > 0.4
    assert fixed["prompt"] == training_store.WIKI_TASK.text
    assert counts.left_out["version: no rollouts from any of its prefixes"] >= 1
    assert counts.left_out["version: its measured prefix is part of a longer record"] >= 1


def test_chat_sft_mixes_styles_and_imports_back(toy, made, tmp_path):
    out = tmp_path / "c.jsonl"
    rep = export(toy.store, "chat-sft", out, filters=Filters(env="alfworld", all_versions=True))
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rep.records == len(rows) and rep.left_out == {}
    for r in rows:
        assert set(r) == {"messages", "tools"}
        _check_messages(r["messages"])
        assert [t["function"]["name"] for t in r["tools"]] == ["act"]
    styles = {any("reasoning_content" in m for m in r["messages"]) for r in rows}
    assert styles == {True, False}  # the tools-style versions beside the paper-format ones
    other = Store(tmp_path / "b.db")
    got = import_file(other, out)
    assert got.format == "chat-sft" and len(got.episodes) == len(rows)
    back = tmp_path / "d.jsonl"
    export(other, "chat-sft", back, filters=Filters(all_versions=True))
    assert [json.loads(x) for x in back.read_text().splitlines()] == rows  # weights and calls included
    from agent.engine import Engine

    ep = other.episodes.get(got.episodes[0])
    v = Engine(other).editor.edit(ep.current_version, 1, "rewrite_thought", "Another thought.", keep_rest=True)
    assert other.versions.steps(v.id)[0].thought == "Another thought."


def test_chat_sft_import_rejects_with_the_line(toy, tmp_path):
    good = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "fly", "arguments": "{}"}}],
            },
        ],
        "tools": [],
    }
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(good) + "\n")
    with pytest.raises(ValueError, match=r"^line 1: a chat-sft record needs its `tools` list"):
        import_file(Store(tmp_path / "b.db"), p)
    with pytest.raises(ValueError, match=r"^line 1: a chat-sft record: unknown tool 'fly'"):
        import_file(Store(tmp_path / "b.db"), p, env="alfworld")


def test_files_load_with_datasets(toy, made, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    from sessions.exchange import dataset_files

    monkeypatch.setattr(dataset_files, "BATCH", 2)  # tables made 2 records at a time, of differing keys, unified
    cache = str(tmp_path / "hf-cache")
    for fmt, opts in (("dpo", {}), ("kto", {"unit": "step"}), ("steps", {}), ("chat-sft", {})):
        o = TrainingOptions(**opts)
        j, q, d = tmp_path / f"{fmt}.jsonl", tmp_path / f"{fmt}.parquet", tmp_path / f"{fmt}-hf"
        filters = Filters(all_versions=True)
        rj = export(toy.store, fmt, j, filters=filters, options=o)
        rq = export(toy.store, fmt, q, filters=filters, options=o)
        rd = export(toy.store, fmt, d, filters=filters, options=o, hf=True, source="the-test.db")
        assert rj.records == rq.records == rd.records > 0 and (rq.output, rd.output) == ("parquet", "hf")
        a = datasets.load_dataset("json", data_files=str(j), split="train", cache_dir=cache)
        b = datasets.load_dataset("parquet", data_files=str(q), split="train", cache_dir=cache)
        c = datasets.load_from_disk(str(d))
        assert a.num_rows == b.num_rows == c.num_rows == rj.records
        first = json.loads(j.read_text().splitlines()[0])
        assert set(a.column_names) == set(b.column_names) == set(first)
        key = {"dpo": "chosen", "kto": "completion", "steps": "labels", "chat-sft": "messages"}[fmt]
        if fmt == "steps":
            assert b[0][key] == first[key] and c[0]["rates"] == first["rates"]
        else:  # messages read back with the columns' other keys as null
            assert [m["role"] for m in b[0][key]] == [m["role"] for m in first[key]]
        card = (d / "README.md").read_text()
        assert "the-test.db" in card and f"records: {rj.records}" in card and "## Schema" in card


def test_cli_prints_what_it_wrote_and_left_out(toy, made, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DB", str(toy.db))
    out = tmp_path / "p.jsonl"
    assert (
        cli(["export", "--format", "dpo", "--env", "alfworld", "--out", str(out), "--exclude-experiment", "heldout"])
        == 0
    )
    text = capsys.readouterr().out
    assert "wrote 3 records" in text and "left out 2" in text
    assert "  left out 2: no evidence either way" in text
    folder = tmp_path / "kto-hf"
    assert cli(["export", "--format", "kto", "--env", "alfworld", "--out", str(folder), "--hf", "--json"]) == 0
    got = capsys.readouterr()
    rep = json.loads(got.out)
    assert rep["output"] == "hf" and rep["records"] > 0 and (folder / "README.md").is_file()
    assert got.err == ""  # (no `datasets` progress bar beside the command's own lines)
    assert cli(["export", "--format", "kto", "--env", "alfworld", "--out", str(folder), "--hf"]) == 2
    assert "not an empty folder" in capsys.readouterr().err  # never written over
    assert cli(["export", "--format", "jsonl", "--env", "alfworld", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "Parquet and --hf are for chat-sft, dpo, kto and steps" in capsys.readouterr().err
    assert cli(["export", "--format", "dpo", "--env", "alfworld", "--out", str(out), "--min-effect", "2"]) == 2
    assert "--min-effect" in capsys.readouterr().err


def test_step_messages_made_once_read_as_the_whole_path(toy, made):
    """`Conversations.cut` makes each step's messages once per episode; joined they are what
    `trajectory.conversation` gives for the whole path, in both styles."""
    from sessions.exchange.messages import Conversations
    from trajectory import kinds
    from trajectory.conversation import conversation

    conv = Conversations()
    for ep_id in made.episodes.values():
        ep = toy.store.episodes.get(ep_id)
        fam = kinds.transcript(ep.task.env)
        for v in toy.store.versions.of_episode(ep_id):
            steps = toy.store.versions.steps(v.id)
            for style in ("messages", "tools"):
                head, parts = conv.cut(ep.task.env, ep.task.text, steps, style)
                whole = conversation(fam, ep.task.text, steps, style, system=fam.sft_system)
                assert head + [m for p in parts for m in p] == whole


def test_jsonl_keeps_a_tools_step_call_and_reasoning(toy, made, tmp_path):
    """The lossless jsonl export carries a `tools` step's reasoning, call and raw message (only
    when set: a text-style step's record is unchanged), and imports them back."""
    a = tmp_path / "a.jsonl"
    export(toy.store, "jsonl", a, refs=[], filters=Filters(all_versions=True))
    lines = a.read_text().splitlines()
    tools = [json.loads(x) for x in lines if json.loads(x)["episode"]["task"]["id"] == "toy/tools-1"]
    step1 = tools[0]["steps"][0]
    assert step1["reasoning"] == "Mugs hide." and step1["tool_call"] == {
        "id": "call_t11",
        "name": "act",
        "arguments": {"command": "go to cabinet 1"},
    }
    assert all("tool_call" not in s for x in lines if '"toy/room-1"' in x for s in json.loads(x)["steps"])
    other = Store(tmp_path / "b.db")
    import_file(other, a)
    b = tmp_path / "b.jsonl"
    export(other, "jsonl", b, filters=Filters(all_versions=True))
    assert b.read_bytes() == a.read_bytes()
    ep = other.episodes.get(max(other.episodes.ids()))
    s1 = other.versions.steps(ep.current_version)[0]
    assert (s1.reasoning, s1.tool_call.id, s1.tool_call.arguments) == (
        "Mugs hide.",
        "call_t11",
        {"command": "go to cabinet 1"},
    )


def test_an_accepted_suggestion_is_a_pair_its_what_if_proved(toy, capsys):
    """A suggestion verified and accepted through `react-editor suggest` (its what-if groups in
    the edit's origin): one dpo pair, the fix chosen on the what-if's evidence."""
    from tests.cli_helpers import cli_json
    from tests.suggest_agents import GOOD, HINT, IDLE, critic_json, fail_episode

    failed = fail_episode(toy)
    failed.critic = critic_json(IDLE, GOOD)
    out = cli_json(capsys, "suggest", "1", "--candidates", "2", "--verify", "5", "--db", str(toy.db))
    good = next(c for c in out["candidates"] if c["text"] == HINT)
    cli_json(capsys, "suggest", "1:1", "--accept", str(good["number"]), "--db", str(toy.db))
    recs, counts = _records(toy.store, "dpo")
    (r,) = [r for r in recs if r["metadata"]["edited_by"] == "suggestion"]
    m = r["metadata"]
    assert m["evidence"] == "whatif" and m["whatif"]["state"] == "proven" and m["edit_kind"] == "insert_thought"
    assert m["chosen_version_id"] == toy.store.episodes.get(1).current_version and m["critic_model"] == "scripted-model"
    assert r["chosen"][0]["content"] == f"think: {HINT}" and m["step"] == 2
    assert m["whatif"]["groups"] == toy.store.versions.get(m["chosen_version_id"]).edits[-1].origin["whatif_groups"]


def test_a_tools_style_run_exports_its_own_calls(toy, tmp_path):
    """A run in the `tools` style through the engine and the scripted server (the server's call
    ids and reasoning_content kept on the steps), an action edit that fails: its dpo pair is in
    the tools form with the server's ids; its chat-sft record imports back and exports the same."""
    from tests.cli.conversation_agents import _after_task
    from tests.export_support import cfg
    from tests.scripted_server import Reply, tool_call

    plan = [
        ("search", {"entity": "Velmora"}),
        ("search", {"entity": "Marrowgate"}),
        ("lookup", {"keyword": "founded"}),
        ("finish", {"answer": "1650"}),
    ]

    def agent(body):
        i = sum(1 for m in _after_task(body["messages"]) if m["role"] == "assistant")
        name, args = plan[min(i, 3)]
        return Reply(text=f"Step {i + 1}: I act.", reasoning=f"reasoning {i + 1}", tool_calls=[tool_call(name, args)])

    toy.llm.set_responder(agent)
    ep, v = toy.engine.start_episode(training_store.WIKI_TASK, cfg(toy.llm, api_style="tools"))
    assert toy.engine.run(v.id).success
    steps = toy.store.versions.steps(v.id)
    assert len(steps) == 4 and steps[0].tool_call is not None and steps[0].reasoning == "reasoning 1"
    wrong = toy.engine.editor.edit(v.id, 4, "rewrite_action", "Finish[1712]")
    assert toy.store.versions.get(wrong.id).outcome.success is False
    (r,), counts = _records(toy.store, "dpo")
    m = r["metadata"]
    assert (m["api_style"], m["evidence"], m["chosen_version_id"], m["step"]) == ("tools", "outcome", v.id, 4)
    ids = [m2["tool_calls"][0]["id"] for m2 in r["prompt"] if m2.get("tool_calls")]
    assert ids == [s.tool_call.id for s in steps[:3]]  # the server's ids, not call_<index>
    assert [m2["tool_call_id"] for m2 in r["prompt"] if m2["role"] == "tool"] == ids
    assert r["prompt"][2]["reasoning_content"] == "reasoning 1" and r["prompt"][2]["content"] == "Step 1: I act."
    assert json.loads(r["chosen"][0]["tool_calls"][0]["function"]["arguments"]) == {"answer": "1650"}
    assert json.loads(r["rejected"][0]["tool_calls"][0]["function"]["arguments"]) == {"answer": "1712"}
    assert [t["function"]["name"] for t in r["tools"]] == ["search", "lookup", "finish"]
    out = tmp_path / "c.jsonl"
    export(toy.store, "chat-sft", out, filters=Filters(all_versions=True))
    other = Store(tmp_path / "b.db")
    import_file(other, out)
    back = tmp_path / "d.jsonl"
    export(other, "chat-sft", back, filters=Filters(all_versions=True))
    assert back.read_text() == out.read_text()
