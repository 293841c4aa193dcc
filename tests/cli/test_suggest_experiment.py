"""`suggest --experiment` over an experiment's failures: killed with -9 then the same command
finishes, accept-all-proven adds the finished fixes to an exemplar set, and a failure a live job
holds is left to it; through the real CLI, client and scripted model server."""

from __future__ import annotations

import json
import os
from contextlib import closing
from pathlib import Path

from react_editor.main import main
from sessions import suggestions
from sessions.store import Store
from tests.cli_helpers import cli
from tests.experiment_agents import wiki_agent
from tests.scripted_server import Reply, prompt_text
from tests.suggest_agents import CRITIC_MARK

ROOT = Path(__file__).resolve().parents[2]


def _spawn(args: list, env: dict):
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "react_editor.main", *map(str, args)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wiki_with_critic(latency_s: float):
    """Every task answered wrongly (a failure); the critic proposes two thought edits."""
    agent = wiki_agent({}, latency_s=latency_s)
    answer = json.dumps(
        {
            "candidates": [
                {"step": 1, "kind": "rewrite_thought", "text": "I should search first.", "rationale": "a"},
                {"step": 1, "kind": "insert_thought_before", "text": "Read the question twice.", "rationale": "b"},
            ]
        }
    )

    def respond(body):
        if CRITIC_MARK in prompt_text(body):
            return Reply(text=answer, delay_s=latency_s)
        return agent(body)

    return respond


def _verified(store) -> dict[int, tuple]:
    return {
        r[0]: (r[1], r[2])
        for r in store.db.execute("select id, result, updated_at from candidates where state = 'verified'")
    }


def test_kill_9_during_suggest_experiment_then_the_same_command_finishes(tmp_path, scripted_llm, monkeypatch, capsys):
    import signal
    import time
    from contextlib import closing

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    scripted_llm.set_responder(_wiki_with_critic(0.0))
    db_file = tmp_path / "x.db"
    assert (
        main(
            [
                "experiment",
                "run",
                "--env",
                "hotpotqa",
                "--limit",
                "3",
                "--name",
                "e",
                "--model",
                "m",
                "--base-url",
                scripted_llm.base_url,
                "--db",
                str(db_file),
                "--json",
            ]
        )
        == 0
    )
    scripted_llm.set_responder(_wiki_with_critic(0.15))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": str(tmp_path / "cache")}
    argv = [
        "suggest",
        "--experiment",
        "e",
        "--where",
        "failed",
        "--verify",
        "2",
        "--concurrency",
        "2",
        "--db",
        db_file,
        "--json",
    ]
    proc = _spawn(argv, env)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # kill once some, but not all, candidates are verified
        time.sleep(0.05)
        with closing(Store(db_file)) as store:
            if len(_verified(store)) >= 2:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    with closing(Store(db_file)) as store:
        finished = _verified(store)
        assert 2 <= len(finished) < 6
        rollouts_before = store.db.execute("select count(*) from rollout_members").fetchone()[0]
    scripted_llm.set_responder(_wiki_with_critic(0.0))  # the latency was for the kill only
    code = main([str(a) for a in argv])  # the same command again, here
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out.strip().splitlines()[-1])
    assert len(data["failures"]) == 3 and all(r["state"] == "done" for r in data["failures"])
    assert all(r["best"] is not None and r["cost"]["calls"] > 0 for r in data["failures"])
    with closing(Store(db_file)) as store:
        after = _verified(store)
        assert len(after) == 6 and all(after[c] == finished[c] for c in finished)  # never redone
        # each failure: one shared control arm and two treatments of 2 rollouts, none made twice
        groups = store.db.execute("select id, kind, n from rollout_groups").fetchall()
        assert sorted(k for _, k, _ in groups) == ["control"] * 3 + ["treatment"] * 6
        members = store.db.execute("select group_id, count(*) from rollout_members group by group_id").fetchall()
        assert all(n == 2 for _, n in members) and len(members) == 9
        assert store.db.execute("select count(*) from rollout_members").fetchone()[0] >= rollouts_before
        jobs = store.db.execute("select state from jobs where kind = 'suggest' order by id").fetchall()
        assert [j[0] for j in jobs][-1] == "done" and len(jobs) == 2
    critic_calls = [r for r in scripted_llm.completion_requests if CRITIC_MARK in prompt_text(r.body)]
    assert len(critic_calls) <= 4  # one per failure (a kill between an answer and its record may ask again)


def test_accept_all_proven_over_an_experiment_adds_the_finished_fixes_to_an_exemplar_set(
    tmp_path, scripted_llm, monkeypatch, capsys
):
    from sessions import exemplar_sets
    from tests.suggest_agents import MAGIC, hotpot_fixer

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    leak = {"step": 1, "kind": "rewrite_thought", "text": "The answer is Marrowgate.", "rationale": "leak"}
    fix = {"step": 1, "kind": "rewrite_thought", "text": MAGIC, "rationale": "read it again"}
    scripted_llm.set_responder(hotpot_fixer([leak, fix]))
    db_ = str(tmp_path / "x.db")
    assert (
        main(
            [
                "experiment",
                "run",
                "--env",
                "hotpotqa",
                "--limit",
                "2",
                "--name",
                "x",
                "--model",
                "m",
                "--base-url",
                scripted_llm.base_url,
                "--db",
                db_,
            ]
        )
        == 0
    )
    capsys.readouterr()
    with closing(Store(db_)) as store:
        exemplar_sets.create_set(store, "fixes", "hotpotqa")
    code, text, err = cli(
        capsys,
        "suggest",
        "--experiment",
        "x",
        "--where",
        "failed",
        "--limit",
        "1",
        "--verify",
        "5",
        "--accept-all-proven",
        "--exemplar-set",
        "fixes",
        "--db",
        db_,
        "--json",
    )
    assert code == 0, err
    out = json.loads(text)
    (row,) = out["failures"]
    with closing(Store(db_)) as store:
        task = store.episodes.get(row["episode"]).task.id
    # the leakage rule of the experiments: that task of x is now leaked for the set, and the person is told
    assert out["leaked"] == [task]
    assert (
        f"warning: exemplar set 'fixes' now holds a trajectory of 1 task(s) of experiment x: {task} - "
        "leaked for that set"
    ) in err
    assert row["proven"] and row["best"]["number"] == 2 and row["where"] is None  # no signal on a lone Finish
    assert out["proven"] == 1 and out["cost_per_proven_fix"]["calls"] == row["cost"]["calls"] > 0
    # confirmed on fresh rollouts before it was accepted: its reported effect comes from those (issue 40)
    conf = row["confirmation"]
    assert conf["proven"] and conf["positions"] == [6, 10] and conf["treatment"]["n"] == conf["control"]["n"] == 5
    assert (
        "the 5 fresh rollouts per arm at positions 6-10" in conf["rollouts"]
        and "not the 5 screening" in conf["rollouts"]
    )
    assert row["accepted_version"] == out["accepted"][0]
    (made,) = out["accepted"]
    with closing(Store(db_)) as store:
        (entry,) = exemplar_sets.entries(store, "fixes")
        assert entry.version_id == made and store.versions.get(made).outcome.success
        cands = suggestions.latest(store, row["version"]).candidates
        assert cands[0].leaks_answer and cands[0].state == "flagged" and cands[1].state == "accepted"
    code, text, err = cli(capsys, "suggest", str(row["episode"]), "--version", str(made), "--db", db_)
    assert code == 2 and "succeeded: suggestions are for failed" in err


def test_a_failure_held_by_a_live_job_is_left_to_it(tmp_path, scripted_llm, monkeypatch, capsys):
    import sessions.jobs
    from agent.engine import Engine
    from agent.suggest import Critic, Verify
    from agent.suggest_experiment import experiment_rows, suggest_experiment
    from tests.suggest_agents import MAGIC, hotpot_fixer

    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    scripted_llm.set_responder(hotpot_fixer([{"step": 1, "kind": "rewrite_thought", "text": MAGIC, "rationale": "r"}]))
    db_ = str(tmp_path / "x.db")
    assert (
        main(
            [
                "experiment",
                "run",
                "--env",
                "hotpotqa",
                "--limit",
                "2",
                "--name",
                "x",
                "--model",
                "m",
                "--base-url",
                scripted_llm.base_url,
                "--db",
                db_,
            ]
        )
        == 0
    )
    eng = Engine(Store(db_), api_key="sk-test-key-not-real")
    try:
        _, rows = experiment_rows(eng, "x", Critic(), 3, 2, None)
        holder, me = (sessions.jobs.create(eng.store, "suggest") for _ in range(2))
        assert suggestions.claim(eng.store, rows[0][1].id, holder.id, 60, holder=None)
        done = suggest_experiment(eng, rows, Critic(), Verify(n=2), me.id)
        assert [s.id for s in done] == [rows[1][1].id]  # the held one is left to its live job
        assert suggestions.get(eng.store, rows[0][1].id).state == "asking"
        sessions.jobs.finish(eng.store, holder.id, "stopped")  # its job ended: the failure is free
        done = suggest_experiment(eng, rows, Critic(), Verify(n=2), me.id)
        assert [s.state for s in done] == ["done", "done"]
        critic_calls = [r for r in scripted_llm.completion_requests if CRITIC_MARK in prompt_text(r.body)]
        assert len(critic_calls) == 2  # each failure asked once
    finally:
        eng.store.close()
