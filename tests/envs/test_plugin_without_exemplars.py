"""A family that ships no exemplars (a plugin's first draft): human mode works and a model
run sends a zero-shot prompt, instead of refusing with "has no built-in exemplars"."""

from __future__ import annotations

import pytest

import envs.registry as registry
from agent import exemplars
from agent.engine import Engine
from envs.base import EnvFamily, StepResult
from sessions.store import Store
from trajectory.records import AgentConfig, Task

TASK = Task(
    env="counter", id="count-2", type="count", text="You see a counter showing 0.\nYour task is to: make it show 2."
)


class Counter:
    """Counts `add` commands; won at 2."""

    kind = "counter"
    default_max_steps = 5

    def __init__(self):
        self.n = 0

    def reset(self, task):
        self.n = 0
        return task.text

    def step(self, action):
        if action.strip() != "add":
            return StepResult("Nothing happens.")
        self.n += 1
        return StepResult(f"The counter shows {self.n}.", self.n >= 2, float(self.n >= 2), {"won": self.n >= 2})

    def state(self):
        return self.n

    def set_state(self, token):
        self.n = token

    def snapshot(self):
        return {"n": self.n}

    def restore(self, snap):
        self.n = snap["n"]

    def admissible_actions(self):
        return ["add"]

    def close(self):
        pass


@pytest.fixture
def counter(monkeypatch, tmp_path):
    fam = EnvFamily(
        kind="counter",
        list_tasks=lambda **_: [TASK],
        get_task=lambda tid, **_: TASK,
        make_env=lambda task, options, blobs=None: Counter(),
        default_max_steps=5,
    )
    monkeypatch.setitem(registry._FAMILIES, "counter", fam)
    exemplars.builtin_prompt_dict.cache_clear()
    store = Store(tmp_path / "c.db")
    yield Engine(store, api_key="sk-test-key-not-real")
    store.close()
    exemplars.builtin_prompt_dict.cache_clear()


def test_human_mode_works_for_a_family_without_exemplars(counter):
    ep, v = counter.start_episode(TASK, AgentConfig(model="human"))
    counter.human_step(v.id, thought="Two adds should do it.")
    report = counter.human_step(v.id, action="add")
    assert report.steps[-1].observation == "The counter shows 1."


def test_a_model_run_without_exemplars_sends_a_zero_shot_prompt(counter, scripted_llm):
    scripted_llm.push(" add", " add")
    ep, v = counter.start_episode(
        TASK, AgentConfig(model="scripted", base_url=scripted_llm.base_url, max_retries=0, timeout_s=5)
    )
    report = counter.run(v.id)
    first = scripted_llm.requests[0].prompt
    assert first == ("Interact with the environment to solve a task.\n\nHere is the task.\n" + TASK.text + "\n>")
    assert "examples" not in first
    assert report.done and report.success and report.steps == 2
    assert scripted_llm.requests[1].prompt == first + " add\nThe counter shows 1.\n>"
