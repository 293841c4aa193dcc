"""`react-editor` end to end on the real ALFWorld engine: built-in games of all six task
types played to `won` through the CLI by a scripted model; the think and invalid-command
paths; an edit + resume; a second process resuming by replay."""

from __future__ import annotations

import json

import pytest

from envs.alfworld.generate import TASK_TYPES as TYPES
from react_editor.main import main
from tests.alfworld_helpers import first_task, walkthrough


def run_json(capsys, *argv) -> dict:
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


@pytest.mark.parametrize("task_type", TYPES)
def test_cli_plays_each_task_type_to_won(task_type, scripted_llm, tmp_path, capsys):
    task = first_task(task_type)
    walk = walkthrough(task)
    scripted_llm.push(" think: I will follow the plan for this task.", *[" " + c for c in walk])
    res = run_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        task.id,
        "--base-url",
        scripted_llm.base_url,
        "--db",
        str(tmp_path / "a.db"),
    )
    assert res["done"] is True and res["success"] is True and res["steps"] == len(walk) + 1
    first_prompt = scripted_llm.completion_requests[0].body["prompt"]
    assert first_prompt.startswith("Interact with a household to solve a task. Here are two examples.\n")
    assert first_prompt.endswith("\nHere is the task.\n" + task.text + "\n>")
    shown = run_json(capsys, "show", str(res["episode"]), "--db", str(tmp_path / "a.db"))
    assert shown[0]["thought"] == "I will follow the plan for this task." and shown[0]["observation"] == "OK."
    assert [s["action"] for s in shown[1:]] == walk


def test_invalid_command_edit_and_resume_by_replay(scripted_llm, tmp_path, capsys):
    task = first_task("pick_clean_then_place_in_recep")
    walk = walkthrough(task)
    db = str(tmp_path / "b.db")
    scripted_llm.push(" " + walk[0], " fly to the moon", " " + walk[1])
    res = run_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        task.id,
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "3",
        "--db",
        db,
    )
    shown = run_json(capsys, "show", str(res["episode"]), "--db", db)
    assert shown[1]["action"] == "fly to the moon" and shown[1]["observation"] == "Nothing happens."
    # rewrite the invalid action: the environment runs the new one in the state after step 1
    v2 = run_json(capsys, "edit", str(res["episode"]), "--step", "2", "--action", walk[1], "--db", db)["version"]
    s2 = run_json(capsys, "show", str(res["episode"]), "--version", str(v2), "--db", db)
    assert s2[1]["observation"] == shown[2]["observation"] and s2[1]["source"] == "human"
    # a new process (main() builds a new Engine) resumes v2 by replaying and checking steps 1..2
    scripted_llm.push(*[" " + c for c in walk[2:]])
    out = run_json(capsys, "resume", str(res["episode"]), "--version", str(v2), "--max-steps", "50", "--db", db)
    assert out["success"] is True and out["steps"] == len(walk)


def test_alfworld_0_4_wording_option(scripted_llm, tmp_path, capsys):
    task = first_task("pick_and_place_simple")
    walk = walkthrough(task, "alfworld-0.4")
    scripted_llm.push(*[" " + c for c in walk])
    res = run_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        task.id,
        "--wording",
        "alfworld-0.4",
        "--base-url",
        scripted_llm.base_url,
        "--style",
        "act",
        "--db",
        str(tmp_path / "c.db"),
    )
    assert res["success"] is True
    assert any(c.startswith("move ") for c in walk)
    assert scripted_llm.completion_requests[0].body["prompt"].count("> think:") == 0  # act exemplars


def test_missing_game_file_is_a_clear_error(tmp_path, capsys):
    code = main(
        ["run", "--env", "alfworld", "--game", str(tmp_path / "nope" / "game.tw-pddl"), "--db", str(tmp_path / "d.db")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "game.tw-pddl" in err and err.count("\n") == 1
