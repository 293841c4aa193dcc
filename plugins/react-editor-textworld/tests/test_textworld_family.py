"""What the family tells ReAct Editor: the ALFWorld-style transcript with its own
instruction and exemplars, its signals, scoring and task types."""

from __future__ import annotations

import json

from react_editor_textworld import EXEMPLARS_FILE, FAMILY
from react_editor_textworld.transcript import INSTRUCTION

from trajectory.formats import parse_alfworld
from trajectory.records import Step, Task

TASK = Task(env="textworld", id="t", type="cooking", text="-= Kitchen =- A room.\nYour task is to: eat.")


def test_exemplars_are_real_transcripts_in_the_command_layout():
    prompts = json.loads(EXEMPLARS_FILE.read_text(encoding="utf-8"))
    assert sorted(prompts) == ["act_cook_0", "act_cook_1", "react_cook_0", "react_cook_1"]
    for key, text in prompts.items():
        task_text, steps = parse_alfworld(text)
        assert "Your task is to:" in task_text and steps[-1].action == "eat meal"
        assert any(s.thought for s in steps) == key.startswith("react")
    FAMILY.transcript.check_exemplars(prompts, "react")


def test_prompt_is_the_alfworld_layout_with_its_own_instruction():
    prompts = json.loads(EXEMPLARS_FILE.read_text(encoding="utf-8"))
    steps = [Step(index=1, thought="Read it.", observation="OK."), Step(index=2, action="look", observation="A room.")]
    req = FAMILY.transcript.request(prompts, TASK, steps, "react", None)
    assert req.prompt == (
        INSTRUCTION
        + prompts["react_cook_1"]
        + prompts["react_cook_0"]
        + "\nHere is the task.\n"
        + TASK.text
        + "\n> think: Read it.\nOK.\n> look\nA room.\n>"
    )
    assert req.stop == ["\n"]
    reply = FAMILY.transcript.parse(req, " think: now the fridge")
    assert (reply.thought, reply.action) == ("now the fridge", None)


def test_signals_scoring_and_types():
    rules = FAMILY.transcript.signals
    assert rules.flags("xyzzy", "That's not a verb I recognise.") == {"invalid_action"}
    assert rules.flags("look", "-= Kitchen =- A room.") == set()
    assert FAMILY.success(0.0, {"won": False, "score": 2}) is False and FAMILY.success(1.0, {"won": True})
    assert [m.name for m in FAMILY.metrics] == ["score"] and dict(FAMILY.task_types)["cooking"] == "Cooking"
    assert FAMILY.methods == ("react", "act") and FAMILY.qa is None
