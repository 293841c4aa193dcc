"""Issue 11, items 14, 15, 18: a huge completion is cut (and says so), an empty one is a
failed call, and a hung server is visible retry by retry with `--timeout`/`--max-retries`."""

from __future__ import annotations

import json

import pytest

from agent.engine import ModelCallFailed
from tests.cli_helpers import cli
from tests.engine_scripts import cfg
from tests.scripted_server import Reply
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.records import MAX_TEXT


def test_a_huge_completion_is_cut_recorded_and_reported(toy, capsys):
    db = str(toy.db)
    toy.llm.push(" go to " + "x" * 50_000)
    code, out, err = cli(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--db",
        db,
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
        "--max-steps",
        "1",
    )
    assert "cut" in err and f"{MAX_TEXT:,}" in err, err
    (call,) = toy.store.calls.of_episode(1)
    assert len(call.completion) == MAX_TEXT and call.cut_from == 50_007
    (step,) = toy.store.versions.steps(1)
    assert len(step.action) <= MAX_TEXT
    # the next prompt re-sends at most the cut text
    assert len(toy.engine.prompts.prompt(1)) < 2 * MAX_TEXT + 5_000


def test_an_empty_completion_is_a_failed_call_and_records_no_step(toy):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.llm.push("", "  ")
    with pytest.raises(ModelCallFailed, match="empty completion"):
        toy.engine.step(v.id)
    assert toy.store.versions.steps(v.id) == []
    (call,) = toy.store.calls.of_episode(ep.id)
    assert call.error and "empty completion" in call.error and call.attempts == 2
    assert len(toy.llm.completion_requests) == 2  # retried once, like any malformed answer
    toy.llm.push("", " go to cabinet 1")  # an empty answer then a good one: one step
    rep = toy.engine.step(v.id)
    assert [s.action for s in rep.steps] == ["go to cabinet 1"]


def test_an_empty_wiki_action_fallback_is_a_failed_call(toy):
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm, style="act"))
    toy.llm.push("", "")
    with pytest.raises(ModelCallFailed, match="empty completion"):
        toy.engine.step(v.id)
    assert toy.store.versions.steps(v.id) == []


def test_a_hung_server_prints_each_retry_and_honours_timeout_and_max_retries(toy, capsys):
    db = str(toy.db)
    toy.llm.push(*[Reply(text=" look", delay_s=3) for _ in range(3)])
    code, out, err = cli(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--db",
        db,
        "--json",
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
        "--timeout",
        "0.3",
        "--max-retries",
        "1",
    )
    assert code == 1, err
    retries = [line for line in err.splitlines() if "retry" in line]
    assert len(retries) == 1 and "timed out after 0.3s" in retries[0], err
    assert "after 2 attempts" in json.loads(out)["error"]
    e = toy.store.episodes.get(1)
    assert e.config.timeout_s == 0.3 and e.config.max_retries == 1
