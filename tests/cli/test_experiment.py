"""Experiments end to end through the CLI (issue 14): the JSON contract, the paper's methods
and back-off rules, scoring, paired comparison, resume, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import closing

import pytest

from react_editor.main import main
from sessions import experiments
from sessions.store import Store
from tests.cli_helpers import run_args
from tests.experiment_agents import alfworld_agent, wiki_agent
from tests.experiment_cli import HOTPOT, ROOT, SUMMARY_KEYS, _cache, cli, half_right  # noqa: F401  (_cache: the autouse fixture)
from tests.scripted_server import Reply


def test_run_and_show_follow_the_json_contract(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT), react_steps=2))
    db = tmp_path / "x.db"
    code, out, err = cli(
        capsys,
        *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "4", "--concurrency", "2", "--name", "first"),
    )
    assert code == 0, err
    assert SUMMARY_KEYS | {"em", "f1"} <= set(out) and "accuracy" not in out
    assert out["name"] == "first" and out["episodes"] == 4 and out["done"] == 4
    assert out["success"] == 2 and out["success_rate"] == 0.5 and out["em"] == 0.5
    types = {r["type"] for r in HOTPOT[:4]}
    assert set(out["by_type"]) >= {"bridge", "comparison"}
    assert sum(v["n"] for v in out["by_type"].values()) == 4 and all(
        set(v) == {"n", "done", "success", "rate"} for v in out["by_type"].values()
    )
    assert types <= set(out["by_type"])
    assert out["tokens"] > 0 and out["cost"] == 0.0 and out["wall_s"] > 0
    assert "4/4 done" in err and "ETA" in err  # the progress bar, on stderr

    code, shown, _ = cli(capsys, "experiment", "show", out["experiment"], "--db", db, "--json")
    assert code == 0 and SUMMARY_KEYS <= set(shown)
    items = shown["items"]
    assert [it["task"] for it in items] == [r["id"] for r in HOTPOT[:4]]
    assert all({"task", "episode", "version", "done", "success"} <= set(it) for it in items)
    assert [it["success"] for it in items] == [True, False, True, False]
    with closing(Store(db)) as store:
        assert len(store.episodes.ids()) == 4
        ep = store.episodes.get(items[0]["episode"])
        assert ep.config.style == "react" and experiments.of_episode(store, ep.id).name == "first"
        steps = store.versions.steps(items[0]["version"])
        assert [s.action for s in steps] == ["Search[Ostwick]", f"Finish[{HOTPOT[0]['answer']}]"]

    code, listed, _ = cli(capsys, "experiment", "list", "--db", db, "--json")
    assert code == 0 and [e["name"] for e in listed] == ["first"]


def test_rerunning_a_finished_experiment_is_free(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    db = tmp_path / "x.db"
    cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "3"))
    sent = len(scripted_llm.completion_requests)
    code, again, _ = cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "3"))
    assert code == 0 and again["success"] == 2 and again["tokens"] == 0 and again["cost"] == 0.0
    assert len(scripted_llm.completion_requests) == sent  # the response cache answered everything


def test_compare_is_paired_over_common_tasks(tmp_path, capsys, scripted_llm):
    db = tmp_path / "x.db"
    scripted_llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT[:4]}))
    _, a, _ = cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "5", "--name", "A"))
    scripted_llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT[:2]}))
    _, b, _ = cli(
        capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "6", "--name", "B", "--method", "act")
    )
    code, c, _ = cli(capsys, "experiment", "compare", "A", "B", "--db", db, "--json")
    assert code == 0 and c["a"]["name"] == "A" and c["b"]["experiment"] == b["experiment"]
    assert c["common"] == 5
    assert (c["both"], c["a_only"], c["b_only"], c["neither"]) == (2, 2, 0, 1)
    assert c["mcnemar_p"] == pytest.approx(0.5)  # 2 discordant pairs, both for A
    lo, hi = c["diff_ci"]
    assert lo <= 0.4 <= hi and c["diff"] == 0.4
    assert "bridge" in c["by_type"] and c["by_type"]["bridge"]["n"] >= 1
    # one procedure, overall and per type: the exact McNemar test and the interval inverting it
    from trajectory.stats import paired_test

    assert c["diff_ci"] == list(paired_test(2, 0, 5).ci95) and lo < 0  # unrounded in JSON (issue 40)
    assert c["p_value"] == c["mcnemar_p"] == pytest.approx(0.5)
    assert "exact McNemar" in c["p_method"] and c["diff_ci_method"] == c["p_method"]
    for p in c["by_type"].values():
        if p["n"]:
            want = paired_test(p["a_only"], p["b_only"], p["n"])
            assert p["diff_ci"] == list(want.ci95) and p["p_value"] == want.p_value
        else:  # an empty type compares nothing: no p (it printed 1.0)
            assert p["p_value"] is None and p["mcnemar_p"] is None and p["diff_ci"] == [None, None]


def _pairs(both: int, a_only: int, b_only: int, neither: int) -> tuple[list[bool], list[bool]]:
    xa = [True] * both + [True] * a_only + [False] * b_only + [False] * neither
    xb = [True] * both + [False] * a_only + [True] * b_only + [False] * neither
    return xa, xb


def test_paired_interval_and_exact_test_tell_one_story():
    """The issue: 4 tasks only A solved, 0 only B solved, out of 20; exact McNemar p = 0.125,
    so the 95% interval of the difference must include 0, for every split of the other 16
    tasks into both/neither (method 10 excluded 0 at 8 both / 8 neither)."""
    from agent.experiment_scores import _pair_counts

    for both in range(17):
        r = _pair_counts(*_pairs(both, 4, 0, 16 - both))
        assert (r["n"], r["a_only"], r["b_only"], r["diff"]) == (20, 4, 0, 0.2)
        assert r["mcnemar_p"] == pytest.approx(0.125)
        lo, hi = r["diff_ci"]
        assert lo < 0 < 0.2 < hi, both


def test_paired_interval_is_not_zero_width_when_every_pair_agrees():
    from agent.experiment_scores import _pair_counts

    for both in range(21):
        r = _pair_counts(*_pairs(both, 0, 0, 20 - both))
        lo, hi = r["diff_ci"]
        assert r["mcnemar_p"] == 1.0 and r["diff"] == 0.0
        assert [lo, hi] != [0.0, 0.0] and lo < 0 < hi, both


def test_sample_is_reproducible_and_recorded(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent({}))
    db = tmp_path / "x.db"
    ids = []
    for name in ("s1", "s2"):
        cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--sample", "5", "--seed", "7", "--name", name))
        _, shown, _ = cli(capsys, "experiment", "show", name, "--db", db, "--json")
        ids.append([it["task"] for it in shown["items"]])
    assert ids[0] == ids[1] and len(ids[0]) == 5
    with closing(Store(db)) as store:
        assert experiments.get(store, "s1").params["sample"] == "5" and experiments.get(store, "s1").params["seed"] == 7


def test_sample_paper_is_the_notebooks_subset(tmp_path, capsys, monkeypatch, scripted_llm):
    import random

    rows = [{"question": f"Question number {i}?", "answer": str(i), "type": "bridge"} for i in range(7405)]
    (tmp_path / "hotpot_dev_v1_simplified.json").write_text(json.dumps(rows))
    monkeypatch.setenv("REACT_DATA_DIR", str(tmp_path))
    from agent.task_selection import select_tasks

    idxs = list(range(7405))
    random.Random(233).shuffle(idxs)
    tasks = select_tasks("hotpotqa", "react", sample="paper")
    assert [t.id for t in tasks] == [str(i) for i in idxs[:500]]
    code, _, err = cli(capsys, *run_args(scripted_llm, tmp_path / "x.db", "--env", "hotpotqa", "--sample", "paper"))
    assert code == 2 and "7405" in err and len(err.strip().splitlines()) == 1


def test_alfworld_experiment_scores_the_six_types(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(alfworld_agent())
    db = tmp_path / "x.db"
    code, out, _ = cli(
        capsys,
        *run_args(
            scripted_llm,
            db,
            "--env",
            "alfworld",
            "--limit",
            "2",
            "--method",
            "act",
            "--max-steps",
            "3",
            "--concurrency",
            "2",
        ),
    )
    assert code == 0 and out["done"] == 2 and out["success"] == 0
    assert len(out["by_type"]) == 6 and "pick_and_place_simple" in out["by_type"]
    assert out["task_set"] == "built-in sample (generated)"  # named as the project's own, not valid_unseen
    with closing(Store(db)) as store:
        for it in experiments.items(store, out["experiment"]):
            assert "/builtin/sample/" in it.task.data["game"].replace("\\", "/")
            steps = store.versions.steps(it.version_id)
            assert len(steps) == 3 and all(s.action.startswith("go to ") for s in steps)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--env", "alfworld", "--method", "cot"], "does not apply to alfworld"),
        (["--env", "hotpotqa", "--method", "tot"], "does not apply to hotpotqa"),
        (["--env", "hotpotqa", "--tasks", " , "], "empty"),
        (["--env", "hotpotqa", "--tasks", "hp-001,hp-999"], "hp-999"),
        (["--env", "hotpotqa", "--tasks", "@/nonexistent/list.txt"], "cannot read task list"),
        (["--env", "hotpotqa", "--tasks", "hp-001,hp-001"], "listed twice"),
        (["--env", "hotpotqa", "--concurrency", "0"], "concurrency"),
        (["--env", "hotpotqa", "--sample", "999"], "the selection has"),
        (["--env", "alfworld", "--sample", "paper"], "--tasks official"),
        (["--env", "hotpotqa", "--temperature", "-1"], "temperature must be between 0 and 2"),
        (["--env", "hotpotqa", "--max-steps", "0"], "max steps must be at least 1"),
        (["--env", "hotpotqa", "--exemplars", "no-such-set"], "no-such-set"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, scripted_llm, argv, needle):
    db = tmp_path / "x.db"
    code, _, err = cli(capsys, *run_args(scripted_llm, db, *argv))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    if db.exists():
        with closing(Store(db)) as store:
            assert experiments.list_all(store) == [] and store.episodes.ids() == []
    assert scripted_llm.completion_requests == []


def test_unknown_experiment_is_one_line(tmp_path, capsys):
    Store(tmp_path / "x.db").close()
    code, _, err = cli(capsys, "experiment", "show", "nope", "--db", tmp_path / "x.db")
    assert code == 2 and err.strip() == "error: unknown experiment 'nope'"


def test_refusing_endpoint_stops_after_a_few_failures_then_resume_retries(tmp_path, capsys, scripted_llm):
    scripted_llm.set_default(Reply(status=401, message="invalid key"))
    db = tmp_path / "x.db"
    code, _, err = cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--concurrency", "2", "--name", "r"))
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "failures in a row" in errors[0] and "authentication failed" in errors[0]
    assert len(scripted_llm.completion_requests) <= 6  # not 26 errors
    with closing(Store(db)) as store:
        exp = experiments.get(store, "r")
        assert exp.status == "aborted"
        failed = [it for it in experiments.items(store, exp.id) if it.status == "error"]
        assert 5 <= len(failed) <= 6 and all("authentication failed" in it.error for it in failed)
        first_episodes = {it.task.id: it.episode_id for it in failed}
    scripted_llm.set_default(None)
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    code, out, _ = cli(capsys, "experiment", "resume", "r", "--db", db, "--json", "--concurrency", "3")
    assert code == 0 and out["done"] == out["episodes"] == len(HOTPOT) and out["status"] == "done"
    with closing(Store(db)) as store:
        items = experiments.items(store, out["experiment"])
        assert len(store.episodes.ids()) == len(HOTPOT)  # a failed episode was continued, not replaced
        assert all(first_episodes[it.task.id] == it.episode_id for it in items if it.task.id in first_episodes)


def _spawn(args: list, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "react_editor.main", *map(str, args)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kill_9_then_resume_finishes_without_duplicates(tmp_path, scripted_llm, capsys, monkeypatch):
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT), latency_s=0.3, react_steps=2))
    db = tmp_path / "x.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": str(tmp_path / "cache")}
    proc = _spawn(
        [
            "experiment",
            "run",
            "--env",
            "hotpotqa",
            "--limit",
            "12",
            "--concurrency",
            "3",
            "--name",
            "k",
            "--model",
            "m",
            "--base-url",
            scripted_llm.base_url,
            "--db",
            db,
            "--json",
        ],
        env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill once some, but not all, tasks are done
        time.sleep(0.05)
        if db.exists():
            with closing(Store(db)) as store:
                exps = experiments.list_all(store)
                done = experiments.counts(store, exps[0].id).get("done", 0) if exps else 0
            if done >= 3:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    with closing(Store(db)) as store:
        exp = experiments.get(store, "k")
        before = {it.task.id: it.episode_id for it in experiments.items(store, exp.id) if it.episode_id}
        assert 3 <= experiments.counts(store, exp.id).get("done", 0) < 12 and exp.status == "running"
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT), react_steps=2))  # the latency was for the kill only
    monkeypatch.setenv("REACT_EDITOR_CACHE", env["REACT_EDITOR_CACHE"])
    code, summary, err = cli(capsys, "experiment", "resume", "k", "--db", db, "--json", "--concurrency", "3")  # here
    assert code == 0, err
    assert summary["done"] == summary["episodes"] == 12 and summary["success"] == 6
    with closing(Store(db)) as store:
        items = experiments.items(store, exp.id)
        assert len(store.episodes.ids()) == 12 and len({it.episode_id for it in items}) == 12
        assert all(before[it.task.id] == it.episode_id for it in items if it.task.id in before)
        for it in items:  # each episode is one clean run: no step recorded twice
            v = store.versions.get(it.version_id)
            assert [s.index for s in store.versions.steps(v.id)] == [1, 2] and v.outcome.done
        assert store.integrity_check() == "ok"


def test_processes_mode_runs_items_in_worker_processes(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    db = tmp_path / "x.db"
    code, out, _ = cli(
        capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "2", "--concurrency", "2", "--processes")
    )
    assert code == 0 and out["done"] == 2 and out["success"] == 1
    with closing(Store(db)) as store:
        assert len(store.episodes.ids()) == 2


def test_rate_limit_slows_the_batch_instead_of_failing_episodes(tmp_path, capsys, scripted_llm):
    from agent.client import public_url
    from agent.ratelimit import gate_for

    scripted_llm.push(Reply(status=429, retry_after=0.5, message="slow down"))
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    (tmp_path / "ids.txt").write_text("# three tasks\nhp-001\nhp-002\n\nhp-003\n")
    db = tmp_path / "x.db"
    pauses = gate_for(public_url(scripted_llm.base_url)).pauses
    code, out, _ = cli(
        capsys,
        *run_args(scripted_llm, db, "--env", "hotpotqa", "--tasks", f"@{tmp_path / 'ids.txt'}", "--concurrency", "3"),
    )
    assert code == 0 and out["done"] == 3 and out["success"] == 2
    assert gate_for(public_url(scripted_llm.base_url)).pauses == pauses + 1
    first, *rest = scripted_llm.completion_requests
    gaps = [r.received_at - first.received_at for r in rest]
    # only the other two workers' first calls can be in flight when the 429 comes back; every
    # later call waits out the 0.5 s pause (a slow machine only makes gaps longer, never shorter)
    assert sum(g < 0.45 for g in gaps) <= 2 and len(gaps) >= 3


def test_cost_uses_the_prices_from_settings(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent({}))
    db = tmp_path / "x.db"
    with closing(Store(db)) as store:
        store.settings.set("model_prices", {"m": {"prompt": 1000.0, "completion": 2000.0}})
    code, out, _ = cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "1"))
    assert code == 0 and out["tokens"] > 0
    with closing(Store(db)) as store:
        calls = store.calls.of_episode(store.episodes.ids()[0])
    p = sum(c.usage.prompt_tokens for c in calls)
    c = sum(c.usage.completion_tokens for c in calls)
    assert out["tokens"] == p + c and out["cost"] == pytest.approx((p * 1000 + c * 2000) / 1e6)


# ------------------------------------------------------------------ partial runs and phases


def _stop_after(n_done: int):
    """An on_progress that asks the run to stop once n items are finished."""
    import threading

    stop = threading.Event()

    def on_progress(p) -> None:
        if p.done >= n_done:
            stop.set()

    return stop, on_progress


def test_a_stopped_run_is_partial_and_compare_pairs_finished_tasks_only(tmp_path, capsys, scripted_llm):
    """Stopped at 2 of 6 tasks: the 4 unfinished are not failures. Rates are over the
    finished 2, `partial` is true, and compare against a finished run pairs 2 tasks and
    reports the other 4 as `excluded` (McNemar used to count them as A's failures)."""
    from agent import experiment, experiment_runner

    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    db = tmp_path / "x.db"
    code, b, _ = cli(capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--limit", "6", "--name", "B"))
    assert code == 0 and b["partial"] is False and b["done"] == b["episodes"] == 6
    scripted_llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT}))
    with closing(Store(db)) as store:
        a = experiment.create(
            store,
            env="hotpotqa",
            method="react",
            name="A",
            config=experiments.get(store, "B").config.model_copy(update={"cache": False}),
            tasks=[it.task for it in experiments.items(store, b["experiment"])],
        )
    stop, on_progress = _stop_after(2)
    out = experiment_runner.run(str(db), a.id, stop=stop, on_progress=on_progress)
    assert out["status"] == "stopped" and (out["done"], out["episodes"], out["partial"]) == (2, 6, True)
    assert out["success"] == 2 and out["success_rate"] == 1.0 and out["em"] == 1.0 and out["f1"] == 1.0

    code, shown, _ = cli(capsys, "experiment", "show", "A", "--db", db, "--json")
    assert (shown["partial"], shown["done"], shown["episodes"], shown["success_rate"]) == (True, 2, 6, 1.0)
    assert sum(t["done"] for t in shown["by_type"].values()) == 2
    assert main(["experiment", "show", "A", "--db", str(db)]) == 0
    assert "PARTIAL: 2 of 6 tasks finished" in capsys.readouterr().out

    code, c, _ = cli(capsys, "experiment", "compare", "A", "B", "--db", db, "--json")
    assert code == 0 and c["common"] == 2 and c["excluded"] == 4 and c["partial"] is True
    assert c["excluded_why"] == {
        "unfinished_in_a": 4,
        "unfinished_in_b": 0,
        "unfinished_in_both": 0,
        "error_in_a": 0,
        "error_in_b": 0,
        "error_in_both": 0,
        "warning": None,
    }
    assert (c["both"], c["a_only"], c["b_only"], c["neither"]) == (1, 1, 0, 0)
    assert c["mcnemar_p"] == 1.0 and c["diff_ci"][0] < 0 < c["diff_ci"][1]


def test_an_item_follows_its_version_when_it_is_frozen_mid_run(tmp_path, capsys, scripted_llm):
    """The version is annotated (frozen) while the experiment runs: the run goes on in a
    child version and the item points at that child, done with its real success."""
    from agent import experiment, experiment_runner
    from sessions import annotations

    gold = HOTPOT[0]["answer"]
    scripted_llm.set_responder(wiki_agent({HOTPOT[0]["question"]: gold}, react_steps=3))
    db = tmp_path / "x.db"
    with closing(Store(db)) as store:
        from agent.task_selection import select_tasks
        from trajectory.records import AgentConfig

        cfg = AgentConfig(model="m", base_url=scripted_llm.base_url)
        exp = experiment.create(
            store, env="hotpotqa", method="react", config=cfg, name="F", tasks=select_tasks("hotpotqa", "hp-001")
        )
    stop, on_progress = _stop_after(99)
    sent = {"n": 0}

    def freezing(body):
        sent["n"] += 1
        if sent["n"] == 2:  # between steps 1 and 2 a person annotates the running version
            with closing(Store(db)) as s:
                it = experiments.items(s, exp.id)[0]
                annotations.annotate_version(s, s.episodes.get(it.episode_id).current_version, by="ann", notes="looked")
        return wiki_agent({HOTPOT[0]["question"]: gold}, react_steps=3)(body)

    scripted_llm.set_responder(freezing)
    out = experiment_runner.run(str(db), exp.id)
    assert out["done"] == 1 and out["success"] == 1
    with closing(Store(db)) as store:
        it = experiments.items(store, exp.id)[0]
        v = store.versions.get(it.version_id)
        assert v.outcome.done and it.success is True and v.parent_version is not None
        assert it.phases == {"react": v.id}
