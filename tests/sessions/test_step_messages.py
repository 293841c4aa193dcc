"""Migration 19: a step keeps its reasoning, its native tool call and the raw assistant message."""

import pytest

from sessions import schema
from sessions.store import Store
from trajectory.records import AgentConfig, Step, Task, ToolCall

TASK = Task(env="hotpotqa", id="q1", text="Question: Who?")


def test_a_step_round_trips_its_reasoning_tool_call_and_raw_message(tmp_path):
    store = Store(tmp_path / "s.db")
    _, v = store.episodes.create(TASK, AgentConfig(model="m", api_style="tools"), {}, "e")
    raw = {
        "role": "assistant",
        "content": "I search.",
        "reasoning_content": "think hard",
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "search", "arguments": '{"entity": "Rell"}'}}
        ],
    }
    step = Step(
        index=1,
        thought="I search.",
        action="Search[Rell]",
        observation="Rell is ...",
        reasoning="think hard",
        tool_call=ToolCall(id="call_9", name="search", arguments={"entity": "Rell"}),
        message=raw,
    )
    store.versions.append(v.id, [step])
    store.close()
    again = Store(tmp_path / "s.db")  # a restart reads them back from the rows
    (got,) = again.versions.path(again.versions.get(v.id).leaf_step_id)
    assert got.reasoning == "think hard"
    assert got.tool_call == ToolCall(id="call_9", name="search", arguments={"entity": "Rell"})
    assert got.message == raw
    plain = Step(index=2, thought="t", action="Finish[x]", observation="done")
    again.versions.append(v.id, [plain])
    last = again.versions.path(again.versions.get(v.id).leaf_step_id)[-1]
    assert (last.reasoning, last.tool_call, last.message) == (None, None, None)
    again.close()


def test_a_database_of_schema_18_gains_the_columns_and_keeps_its_steps(tmp_path):
    path = tmp_path / "old.db"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:18])
        old = Store(path)
        _, v = old.episodes.create(TASK, AgentConfig(model="m"), {}, "old")
        old.db.execute(
            "insert into steps (episode_id, idx, thought, action, source, created_at) "
            "values (?, 1, 't', 'Search[x]', 'model', '2026-01-01')",
            [v.episode_id],
        )
        old.db.conn.commit()
        old.close()
    store = Store(path)
    cols = {c.name for c in store.db["steps"].columns}
    assert {"reasoning", "tool_call", "message"} <= cols
    (row,) = store.db.execute("select thought, reasoning, tool_call, message from steps").fetchall()
    assert row == ("t", None, None, None)
    store.close()
