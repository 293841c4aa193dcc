"""The ids of task and config rows a Store keeps (`store.episodes.row_ids`): a known task
or config costs no statement, and only committed rows are kept, so a rolled-back
transaction (or savepoint) leaves no id behind that names a row that is gone."""

from __future__ import annotations

import pytest

from sessions.store import Store
from tests.toy_envs import WIKI_TASK
from trajectory.records import AgentConfig


def _on(table: str, stmts: list[str]) -> list[str]:
    return [s for s in stmts if not s.startswith("--") and f" {table} " in s.replace('"', " ")]


def test_a_known_task_and_config_cost_no_statement(tmp_path):
    stmts: list[str] = []
    store = Store(tmp_path / "r.db", tracer=lambda sql, _: stmts.append(sql))
    store.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "first")
    assert _on("tasks", stmts) and _on("configs", stmts)
    stmts.clear()
    ep, _ = store.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "second")
    assert _on("tasks", stmts) == [] and _on("configs", stmts) == []
    assert store.episodes.get(ep.id).task == WIKI_TASK
    changed = WIKI_TASK.model_copy(update={"text": "Question: a regenerated game?"})  # same key, new content
    ep2, _ = store.episodes.create(changed, AgentConfig(model="m"), {}, "third")
    assert store.episodes.get(ep2.id).task == changed and store.episodes.get(ep.id).task == WIKI_TASK
    store.close()


def test_rows_of_a_rolled_back_transaction_are_not_remembered(tmp_path):
    """A task and config first inserted by a transaction that rolls back are inserted
    again by the next create, which then reads them back."""
    store = Store(tmp_path / "r.db")
    config = AgentConfig(model="rolled-back")
    with pytest.raises(RuntimeError), store.transaction():
        store.episodes.create(WIKI_TASK, config, {}, "gone")
        raise RuntimeError("undone")
    ep, _ = store.episodes.create(WIKI_TASK, config, {}, "after")
    got = store.episodes.get(ep.id)
    assert got.task == WIKI_TASK and got.config == config
    store.close()


def test_rows_of_a_failed_savepoint_are_not_remembered(tmp_path):
    """The same inside one transaction: a savepoint that inserted them fails, the
    transaction goes on, creates the episode again and commits."""
    store = Store(tmp_path / "r.db")
    config = AgentConfig(model="rolled-back")
    with store.transaction():
        with pytest.raises(RuntimeError), store.transaction():
            store.episodes.create(WIKI_TASK, config, {}, "gone")
            raise RuntimeError("undone")
        ep, _ = store.episodes.create(WIKI_TASK, config, {}, "kept")
    got = store.episodes.get(ep.id)
    assert got.task == WIKI_TASK and got.config == config
    ep2, _ = store.episodes.create(WIKI_TASK, config, {}, "after")
    assert store.episodes.get(ep2.id).config == config
    store.close()


def test_a_stored_task_another_store_made_costs_one_insert_and_one_read(tmp_path):
    """A task already in the database but new to this Store (another process wrote it):
    its insert does nothing, one read finds its row (not a second insert first)."""
    first = Store(tmp_path / "r.db")
    ep, _ = first.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "first")
    first.close()
    stmts: list[str] = []
    store = Store(tmp_path / "r.db", tracer=lambda sql, _: stmts.append(sql))
    stmts.clear()
    ep2, _ = store.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "second")
    on_tasks = _on("tasks", stmts)
    assert [s.split()[0].lower() for s in on_tasks] == ["insert", "select"], on_tasks
    assert store.episodes.get(ep2.id).task == WIKI_TASK == store.episodes.get(ep.id).task
    store.close()
