"""The paper's formats against the original ReAct prompt files: parse every exemplar into
steps, render it back, compare bytes. Plus the pure parsing rules of completions."""

from __future__ import annotations

import json

import pytest

from tests.reference import require_reference
from trajectory import formats

TRAJECTORY_KEYS = ("webthink", "webact")


def test_alfworld_prompt_file_round_trips_byte_for_byte():
    d = json.loads((require_reference() / "prompts" / "alfworld_3prompts.json").read_text())
    assert len(d) == 36
    for key, text in d.items():
        task_text, steps = formats.parse_alfworld(text)
        assert task_text.startswith("You are in the middle of a room.") and "\nYour task is to: " in task_text
        assert steps and all((s.thought is None) != (s.action is None) for s in steps)
        assert formats.render_alfworld(task_text, steps) == text, key
        if key.startswith("act_"):
            assert all(s.thought is None for s in steps), key
        else:
            assert any(s.thought for s in steps), key


@pytest.mark.parametrize("name", ["prompts_naive.json", "fever.json"])
def test_wikipedia_prompt_files_round_trip_byte_for_byte(name):
    d = json.loads((require_reference() / "prompts" / name).read_text())
    n = 0
    for key, text in d.items():
        if not key.startswith(TRAJECTORY_KEYS):
            continue
        parsed = formats.parse_wiki_examples(text)
        assert parsed.render() == text, key
        for ex in parsed.examples:
            assert ex.task_text.startswith(("Question: ", "Claim: "))
            assert ex.steps[-1].action.startswith("Finish[") and ex.steps[-1].observation is None
            if key.startswith("webact"):
                assert all(s.thought is None for s in ex.steps)
            else:
                assert all(s.thought for s in ex.steps)
        n += len(parsed.examples)
    assert n >= 6


def test_fever_header_is_the_notebook_instruction():
    d = json.loads((require_reference() / "prompts" / "fever.json").read_text())
    assert formats.parse_wiki_examples(d["webthink_simple3"]).header == formats.FEVER_HEADER


def test_rendering_prompt_from_parsed_exemplar_equals_notebook_concatenation():
    d = json.loads((require_reference() / "prompts" / "alfworld_3prompts.json").read_text())
    ob, steps = formats.parse_alfworld(d["react_clean_0"])
    # the notebook sends prefix + ob + '\n>' then ' action\nobs\n>' per turn
    prefix = (
        "Interact with a household to solve a task. Here are two examples.\n"
        + d["react_clean_1"]
        + d["react_clean_0"]
        + "\nHere is the task.\n"
    )
    expected = (
        prefix
        + ob
        + "\n>"
        + "".join(
            f" {formats.alfworld_command(s)}\n" + ("" if s.observation is None else s.observation + "\n") + ">"
            for s in steps
        )
    )
    assert formats.alfworld_prompt([d["react_clean_1"], d["react_clean_0"]], ob, steps) == expected


@pytest.mark.parametrize(
    "completion, thought, action",
    [
        (" I need X.\nAction 2: Search[X]", "I need X.", "Search[X]"),
        (" only a thought", "only a thought", None),
        (" a\nb\nAction 2: Lookup[y]\nAction 2: Finish[z]", "a", None),  # two actions: fallback, like the notebook
        ("", "", None),
        ("  Thought with ünïcode 検索\nAction 2: Search[Zoë]", "Thought with ünïcode 検索", "Search[Zoë]"),
    ],
)
def test_wiki_completion_parsing_follows_notebook(completion, thought, action):
    p = formats.parse_wiki_completion(completion, 2, "react")
    assert (p.thought, p.action) == (thought, action)


def test_alfworld_completion_parsing():
    assert formats.parse_alfworld_completion(" think: a plan ") == ("a plan", None)
    assert formats.parse_alfworld_completion(" go to fridge 1") == (None, "go to fridge 1")
    assert formats.parse_alfworld_completion("") == (None, "")


def test_format_errors_are_clear():
    with pytest.raises(formats.FormatError, match="no opening observation"):
        formats.parse_alfworld("> go\nobs\n")
    with pytest.raises(formats.FormatError, match="Question"):
        formats.parse_wiki_examples("Thought 1: x\n")
    with pytest.raises(formats.FormatError, match="out of order"):
        formats.parse_wiki_examples("Question: q\nThought 2: x\nAction 2: Finish[y]\n")
