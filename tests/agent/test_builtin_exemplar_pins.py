"""Issue 39 item 10: a version on the built-in exemplars pins what it was sent. The family's
built-in prompt file is pointed at a copy in tmp (its `exemplars_file`, what a plugin or an
upgrade ships); the file changes under a stored version, as an upgrade would change it, and
`show --prompt` of that version stays byte-identical, while a new episode uses the new file."""

from __future__ import annotations

import dataclasses
import json
import shutil
from contextlib import closing

import pytest

from agent import exemplars
from agent.engine import Engine
from agent.task_selection import select_tasks
from envs import registry
from react_editor.main import main
from sessions import exemplar_sets
from sessions.store import Store
from tests.experiment_agents import HOTPOT, wiki_agent
from trajectory.records import AgentConfig


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """The HotpotQA family with its built-in exemplars read from a copy in tmp."""
    fam = registry.family("hotpotqa")
    copy = tmp_path / "prompts.json"
    shutil.copy(fam.exemplars_file, copy)
    monkeypatch.setitem(registry._FAMILIES, "hotpotqa", dataclasses.replace(fam, exemplars_file=copy))
    exemplars.builtin_prompt_dict.cache_clear()
    yield copy
    exemplars.builtin_prompt_dict.cache_clear()  # (the next test reads the package's file again)


def _show_prompt(capsys, db, ref: str) -> str:
    assert main(["show", ref, "--prompt", "--db", str(db)]) == 0
    return capsys.readouterr().out


def test_show_prompt_of_a_builtin_version_does_not_change_with_the_shipped_file(
    tmp_path, shipped, capsys, scripted_llm
):
    db = tmp_path / "p.db"
    scripted_llm.set_responder(wiki_agent({HOTPOT[0]["question"]: HOTPOT[0]["answer"]}, react_steps=3))
    task = select_tasks("hotpotqa", "hp-001")[0]
    cfg = AgentConfig(model="m", base_url=scripted_llm.base_url)
    with closing(Store(db)) as store:
        eng = Engine(store, api_key="sk-test-key-not-real")
        ep, v = eng.start_episode(task, cfg)
        eng.step(v.id)
    ref = f"{ep.id}:1"
    before = _show_prompt(capsys, db, ref)
    assert "Question:" in before

    prompts = json.loads(shipped.read_text(encoding="utf-8"))  # an upgrade rewords the built-in exemplars
    shipped.write_text(
        json.dumps({k: t.replace("Question:", "Question (reworded):") for k, t in prompts.items()}), encoding="utf-8"
    )
    exemplars.builtin_prompt_dict.cache_clear()  # (as a new process of the new install reads it)

    after = _show_prompt(capsys, db, ref)
    assert after == before  # byte-identical: what was sent
    with closing(Store(db)) as store:  # a new episode runs on the exemplars shipped now
        eng = Engine(store, api_key="sk-test-key-not-real")
        ep2, v2 = eng.start_episode(task, cfg)
        assert "Question (reworded):" in eng.prompts.prompt(v2.id)
        revs = {store.versions.exemplar_revision(v.id), store.versions.exemplar_revision(v2.id)}
        assert None not in revs and len(revs) == 2
        assert exemplar_sets.list_sets(store) == []  # the revisions' holder is no set a person sees
    assert "Question (reworded):" not in _show_prompt(capsys, db, ref)
