"""Experiment throughput (issue 14). Prints, last, one JSON object.

A scripted OpenAI-compatible server on 127.0.0.1 answers every request after a fixed
latency (default 0.4 s), through the real client. The same experiment runs at concurrency
1 and at concurrency C (default 6), each on a fresh database (so the response cache never
answers): 12 built-in HotpotQA tasks with ReAct (two model calls each), then 12 built-in
ALFWorld games with Act (a few real engine steps each) - threads, and worker processes.

- `speedup`: HotpotQA wall time at 1 / at C (the ideal is C; the issue asks >= 3.5).
- `overhead_ms_per_episode`: HotpotQA at concurrency 1, wall time minus the model latency
  the episodes waited for, per episode (prompt building, environment, SQLite writes).
- `lease_overhead_ms_per_item`: what item claims add per item (the claim statement in the
  transaction that links the item's episode), on the finished HotpotQA database (<= 5 ms asked).
- `alfworld_speedup`, `alfworld_process_speedup`: the same for ALFWorld with threads and
  with processes (CPU-bound environment steps must not serialize the batch).

Usage: python benchmarks/experiment.py [--latency 0.4] [--concurrency 6] [--alfworld-steps 6] [--tasks 12]
(`--tasks 2 --latency 0 --concurrency 2 --alfworld-steps 1`: the smoke run of tests/benchmarks)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from _root import HERE, ROOT  # noqa: F401  (repo root on sys.path; see _root.py)

sys.path.append(str(HERE))  # last, so worker processes (which re-import this script) find _root

from agent import experiment, experiment_runner  # noqa: E402
from agent.task_selection import select_tasks  # noqa: E402
from sessions.store import Store  # noqa: E402
from tests.experiment_agents import alfworld_agent, wiki_agent  # noqa: E402
from tests.scripted_server import ScriptedLLM  # noqa: E402
from trajectory.records import AgentConfig  # noqa: E402

N_TASKS = 12


def _timed_run(
    workdir: Path,
    tag: str,
    llm: ScriptedLLM,
    env: str,
    method: str,
    concurrency: int,
    max_steps: int | None,
    mode: str = "threads",
    n_tasks: int = N_TASKS,
) -> tuple[float, int, dict]:
    db = workdir / f"{tag}.db"
    store = Store(db)
    config = AgentConfig(model="bench", base_url=llm.base_url, max_steps=max_steps)
    exp = experiment.create(
        store, env=env, method=method, config=config, tasks=select_tasks(env, "builtin", limit=n_tasks), name=tag
    )
    store.close()
    before = len(llm.completion_requests)
    t0 = time.perf_counter()
    out = experiment_runner.run(str(db), exp.id, concurrency=concurrency, mode=mode)
    wall = time.perf_counter() - t0
    assert out["done"] == n_tasks, out
    return wall, len(llm.completion_requests) - before, out


def _lease_overhead(db: Path, rounds: int = 3) -> float:
    """What item leases add per item, in ms of wall time: the claim is one compare-and-set
    statement inside the transaction that links the item's episode (timed here as that
    transaction with and without it); the release rides on the item's result; the
    heartbeat's renewal is one transaction per second per runner, not per item."""
    from sessions import experiments, item_claims, jobs
    from trajectory.records import now

    store = Store(db)
    try:
        job = jobs.create(store, "experiment", experiment_id=1)
        ids = [it.id for it in experiments.items(store, 1)] * rounds

        def timed(claim: bool) -> float:
            t0 = time.perf_counter()
            for item in ids:
                with store.transaction(durable=False):  # as the runner's claim transaction
                    if claim:
                        item_claims.claim(store, item, job.id, 15.0)
                    store.db.execute("update experiment_items set updated_at = ? where id = ?", [now(), item])
            return time.perf_counter() - t0

        with store.transaction():  # measure on items that are not done
            store.db.execute("update experiment_items set status = 'pending'")
        timed(False)  # warm
        plain, claimed = timed(False), timed(True)
        return round((claimed - plain) / len(ids) * 1000, 3)  # (noise can make it negative)
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.4)
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--alfworld-steps", type=int, default=6)
    ap.add_argument("--skip-alfworld", action="store_true")
    ap.add_argument("--tasks", type=int, default=N_TASKS, help=f"tasks (and games) per run (default {N_TASKS})")
    args = ap.parse_args()
    c, n = args.concurrency, args.tasks
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM() as llm:
        work = Path(tmp)
        os.environ.setdefault("REACT_EDITOR_CACHE", str(work / "cache"))
        rows = [json.loads(line) for line in (ROOT / "envs/wikipedia/corpus/hotpotqa.jsonl").read_text().splitlines()]
        llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in rows}, latency_s=args.latency, react_steps=2))
        _timed_run(work, "warmup", llm, "hotpotqa", "react", 1, None, n_tasks=n)  # builds the wiki, imports everything
        w1, calls1, s1 = _timed_run(work, "hp-c1", llm, "hotpotqa", "react", 1, None, n_tasks=n)
        wc, _, _ = _timed_run(work, f"hp-c{c}", llm, "hotpotqa", "react", c, None, n_tasks=n)
        result = {
            "tasks": n,
            "latency_s": args.latency,
            "concurrency": c,
            "model_calls": calls1,
            "wall_s_c1": round(w1, 3),
            f"wall_s_c{c}": round(wc, 3),
            "speedup": round(w1 / wc, 2),
            "overhead_ms_per_episode": round((w1 - calls1 * args.latency) / n * 1000, 1),
            "success": s1["success"],
            "lease_overhead_ms_per_item": _lease_overhead(work / "hp-c1.db"),
        }
        if not args.skip_alfworld:
            llm.set_responder(alfworld_agent(latency_s=args.latency))
            steps = args.alfworld_steps
            _timed_run(work, "alf-warmup", llm, "alfworld", "act", c, 1, n_tasks=n)
            a1, acalls, _ = _timed_run(work, "alf-c1", llm, "alfworld", "act", 1, steps, n_tasks=n)
            ac, _, _ = _timed_run(work, f"alf-c{c}", llm, "alfworld", "act", c, steps, n_tasks=n)
            ap_, _, _ = _timed_run(work, f"alf-p{c}", llm, "alfworld", "act", c, steps, mode="processes", n_tasks=n)
            result.update(
                {
                    "alfworld_games": n,
                    "alfworld_steps": steps,
                    "alfworld_wall_s_c1": round(a1, 3),
                    f"alfworld_wall_s_c{c}": round(ac, 3),
                    "alfworld_speedup": round(a1 / ac, 2),
                    f"alfworld_process_wall_s_c{c}": round(ap_, 3),
                    "alfworld_process_speedup": round(a1 / ap_, 2),
                    "alfworld_overhead_ms_per_step": round((a1 - acalls * args.latency) / acalls * 1000, 1),
                }
            )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
