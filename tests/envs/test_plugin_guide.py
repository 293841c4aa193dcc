"""docs/plugins.md is enough to write a plugin: it names every `EnvFamily` field, every
`Environment` method and every `Task` field, and its walk-through family plays to a win."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import envs.registry as registry
from agent import exemplars
from agent.engine import Engine
from envs.base import EnvFamily, Environment
from sessions.store import Store
from trajectory.records import AgentConfig, Task

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def _named(text: str) -> set[str]:
    """Names the guide writes in backticks (`kind`, `list_tasks(source=...)` -> list_tasks)."""
    return {m.group(1) for m in re.finditer(r"`([A-Za-z_][A-Za-z0-9_]*)", text)}


def test_the_guide_names_every_family_field_environment_method_and_task_field():
    named = _named(GUIDE.read_text(encoding="utf-8"))
    methods = {n for n in vars(Environment) if not n.startswith("_")}
    wanted = {f.name for f in dataclasses.fields(EnvFamily)} | methods | set(Task.model_fields)
    assert wanted - named == set(), f"docs/plugins.md does not describe: {sorted(wanted - named)}"


def test_the_walk_through_family_plays_to_a_win(monkeypatch, tmp_path):
    text = GUIDE.read_text(encoding="utf-8")
    code = re.search(r"```python\n# react_editor_counter/__init__.py\n(.*?)```", text, re.S).group(1)
    kind = re.search(r'^(\w+) = "react_editor_counter:FAMILY"', text, re.M).group(1)
    ns: dict = {}
    exec(compile(code, "plugins.md", "exec"), ns)  # noqa: S102 - the guide's own code
    family, task = ns["FAMILY"], ns["TASK"]
    assert family.kind == kind == task.env
    monkeypatch.setitem(registry._FAMILIES, kind, family)
    exemplars.builtin_prompt_dict.cache_clear()
    store = Store(tmp_path / "c.db")
    try:
        engine = Engine(store, api_key="sk-test-key-not-real")
        ep, v = engine.start_episode(family.get_task(task.id), AgentConfig(model="human"))
        engine.human_step(v.id, action="add")
        report = engine.human_step(v.id, action="add")
        assert report.steps[-1].observation == "The counter shows 2."
        assert report.done and report.version.outcome.success is True
    finally:
        store.close()
        exemplars.builtin_prompt_dict.cache_clear()
