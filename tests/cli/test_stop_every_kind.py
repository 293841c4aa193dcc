"""Stop means stop, for every job kind (issue 38, item 4): `react-editor jobs stop N` ends a
`run`, `resume`, `experiment`, `resample`, `whatif` (also `--experiment`) or `suggest` whose
model calls hang on a server that never answers. Each command runs in its own process (the real CLI, client and
job runner); once its requests are in flight at the server, `jobs stop N` is run, and then:

- the command exits 130 with one line `stopped: ...`;
- the server saw no request after the stop (no retry, no new rollout, no next step);
- the job row reads "stopped";
- the saved versions are intact (no step added or lost; the versions there before keep
  their steps and outcome).

The 30 s wait is a hang guard only (the server never answers: without the fix the command
waits for its client's timeout and retries); `benchmarks/stop_latency.py` measures Stop ->
job end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

import sessions.jobs
from react_editor.main import main
from sessions.store import Store
from tests.cli_helpers import CHILD
from tests.engine_scripts import ROOM_SCRIPT, cfg
from tests.scripted_server import Reply, prompt_text
from tests.suggest_agents import CRITIC_MARK, GOOD, critic_json, fail_episode
from tests.toy_envs import ROOM_TASK

ROOT = Path(__file__).resolve().parents[2]
STOPPED_EXIT = 130
HANG_GUARD_S = 30.0  # not a timing assert: without the fix the command outlives it
HANG = Reply(hang=True)


def _episode(toy) -> None:
    """Episode 1, v1: the toy room won in six steps (rollouts start from step 2)."""
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=8))
    assert toy.engine.run(v.id).success


def _half_run(toy) -> None:
    """Episode 1, v1: two steps of the toy room, open (resume goes on from there)."""
    toy.llm.push(*ROOM_SCRIPT[:2])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=8))
    assert toy.engine.run(v.id, max_steps=2).added == 2


def _experiment_done(toy) -> None:
    """Experiment "exp1": one toy-room task, done (its episode won in six steps)."""
    from sessions import experiments

    exp = experiments.create(
        toy.store, name="exp1", env="alfworld", method="react", config=cfg(toy.llm), tasks=[ROOM_TASK]
    )
    (item,) = experiments.items(toy.store, exp.id)
    ep_id, _ = experiments.ensure_episode(toy.store, item.id, cfg(toy.llm, max_steps=8), {}, None)
    toy.llm.push(*ROOM_SCRIPT)
    rep = toy.engine.run(toy.store.episodes.get(ep_id).current_version)
    experiments.record_item(toy.store, item.id, status="done", version_id=rep.version, success=rep.success)


def _critic_then_hang(body: dict) -> Reply:
    """The critic answers at once with one candidate; every agent step hangs (verification)."""
    return Reply(text=critic_json(GOOD)) if CRITIC_MARK in prompt_text(body) else HANG


# kind -> (the job's kind, setup(toy), the command after the program, requests in flight, server's answer)
KINDS = {
    "run": (
        "run",
        None,
        ["run", "--env", "alfworld", "--task", "toy/room-1", "--model", "scripted-model", "--base-url", "{url}"],
        1,
        HANG,
    ),
    "resume": ("run", _half_run, ["resume", "1"], 1, HANG),
    "experiment": (
        "experiment",
        None,
        [
            "experiment",
            "run",
            "--env",
            "hotpotqa",
            "--limit",
            "3",
            "--concurrency",
            "3",
            "--name",
            "k",
            "--model",
            "m",
            "--base-url",
            "{url}",
        ],
        3,
        HANG,
    ),
    "resample": (
        "resample",
        _episode,
        ["resample", "1", "--step", "2", "--n", "4", "--temperature", "0.7", "--concurrency", "2"],
        2,
        HANG,
    ),
    "whatif": (
        "whatif",
        _episode,
        [
            "whatif",
            "1",
            "--step",
            "2",
            "--insert-thought",
            "The mug is in the cabinet.",
            "--n",
            "2",
            "--temperature",
            "0.7",
            "--concurrency",
            "2",
        ],
        2,
        HANG,
    ),
    "whatif-experiment": (
        "whatif",
        _experiment_done,
        [
            "whatif",
            "--experiment",
            "exp1",
            "--at",
            "2",
            "--insert-thought",
            "The mug is in the cabinet.",
            "--n",
            "2",
            "--temperature",
            "0.7",
            "--concurrency",
            "2",
        ],
        2,
        HANG,
    ),
    "suggest-critic": ("suggest", fail_episode, ["suggest", "1", "--candidates", "1", "--verify", "2"], 1, HANG),
    "suggest-verify": (
        "suggest",
        fail_episode,
        ["suggest", "1", "--candidates", "1", "--verify", "2", "--concurrency", "2"],
        3,
        _critic_then_hang,
    ),
}


def _saved(store: Store) -> tuple[list, list]:
    """Every step (id, parent, index) and every version's leaf and outcome."""
    steps = store.db.execute("select id, parent_id, idx from steps order by id").fetchall()
    versions = store.db.execute("select id, leaf_step_id, outcome from versions order by id").fetchall()
    return [tuple(r) for r in steps], [tuple(r) for r in versions]


def _wait(cond, what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("name", list(KINDS))
def test_jobs_stop_ends_every_kind_while_its_calls_hang(name, toy, tmp_path):
    kind, setup, argv, in_flight, answer = KINDS[name]
    if setup is not None:
        setup(toy)
    before = _saved(toy.store)
    toy.llm.requests.clear()
    toy.llm.set_responder(answer if callable(answer) and not isinstance(answer, Reply) else (lambda body: answer))
    db = str(toy.db)
    script = tmp_path / "child.py"
    # the toy environments, in the child (`experiment` runs the real HotpotQA env: `-m react_editor.main`)
    script.write_text(CHILD.format(root=str(ROOT)))
    head = [sys.executable, "-m", "react_editor.main"] if name == "experiment" else [sys.executable, str(script)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        head + [a.replace("{url}", toy.llm.base_url) for a in argv] + ["--db", db],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait(lambda: len(toy.llm.completion_requests) >= in_flight, "the requests in flight")
        (job,) = [j for j in sessions.jobs.listing(toy.store) if j.kind == kind and j.active]
        at_stop = _saved(toy.store)
        stopped_at = time.monotonic()
        assert main(["jobs", "stop", str(job.id), "--db", db]) == 0
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    lines = err.strip().splitlines()
    assert proc.returncode == STOPPED_EXIT, err
    assert lines and lines[-1].startswith("stopped: "), err
    late = [r for r in toy.llm.completion_requests if r.received_at > stopped_at]
    assert late == [], f"{len(late)} request(s) left after the stop"
    assert len(toy.llm.completion_requests) == in_flight
    assert sessions.jobs.get(toy.store, job.id).state == "stopped"
    # intact: nothing written after the stop, and what was there before the command is unchanged
    steps, versions = _saved(toy.store)
    assert steps == at_stop[0]
    assert set(before[0]) <= set(steps) and set(before[1]) <= set(versions)
    with closing(Store(db, create=False, readonly=True)) as fresh:
        assert all(fresh.versions.get(v[0]).error is None for v in versions)
