"""The TextWorld environment on the real engine: the built-in tw-cooking games (made on
first use and cached), the observations, winning and score, admissible commands, the
verified replay that restores a state, and games a person points at."""

from __future__ import annotations

import shutil

import pytest
import textworld
from react_editor_textworld import FAMILY, games
from react_editor_textworld.env import clean

from envs.base import EnvError, ReplayMismatch


@pytest.fixture(scope="module")
def task():
    return FAMILY.get_task("cooking-1")


@pytest.fixture(scope="module")
def walk(task):
    env = textworld.start(str(games.game_path(task)), request_infos=textworld.EnvInfos(policy_commands=True))
    try:
        return list(env.reset().policy_commands)
    finally:
        env.close()


def test_clean_drops_prompt_status_line_and_banner():
    raw = "\n\n  $$$ |$$ \\$$ $$$$\n\nYou take the milk.\n\n\n\nYour score has just gone up by one point.\n\n>   -= Kitchen =-1/3"
    assert clean(raw) == "You take the milk. Your score has just gone up by one point."


def test_clean_keeps_the_ending_so_a_losing_step_reads_as_one():
    won = "You eat the meal.\n\n*** The End ***\nWould you like to RESTART, RESTORE"
    assert clean(won) == "You eat the meal. *** The End ***"
    lost = "You eat the raw meat. It is poisonous.\n\n*** You lost! ***\n\nWould you like to RESTART"
    assert clean(lost) == "You eat the raw meat. It is poisonous. *** You lost! ***"
    assert clean("  $$$ *** |$$ ***\n\nYou go west.") == "You go west."  # banner art is still dropped


def test_builtin_tasks_are_made_and_read_from_the_games(task):
    tasks = FAMILY.list_tasks()
    assert [t.id for t in tasks] == list(games.BUILTIN)
    assert all(games.game_path(t).exists() for t in tasks)
    assert task.text.startswith("-= Kitchen =-") and "\nYour task is to: You are hungry!" in task.text
    with pytest.raises(EnvError, match="no textworld task 'nope'"):
        FAMILY.get_task("nope")


def test_the_walkthrough_wins_with_score_and_admissible_commands(task, walk):
    env = FAMILY.make_env(task, {})
    assert env.reset(task) == task.text
    assert "examine cookbook" in env.admissible_actions()
    assert env.step("think: read the recipe").observation == "OK."
    bad = env.step("take the moon")
    assert bad.observation == "You can't see any such thing." and not bad.done
    for cmd in walk:
        res = env.step(cmd)
    assert res.done and res.reward == 1.0 and res.info["won"] is True
    assert res.info["score"] == res.info["max_score"] > 0 and res.info["score_rate"] == 1.0
    assert FAMILY.success(res.reward, res.info) is True
    env.close()


def test_set_state_replays_and_checks_every_observation(task, walk):
    env = FAMILY.make_env(task, {})
    env.reset(task)
    first = env.step(walk[0]).observation
    token, admissible = env.state(), env.admissible_actions()
    second = env.step(walk[1]).observation
    assert env.admissible_actions() != admissible
    env.set_state(token)  # back to after the first command
    assert env.state() == token and env.admissible_actions() == admissible
    assert env.step(walk[1]).observation == second and token == ((walk[0], first),)
    forged = ((walk[0], "Something else happened."),)
    with pytest.raises(ReplayMismatch, match="replay mismatch at step 1"):
        env.set_state(forged)
    assert env.snapshot() is None  # across processes the engine replays and checks the same way
    env.close()


def test_a_game_file_a_person_points_at(task, tmp_path):
    copy = tmp_path / "mine.z8"
    shutil.copy(games.game_path(task), copy)
    shutil.copy(games.game_path(task).with_suffix(".json"), copy.with_suffix(".json"))
    mine = FAMILY.custom_task(game=str(copy))
    assert mine.source == "file" and mine.type == "game" and mine.text == task.text
    assert FAMILY.references(mine, {}) == [str(copy.resolve())] and FAMILY.references(task, {}) == []
    env = FAMILY.make_env(mine, {})
    assert env.reset(mine) == mine.text
    env.close()
    (tmp_path / "notes.txt").write_text("hello")
    for bad, why in ((tmp_path / "notes.txt", "not a .z8/.ulx game"), (tmp_path / "gone.z8", "no game file")):
        with pytest.raises(EnvError, match=why):
            FAMILY.custom_task(game=str(bad))
