"""Shared pytest fixtures. Keep this file to fixtures only; helpers live in their modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import envs.registry  # noqa: F401  (publishes the kinds sessions/ reads: trajectory.kinds)
from tests.scripted_server import ScriptedLLM


# -- scripted model server (tests/scripted_server.py) --------------------------------------

@pytest.fixture(scope="session")
def scripted_llm_session() -> Iterator[ScriptedLLM]:
    """One scripted server for the whole session; call `.reset()` before scripting it."""
    with ScriptedLLM() as llm:
        yield llm


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A fresh scripted OpenAI-compatible server on 127.0.0.1 for one test.
    Script it with `.push(...)`, point clients at `.base_url`, assert on `.requests`."""
    with ScriptedLLM() as llm:
        yield llm


# -- engine with the in-test environments (tests/toy_envs.py) --------------------------------

@pytest.fixture
def toy(monkeypatch, tmp_path, scripted_llm):
    """An Engine over a fresh database whose alfworld/hotpotqa families are the toy envs,
    with tiny built-in exemplars, talking to the scripted model server."""
    import envs.registry as base
    from agent import exemplars
    from agent.engine import Engine
    from sessions.store import Store
    from tests import toy_envs

    fams = toy_envs.families()
    made = fams.pop("made")
    monkeypatch.setattr(base, "_FAMILIES", dict(fams))
    table = {"alfworld": toy_envs.ROOM_EXEMPLARS, "hotpotqa": toy_envs.WIKI_EXEMPLARS}
    monkeypatch.setattr(exemplars, "builtin_prompt_dict", lambda env: table[env])
    store = Store(tmp_path / "t.db")
    engine = Engine(store, api_key="sk-test-key-not-real")

    class Toy:
        pass

    t = Toy()
    t.engine, t.store, t.llm, t.made, t.envs = engine, store, scripted_llm, made, toy_envs
    t.db = tmp_path / "t.db"
    yield t
    store.close()
