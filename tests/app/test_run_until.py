"""Run until something happens (issue 28 and the overview issue's item 8): stop conditions parsed
and matched, the CLI's resume that stops at the first match, the Editor's run to a condition, and
how a stopped run says where and why (a condition, Stop on one step, the panel that stays open).
AppTest over the toy environments and the CLI in process; the scripted model server is the only
stand-in."""

from __future__ import annotations

import json

import pytest

from agent.stop_conditions import ConditionError, StopCondition, first_hit, parse
from tests.app_helpers import _long, cfg, click, ok, texts
from tests.cli_helpers import cli, cli_json
from tests.toy_envs import ROOM_TASK
from trajectory.records import Step


def test_stop_conditions_parse_and_match():
    s = Step(index=3, action="go to desk 1", observation="Nothing happens.")
    assert parse("signal:repeated_action").matches(s, ["repeated_action"])
    assert not parse("signal:repeated_action").matches(s, ["no_effect"])
    assert parse("obs:/Nothing happens/").matches(s) and parse("obs:/nothing HAPPENS/i").matches(s)
    assert not parse("obs:/^Nothing$/").matches(s)
    assert parse("action:/^go to/").matches(s) and parse("action:desk 1").matches(s)
    assert parse("step:3").matches(s) and not parse("step:4").matches(s)
    assert parse("obs:/a.b/").spec == "obs:/a.b/" and parse("step:12") == StopCondition("step", 12)
    for bad, why in [
        ("signal:nope", "unknown signal"),
        ("obs:/(/", "bad pattern"),
        ("step:0", "bad step"),
        ("when:3", "use signal:NAME"),
        ("obs:", "use signal:NAME"),
    ]:
        with pytest.raises(ConditionError, match=why):
            parse(bad)
    a, b = Step(index=1, action="look", observation="ok"), Step(index=2, action="look", observation="Nothing happens.")
    assert first_hit([parse("obs:/Nothing/")], [a, b], [[], []])[1] is b


def test_cli_resume_until_stops_at_the_first_match(toy, capsys):
    db = str(toy.db)
    r = cli_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
        "--human",
        "--db",
        db,
    )
    ep = r["episode"]
    toy.llm.push(" go to cabinet 1", " go to shelf 1", " open cabinet 1", " go to cabinet 1")
    code, out, err = cli(
        capsys, "resume", f"{ep}:1", "--until", "obs:/Nothing happens/", "--until", "step:9", "--db", db, "--json"
    )
    assert code == 0, err
    res = json.loads(out)
    assert res["until"] == {"condition": "obs:/Nothing happens/", "step": 3} and not res["done"]
    assert "stopped at step 3: the observation matches /Nothing happens/" in err
    assert [s.action for s in toy.store.versions.steps(res["version"])] == [
        "go to cabinet 1",
        "go to shelf 1",
        "open cabinet 1",
    ]
    toy.llm.push(" go to cabinet 1", " go to table 1")
    res = cli_json(capsys, "resume", str(ep), "--until", "step:5", "--until", "signal:repeated_action", "--db", db)
    # step 4 goes back to the closed cabinet with nothing changed since step 1: a repeat, before step 5
    assert res["until"] == {"condition": "signal:repeated_action", "step": 4}
    assert len(toy.store.versions.steps(res["version"])) == 4
    code, out, err = cli(capsys, "resume", str(ep), "--until", "signal:bogus", "--db", db)
    assert code != 0 and "unknown signal 'bogus'" in err and len(err.strip().splitlines()) == 1


def test_editor_run_to_end_stops_at_a_condition(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.llm.push(" go to cabinet 1", " go to shelf 1", " open cabinet 1", " go to cabinet 1", " go to table 1")
    at = make("editor", episode=ep.id)
    at.text_input(key="until_obs").set_value("Nothing happens")
    ok(at.run())
    assert any("--until 'obs:/Nothing happens/'" in t for t in texts(at))  # a person's pattern: plain text
    click(at, "btn_run_end")
    for _ in range(20):
        if not at.session_state["run"]:
            break
        ok(at.run())
    steps = toy.store.versions.steps(toy.store.episodes.get(ep.id).current_version)
    assert [s.action for s in steps] == ["go to cabinet 1", "go to shelf 1", "open cabinet 1"]
    assert any("Run stopped at step 3: the observation matches /Nothing happens/" in i.value for i in at.info)


def test_a_run_stopped_by_a_condition_says_where_and_why_and_shows_the_step(app):
    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.llm.push(" go to cabinet 1", " go to shelf 1", " go to cabinet 1", " go to table 1")
    at = make("editor", episode=ep.id)
    at.multiselect(key="until_signals").set_value(["repeated_action"])
    ok(at.run())
    click(at, "btn_run_end")
    for _ in range(20):
        if not at.session_state["run"]:
            break
        ok(at.run())
    ok(at.run())
    steps = toy.store.versions.steps(v.id)
    assert len(steps) == 3
    assert any(c.value == "v1: 3 steps · stopped at step 3: repeated action" for c in at.caption), [
        c.value for c in at.caption
    ][:8]
    assert at.session_state["focus_step"][:2] == (v.id, 3)


def test_stop_on_a_single_step_says_stopped_and_a_human_step_updates_it(app):
    import time

    from app_pages import stepjobs
    from sessions import jobs
    from tests.scripted_server import Reply

    toy, make = app
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, timeout_s=20))
    toy.llm.push(Reply(" go to table 1", delay_s=4))
    stepjobs.start(toy.engine, "tab-1", v.id)  # a step in flight, as the Step button starts it
    deadline = time.monotonic() + 30
    while not toy.llm.completion_requests:  # its model call is out (no fixed pause: a busy machine needs longer)
        assert time.monotonic() < deadline, "the step never called the model"
        time.sleep(0.02)
    assert stepjobs.cancel(toy.store, "tab-1", v.id)  # what Stop does
    assert jobs.version_states(toy.store, [v.id]) == {v.id: "stopped"}  # at once, not "running" until a reload
    at = make("editor", episode=ep.id)
    assert any(c.value == "v1: 0 steps · stopped" for c in at.caption), [c.value for c in at.caption][:6]
    assert [s for s in at.selectbox if s.label == "Version"][0].options == ["v1 (stopped) · current"]
    at.toggle(key="human_mode").set_value(True).run()
    at.text_area(key=f"h_action_{v.id}_0").set_value("go to table 1")
    click(at, "h_submit")
    assert any(c.value == "v1: 1 step · open" for c in at.caption), [c.value for c in at.caption][:6]
    assert [s for s in at.selectbox if s.label == "Version"][0].options == ["v1 (open) · current"]


def test_the_stop_conditions_stay_open_when_the_first_one_is_picked(app):
    toy, make = app
    ep, v = _long(toy, 2)
    at = make("editor", episode=ep.id)
    at.multiselect(key="until_signals").set_value(["repeated_action"])
    ok(at.run())
    (box,) = [e for e in at.expander if e.label.startswith("Stop conditions")]
    assert box.label.startswith("Stop conditions (on)") and box.proto.expanded
