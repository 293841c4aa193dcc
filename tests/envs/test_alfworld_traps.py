"""The four library traps, each with its workaround; and generation determinism."""

from __future__ import annotations

import random
import sys

import pytest


def test_expert_type_passed_positionally_is_ignored_but_ours_is_kept():
    from alfworld.agents.environment.alfred_tw_env import AlfredExpert

    from envs.alfworld.stock import expert_wrapper

    assert AlfredExpert("planner").expert_type == "handcoded"  # what AlfredTWEnv.init_env does
    assert expert_wrapper("planner").expert_type == "planner"


def test_translation_keeps_sys_argv(monkeypatch, tmp_path):
    import fast_downward

    from envs.alfworld import get_task
    from envs.alfworld.fastgame import load_game_data
    from envs.alfworld.translation import translate

    data = load_game_data(
        get_task(__import__("envs.alfworld", fromlist=["list_tasks"]).list_tasks()[0].id).data["game"]
    )
    monkeypatch.setattr(sys, "argv", ["react-editor", "run", "--x"])
    fast_downward.pddl2sas(data.domain, data.problem)
    assert sys.argv == ["translate.py", "domain", "task"]  # the trap
    sys.argv[:] = ["react-editor", "run", "--x"]
    monkeypatch.setenv("REACT_EDITOR_CACHE", "off")
    translate(data.domain, data.problem + "\n;; fresh", optimize=False)
    assert sys.argv == ["react-editor", "run", "--x"]


def test_task_text_is_reproducible_and_leaves_global_random_alone():
    from alfworld.gen.goal_library import gdict

    from envs.alfworld.generate import seeded_task_grammar

    traj = {
        "task_type": "pick_and_place_simple",
        "pddl_params": {
            "object_target": "Apple",
            "parent_target": "Fridge",
            "toggle_target": "",
            "mrecep_target": "",
            "object_sliced": False,
        },
    }
    grammar = "Your task is to: UNKNOWN GOAL."
    texts = set()
    for seed in range(12):
        random.seed(seed)  # whatever the global state is ...
        a = seeded_task_grammar(grammar, traj, random.Random(7))
        after = random.random()
        random.seed(seed)
        assert after == random.random()  # ... it is left untouched
        texts.add(a)
    assert len(texts) == 1  # ... and the text only depends on our rng
    options = {t.format(obj="apple", recep="fridge") for t in gdict["pick_and_place_simple"]["templates"]}
    got = {seeded_task_grammar(grammar, traj, random.Random(s))[len("Your task is to: ") : -1] for s in range(30)}
    assert got == options


def test_engine_state_survives_reload_in_process():
    """textworld snapshots die with load/reset; our tokens are replayable after a reset."""
    from envs.alfworld import list_tasks, make_env

    task = list_tasks()[3]
    env = make_env(task, {})
    env.reset(task)
    first = env.admissible_actions()[0]
    obs = env.step(first).observation
    token = env.state()
    env.reset(task)
    env.set_state(token)
    second = env.admissible_actions()
    env.reset(task)
    env.step(first)
    assert env.admissible_actions() == second and obs
    env.close()


def test_generation_is_deterministic(tmp_path):
    from envs.alfworld.generate import generate_games

    a = generate_games(tmp_path / "a", seed=42, per_type=1, task_types=("pick_heat_then_place_in_recep",))
    b = generate_games(tmp_path / "b", seed=42, per_type=1, task_types=("pick_heat_then_place_in_recep",))
    assert [p.relative_to(tmp_path / "a") for p in a] == [p.relative_to(tmp_path / "b") for p in b]
    assert a[0].read_bytes() == b[0].read_bytes()
    assert (a[0].parent / "traj_data.json").read_bytes() == (b[0].parent / "traj_data.json").read_bytes()
    c = generate_games(tmp_path / "c", seed=43, per_type=1, task_types=("pick_heat_then_place_in_recep",))
    assert c[0].read_bytes() != a[0].read_bytes()


@pytest.fixture(autouse=True)
def _cache(alfworld_session_cache, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(alfworld_session_cache))
