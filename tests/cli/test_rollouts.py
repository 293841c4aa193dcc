"""Issue 12: `resample` and `whatif` over the toy room, through the real CLI, client and
scripted model server: JSON contract, groups, continuation, cache bypass, bad input."""

from __future__ import annotations

import json

import pytest

from sessions import rollouts
from tests.cli_helpers import cli, cli_json
from tests.engine_scripts import ROOM_SCRIPT, cfg
from tests.rollout_agents import Agent
from tests.scripted_server import Reply
from tests.toy_envs import ROOM_TASK

SUCCESS = [
    " go to cabinet 1",
    " open cabinet 1",
    " take mug 1 from cabinet 1",
    " go to table 1",
    " put mug 1 in/on table 1",
]


@pytest.fixture
def episode(toy):
    """Episode 1, version 1: the thought, then the winning path (6 steps), at temperature 0."""
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=8))
    assert toy.engine.run(v.id).success
    return ep, v


def counts(toy) -> tuple[int, int]:
    return tuple(toy.store.db.execute(f"select count(*) from {t}").fetchone()[0] for t in ("versions", "steps"))


def test_resample_contract_groups_and_rerun_continues(toy, episode, capsys):
    agent = Agent()
    toy.llm.set_responder(agent)
    toy.llm.requests.clear()
    db = str(toy.db)
    out = cli_json(
        capsys, "resample", "1", "--step", "2", "--n", "4", "--temperature", "0.7", "--concurrency", "2", "--db", db
    )
    assert set(out) == {"n", "success", "success_rate", "ci95", "versions", "first"}
    assert out["n"] == 4 and out["success"] == 2 and out["success_rate"] == 0.5
    assert out["ci95"] == pytest.approx([0.15003898915214947, 0.8499610108478506])  # Wilson 2/4
    assert sorted(out["first"], key=lambda f: f["text"]) == [
        {"text": "go to cabinet 1", "count": 2},
        {"text": "go to shelf 1", "count": 2},
    ]
    assert len(set(out["versions"])) == 4 and 1 not in out["versions"]
    for vid in out["versions"]:
        steps = toy.store.versions.steps(vid)
        original = toy.store.versions.steps(1)
        assert steps[0].id == original[0].id  # step 1 is shared, not copied
        assert steps[1].id != original[1].id and steps[1].source == "model"
        v = toy.store.versions.get(vid)
        assert v.outcome.done and v.parent_version == 1
        assert v.outcome.success == (len(steps) == 6) and (v.outcome.success or len(steps) == 8)
    # every sample reached the model, at the asked temperature (never from the cache)
    bodies = [r.body for r in toy.llm.completion_requests]
    model_steps = sum(len(toy.store.versions.steps(v)) - 1 for v in out["versions"])
    assert len(bodies) == model_steps == agent.calls and all(b["temperature"] == 0.7 for b in bodies)
    assert toy.store.episodes.get(1).current_version == 1  # rollouts do not take over the episode
    assert toy.store.episodes.get(1).config.temperature == 0  # nor change its config

    # the same command again: nothing new is sampled, the same versions are counted
    before = len(toy.llm.completion_requests)
    again = cli_json(capsys, "resample", "1", "--step", "2", "--n", "4", "--temperature", "0.7", "--db", db)
    assert again == out and len(toy.llm.completion_requests) == before
    # a larger N continues the group: only the two missing rollouts are made
    more = cli_json(capsys, "resample", "1", "--step", "2", "--n", "6", "--temperature", "0.7", "--db", db)
    assert more["n"] == 6 and more["versions"][:4] == out["versions"] and more["success"] == 3
    (g,) = rollouts.groups(toy.store, 1)
    assert (g.kind, g.step, g.n, g.config.temperature) == ("resample", 2, 6, 0.7)
    assert list(g.members.values()) == more["versions"]

    # `versions` shows the group as one node, and its members when expanded
    code, text, _ = cli(capsys, "versions", "1", "--db", db)
    assert "resample @2: 3/6 success" in text and "r1\t" not in text
    code, text, _ = cli(capsys, "versions", "1", "--expand", "--db", db)
    assert "    r1\tfrom v1\t" in text and "v2\t" not in text  # rollouts are r1, r2, ... (issue 39)
    rows = cli_json(capsys, "versions", "1", "--db", db)
    assert {r["group"] for r in rows if r["version"] in more["versions"]} == {g.id}
    assert next(r for r in rows if r["version"] == 1)["group"] is None


def test_rollouts_pin_what_they_ran_with_and_the_source_keeps_its_settings(toy, episode, capsys):
    toy.llm.set_responder(Agent())
    toy.llm.requests.clear()
    db = str(toy.db)
    prompt_before = toy.engine.prompts.prompt(1)
    out = cli_json(
        capsys, "resample", "1", "--step", "2", "--n", "2", "--temperature", "0.9", "--model", "other-model", "--db", db
    )
    assert {r.body["model"] for r in toy.llm.completion_requests} == {"other-model"}  # the flags reached the model
    for vid in out["versions"]:  # each rollout records the settings its steps were sampled with
        pinned = toy.store.versions.config(vid)
        assert (pinned.model, pinned.temperature) == ("other-model", 0.9)
    assert (toy.store.versions.config(1).model, toy.store.versions.config(1).temperature) == ("scripted-model", 0)
    assert toy.store.episodes.get(1).config.model == "scripted-model"  # nor does the episode's default change
    assert toy.engine.prompts.prompt(1) == prompt_before
    again = cli_json(
        capsys, "resample", "1", "--step", "2", "--n", "2", "--temperature", "0.9", "--model", "other-model", "--db", db
    )
    assert again["versions"] == out["versions"]  # the same settings find the same group


def test_whatif_effect_of_a_hint(toy, episode, capsys):
    agent = Agent(choose=lambda: " go to shelf 1")  # unaided, the agent always fails
    toy.llm.set_responder(agent)
    out = cli_json(
        capsys,
        "whatif",
        "1",
        "--step",
        "2",
        "--insert-thought",
        "The mug is in the cabinet.",
        "--n",
        "5",
        "--temperature",
        "1",
        "--db",
        str(toy.db),
    )
    assert set(out) == {"control", "treatment", "effect", "effect_ci95", "p_value", "p_better", "p_worse", "method"}
    for arm in ("control", "treatment"):
        assert set(out[arm]) == {"n", "success", "success_rate", "ci95", "versions"}
    assert out["control"]["success"] == 0 and out["treatment"]["success"] == 5 and out["effect"] == 1.0
    # one procedure (issue 40): at 5 per arm Boschloo's exact unconditional test and the interval inverting it
    from scipy.stats import boschloo_exact

    assert out["p_value"] == pytest.approx(boschloo_exact([[5, 0], [0, 5]], alternative="two-sided").pvalue)
    assert "Boschloo" in out["method"]
    lo, hi = out["effect_ci95"]
    assert 0 < lo < 1 and hi == 1.0
    for vid in out["treatment"]["versions"]:
        steps = toy.store.versions.steps(vid)
        assert steps[1].thought == "The mug is in the cabinet." and steps[1].source == "human"
        assert steps[1].edit.kind == "insert_thought"
    kinds = sorted(g.kind for g in rollouts.groups(toy.store, 1))
    assert kinds == ["control", "treatment"]
    _labels_from_counts_agree(toy, 1, "0/5 success")


def test_temperature_zero_warns_and_still_samples(toy, episode, capsys):
    agent = Agent(choose=lambda: " go to cabinet 1")
    toy.llm.set_responder(agent)
    code, out, err = cli(capsys, "resample", "1", "--step", "2", "--n", "3", "--db", str(toy.db), "--json")
    assert code == 0 and "warning: temperature is 0" in err
    # the original run's calls are in the cache, yet each of the 3 samples asked the model
    assert agent.calls == 3 * 5 and json.loads(out)["success"] == 3


def test_endpoint_failing_midway_keeps_finished_and_rerun_continues(toy, episode, capsys):
    agent = Agent(choose=lambda: " go to cabinet 1")
    healthy = {"left": 10}  # two rollouts' worth of calls, then the server breaks

    def flaky(body):
        if healthy["left"] <= 0:
            return Reply(status=400, message="model overloaded")
        healthy["left"] -= 1
        return agent(body)

    toy.llm.set_responder(flaky)
    db = str(toy.db)
    code, out, err = cli(
        capsys,
        "resample",
        "1",
        "--step",
        "2",
        "--n",
        "5",
        "--temperature",
        "0.5",
        "--concurrency",
        "1",
        "--db",
        db,
        "--json",
    )
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: ") and "model overloaded" in err and "2 finished rollout(s) are kept" in err
    (g,) = rollouts.groups(toy.store, 1)
    finished = [g.members[p] for p in (0, 1)]
    assert all(toy.store.versions.get(v).outcome.success for v in finished)
    failed = [v for p, v in g.members.items() if p > 1]
    assert failed and all(toy.store.versions.get(v).error for v in failed)
    _labels_from_counts_agree(toy, 1, "2/2 success, 3 unfinished")

    toy.llm.set_responder(agent)
    res = cli_json(capsys, "resample", "1", "--step", "2", "--n", "5", "--temperature", "0.5", "--db", db)
    assert res["n"] == 5 and res["success"] == 5 and res["versions"][:2] == finished
    assert set(failed) <= set(res["versions"])  # the broken rollouts were continued, not replaced
    _labels_from_counts_agree(toy, 1, "5/5 success")


def _labels_from_counts_agree(toy, episode: int, says: str) -> None:
    """Issue 44: a group's label from its counts (one query) is the one its members' records give."""
    from agent.rollouts import group_label, group_stats, version_groups

    member, labels = version_groups(toy.engine, episode)
    groups = rollouts.groups(toy.store, episode)
    assert labels == {g.id: group_label(group_stats(toy.engine, g)) for g in groups}
    assert any(label.endswith(says) for label in labels.values()), labels
    assert member == {v: g.id for g in groups for v in g.members.values()}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["resample", "1", "--step", "2", "--n", "0"], "N must be between 1 and 1000"),
        (["resample", "1", "--step", "2", "--n", "1001"], "N must be between 1 and 1000"),
        (["resample", "1", "--step", "9", "--n", "2"], "step 9 is out of range"),
        (["resample", "1", "--step", "0", "--n", "2"], "step 0 is out of range"),
        (["resample", "1", "--step", "4", "--n", "2", "--max-steps", "3"], "leaves no room"),
        (["resample", "1", "--step", "2", "--n", "2", "--concurrency", "0"], "concurrency must be at least 1"),
        (["whatif", "1", "--at", "first:[", "--thought", "x", "--n", "2"], "bad regular expression"),
        (["whatif", "1", "--step", "1", "--action", "go to table 1", "--n", "2"], "is a thought, not an action"),
        (["whatif", "1", "--step", "2", "--thought", "x", "--n", "2"], "no thought to rewrite"),
        (["whatif", "1", "--step", "7", "--insert-thought", "x", "--n", "2"], "step 7 is out of range"),
        (
            ["whatif", "--at", "first:nothing-like-this", "--experiment", "nope", "--thought", "x", "--n", "2"],
            "unknown experiment",
        ),
    ],
)
def test_bad_input_one_line_error_nothing_made(toy, episode, capsys, argv, message):
    before = counts(toy)
    toy.llm.requests.clear()
    code, out, err = cli(capsys, *argv, "--db", str(toy.db))
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert counts(toy) == before and toy.llm.completion_requests == []
    assert toy.store.db.execute("select count(*) from rollout_members").fetchone()[0] == 0


def test_whatif_batch_over_an_experiments_failed_episodes(toy, capsys):
    from sessions import experiments

    exp = experiments.create(
        toy.store,
        name="exp1",
        env="alfworld",
        method="react",
        config=cfg(toy.llm),
        tasks=[ROOM_TASK, ROOM_TASK.model_copy(update={"id": "toy/room-2"})],
    )
    items = experiments.items(toy.store, exp.id)
    toy.llm.push(" think: Where is the mug?", *[" go to shelf 1"] * 3, *ROOM_SCRIPT)
    for item, config in zip(items, (cfg(toy.llm, max_steps=4, cache=False), cfg(toy.llm, cache=False))):
        ep_id, _ = experiments.ensure_episode(toy.store, item.id, config, {}, None)
        toy.store.episodes.set_config(ep_id, config)
        rep = toy.engine.run(toy.store.episodes.get(ep_id).current_version)
        experiments.record_item(toy.store, item.id, status="done", version_id=rep.version, success=rep.success)
    failed_ep = experiments.items(toy.store, exp.id)[0].episode_id
    toy.llm.set_responder(Agent(choose=lambda: " go to shelf 1"))
    out = cli_json(
        capsys,
        "whatif",
        "--experiment",
        "exp1",
        "--where",
        "failed",
        "--at",
        "first:shelf",
        "--insert-thought",
        "The mug is in the cabinet.",
        "--n",
        "2",
        "--temperature",
        "0.9",
        "--max-steps",
        "8",
        "--db",
        str(toy.db),
    )
    (one,) = out["episodes"]
    assert (one["episode"], one["step"]) == (failed_ep, 2)  # step 2 is the first to go to the shelf
    assert one["control"]["success"] == 0 and one["treatment"]["success"] == 2 and one["effect"] == 1.0
    assert out["pooled"] is None and "at least 2 episodes" in out["not_pooled"]  # one episode: no pool
    # without --where: the successful episode is included too; a pattern it lacks skips it
    out = cli_json(
        capsys,
        "whatif",
        "--experiment",
        str(exp.id),
        "--at",
        "first:shelf",
        "--insert-thought",
        "The mug is in the cabinet.",
        "--n",
        "2",
        "--temperature",
        "0.9",
        "--max-steps",
        "8",
        "--db",
        str(toy.db),
    )
    assert [e.get("skipped") for e in out["episodes"]] == [None, "no step matches 'shelf'"]
    assert out["episodes"][0] == one  # the same request again: the finished rollouts are reused


def test_real_alfworld_rollouts_replay_faithfully(scripted_llm, tmp_path, capsys):
    """Concurrent rollouts on the real engine (one game per worker): each rollout version
    replays in a fresh Engine with every observation checked."""
    from agent.engine import Engine
    from sessions.store import Store
    from tests.alfworld_helpers import first_task, walkthrough

    task = first_task("pick_and_place_simple")
    walk = walkthrough(task)
    db = str(tmp_path / "r.db")
    scripted_llm.push(" think: I will look around.", " " + walk[0], " look", " look")
    res = cli_json(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        task.id,
        "--base-url",
        scripted_llm.base_url,
        "--max-steps",
        "4",
        "--db",
        db,
    )
    assert res["done"] and res["success"] is False

    def responder(body):  # follows the walkthrough, except that after its first step it looks around
        last = body["prompt"].rstrip(">").rstrip("\n").rsplit("\n> ", 1)[-1].split("\n")[0]
        if last in walk[1:-1]:
            return " " + walk[walk.index(last) + 1]
        return " look"

    scripted_llm.set_responder(responder)
    out = cli_json(
        capsys,
        "whatif",
        str(res["episode"]),
        "--step",
        "3",
        "--action",
        walk[1],
        "--n",
        "3",
        "--temperature",
        "0.8",
        "--concurrency",
        "3",
        "--max-steps",
        str(len(walk) + 2),
        "--db",
        db,
    )
    assert out["control"]["success"] == 0 and out["treatment"]["success"] == 3
    eng = Engine(Store(db))  # as after a restart: no live environments
    ep = eng.store.episodes.get(res["episode"])
    for vid in out["control"]["versions"] + out["treatment"]["versions"]:
        eng.envs.forget_env(ep.id)
        steps = eng.steps(eng.store.versions.get(vid))
        eng.envs.env_at(ep, steps)  # raises ReplayMismatch if any observation differs
        assert steps[2].action == (walk[1] if vid in out["treatment"]["versions"] else "look")


def test_ctrl_c_stops_after_the_current_step_and_a_rerun_continues(toy, episode, capsys):
    import signal
    import subprocess
    import sys
    import time

    from tests.cli_helpers import CHILD, ROOT

    agent = Agent(choose=lambda: " go to cabinet 1")
    toy.llm.set_responder(lambda body: Reply(text=agent(body), delay_s=0.1))
    script = toy.db.parent / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(script),
            "resample",
            "1",
            "--step",
            "2",
            "--n",
            "8",
            "--temperature",
            "0.5",
            "--concurrency",
            "2",
            "--db",
            str(toy.db),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while agent.calls < 12 and time.time() < deadline:  # two rollouts finished, two in flight
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and out == "" and err.startswith("stopped: ") and err.count("\n") == 1
    (g,) = rollouts.groups(toy.store, 1)
    states = [toy.store.versions.get(v) for v in g.members.values()]
    finished = [v.id for v in states if v.outcome.done]
    assert 2 <= len(finished) < 8 and len(g.members) < 8  # no new rollout started after Ctrl-C
    assert all(v.outcome.done or v.status == "stopped" for v in states)
    toy.llm.set_responder(agent)
    res = cli_json(capsys, "resample", "1", "--step", "2", "--n", "8", "--temperature", "0.5", "--db", str(toy.db))
    assert res["n"] == 8 and res["success"] == 8 and set(finished) <= set(res["versions"])


def test_wikipedia_resample_and_thought_whatif(toy, capsys):
    """The Wikipedia format: a rewritten thought waits for the model to write its action."""
    import re

    from tests.engine_scripts import WIKI_SCRIPT
    from tests.toy_envs import WIKI_TASK

    toy.llm.push(*WIKI_SCRIPT)
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    assert toy.engine.run(v.id).success

    def respond(body):
        prompt = body["prompt"]
        i = int(re.findall(r"(?:Thought|Action) (\d+):", prompt)[-1])
        if prompt.endswith(f"Action {i}:"):  # the action for a person's thought
            return " Finish[1650]"
        return f" So the answer is 1712.\nAction {i}: Finish[1712]"  # the province's year: wrong

    toy.llm.set_responder(respond)
    out = cli_json(
        capsys, "resample", str(ep.id), "--step", "2", "--n", "2", "--temperature", "0.5", "--db", str(toy.db)
    )
    assert out["success"] == 0 and out["first"] == [
        {"text": "Thought 2: So the answer is 1712.\nAction 2: Finish[1712]", "count": 2}
    ]
    hint = "The capital Marrowgate was founded in 1650."
    out = cli_json(
        capsys,
        "whatif",
        str(ep.id),
        "--step",
        "2",
        "--thought",
        hint,
        "--n",
        "2",
        "--temperature",
        "0.5",
        "--db",
        str(toy.db),
    )
    assert out["control"]["success"] == 0 and out["treatment"]["success"] == 2
    for vid in out["treatment"]["versions"]:
        s2 = toy.store.versions.steps(vid)[1]
        assert (s2.thought, s2.action, s2.source) == (hint, "Finish[1650]", "human")


def _arm(success: int, n: int):
    from agent.rollout_stats import GroupStats

    return GroupStats(None, list(range(n)), success)


def test_an_empty_arm_has_no_effect_and_no_interval():
    """n = 0 in an arm: `effect` is null, and so is `effect_ci95` (it was a finite [-1, x])."""
    from agent.rollout_stats import Effect

    e = Effect(_arm(0, 0), _arm(3, 4)).as_json()
    assert e["effect"] is None and e["effect_ci95"] is None
    e = Effect(_arm(0, 5), _arm(5, 5)).as_json()
    assert e["effect"] == 1.0 and e["effect_ci95"][1] == 1.0
    assert e["control"]["ci95"][0] == 0.0 and e["treatment"]["ci95"][1] == 1.0  # exact, not 5.6e-17


def test_pooled_whatif_is_stratified_by_episode():
    """Rollouts of one episode share its state: pooling sums nothing across episodes. Two
    episodes where the edit changes nothing inside either, with unequal rollouts per arm:
    the summed arms would show +67 points (Fisher p < 1e-6); stratified, the effect is 0."""
    from agent.rollout_stats import Effect, pooled

    effects = [Effect(_arm(2, 2), _arm(10, 10)), Effect(_arm(0, 10), _arm(0, 2))] * 5
    out = pooled(effects).as_json()
    assert out["effect"] == 0.0 and out["p_value"] == 1.0
    assert out["treatment"]["n"] == 60 and out["control"]["n"] == 60  # the sums, counts only
    assert "ci95" not in out["treatment"] and "success_rate" not in out["control"]
    assert out["episodes"] == 10 and "Cochran-Mantel-Haenszel" in out["method"]
