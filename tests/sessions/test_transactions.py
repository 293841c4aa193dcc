"""Issue 26 item 6: a transaction inside another is a savepoint. An inner block that fails
(and whose error the outer one catches) leaves none of its writes behind, and the ids it
inserted are not cached; the outer block goes on and commits the rest."""

from __future__ import annotations

import pytest

from sessions.store import Store
from sessions.transactions import ConnectionState, connection_state
from trajectory.records import AgentConfig, ModelCall, Task


class Boom(Exception):
    pass


def call(model: str) -> ModelCall:
    return ModelCall(
        model=model,
        api_style="completions",
        params={"temperature": 0.0},
        prompt_hash="h",
        prompt_chars=1,
        completion="ok",
    )


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "t.db")
    yield s
    s.close()


def test_a_caught_inner_failure_leaves_none_of_its_writes(store):
    with store.transaction():
        store.settings.set("before", 1)
        with pytest.raises(Boom):
            with store.transaction():
                store.settings.set("inner", 2)
                with store.transaction():  # a deeper block that succeeded goes with its parent
                    store.settings.set("deeper", 3)
                raise Boom
        store.settings.set("after", 4)
    assert store.settings.get("before") == 1 and store.settings.get("after") == 4
    assert store.settings.get("inner") is None and store.settings.get("deeper") is None


def test_an_inner_success_commits_with_the_outer_and_an_outer_failure_undoes_both(store):
    with pytest.raises(Boom):
        with store.transaction():
            with store.transaction():
                store.settings.set("inner", 1)
            raise Boom
    assert store.settings.get("inner") is None
    with store.transaction(durable=False):
        with store.transaction():
            store.settings.set("inner", 2)
    assert store.settings.get("inner") == 2


def test_ids_an_undone_inner_block_inserted_are_not_remembered(store):
    ep, _ = store.episodes.create(Task(env="alfworld", id="t1", text="x"), AgentConfig(model="m"), {}, None)
    with store.transaction():
        with pytest.raises(Boom):
            with store.transaction():
                store.calls.record(ep.id, [call("fresh-model")])  # inserts its call_params row
                raise Boom
    assert store.db.execute("select count(*) from call_params").fetchone()[0] == 0
    store.calls.record(ep.id, [call("fresh-model")])  # a cached id of the undone row would break this
    row = store.db.execute("select p.model from model_calls c join call_params p on p.id = c.params_id").fetchall()
    assert row == [("fresh-model",)]


def test_a_connection_carries_its_connection_state_as_one_typed_object(store):
    """Issue 45 item 2: no untyped attributes hung on the connection (`light`, `flat`,
    `_savepoints`...): its transactions' state is one dataclass, and it follows them."""
    conn = store.db.conn
    with store.transaction(durable=False):
        with store.transaction():
            store.settings.set("x", 1)
            assert connection_state(conn).savepoints and not connection_state(conn).without_savepoints
    state = connection_state(conn)
    assert vars(conn) == {"state": state} and isinstance(state, ConnectionState)
    assert not state.synchronous_normal and not state.savepoints  # put back at full after the light one
