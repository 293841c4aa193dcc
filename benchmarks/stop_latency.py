"""How long from Stop to the job's end, with a model server that answers only after 30 s?
Prints, last, one JSON object.

A HotpotQA step job (the built-in Wikipedia corpus, `agent.jobs`, the real `openai` client)
asks the scripted OpenAI-compatible server, run in a SEPARATE process, that answers every
request after 30 s. Once the request is on the wire, the job is stopped, three ways:

- `in_process_s`: `agent.jobs.stop` in the process running the job (the app's Stop);
- `flag_s`: the stop flag set in the database by another connection (what `react-editor
  jobs stop N` writes), picked up by the job's heartbeat (every <= 1 s);
- `cli_s`: `react-editor jobs stop N` run as its own process, from its start (the command's
  own start-up included) to the job's end.

Each is timed from the Stop to `Handle.finished` (the job row written "stopped"); before the
fix the job ended only with the answer, 30 s later. Median and max over --n rounds each.

Usage: python benchmarks/stop_latency.py [--n 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _root import ROOT, served_by

ANSWER_AFTER_S = 30.0


def serve() -> None:
    """The scripted server (its own process): every answer after 30 s; prints its URL."""
    from tests.scripted_server import Reply, ScriptedLLM

    llm = ScriptedLLM(default=Reply(text=" Search[Velmora]", delay_s=ANSWER_AFTER_S)).start()
    sys.stdout.write(llm.base_url + "\n")
    sys.stdout.flush()
    sys.stdin.read()
    llm.stop()


def _one(store, engine, task, config, how: str, db: Path) -> float:
    from agent import jobs
    import sessions.jobs
    from sessions.store import Store

    ep, v = engine.start_episode(task, config)
    h = jobs.start(store, "step", lambda job: engine.step(v.id, watch=job.watch()), episode_id=ep.id,
                   version_id=v.id, target=f"episode {ep.id} v{v.id}")
    time.sleep(0.5)  # the request is on the wire (the server holds it for 30 s)
    t0 = time.perf_counter()
    if how == "in_process":
        jobs.stop(store, h.id)
    elif how == "flag":
        other = Store(db)
        sessions.jobs.request_stop(other, h.id)
        other.close()
    else:
        subprocess.Popen([sys.executable, "-m", "react_editor", "jobs", "stop", str(h.id), "--db", str(db)],
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    if not h.finished.wait(ANSWER_AFTER_S * 2):
        raise SystemExit(f"job {h.id} did not end")
    spent = time.perf_counter() - t0
    assert sessions.jobs.get(store, h.id).state == "stopped", sessions.jobs.get(store, h.id)
    jobs.forget(h)
    return spent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve()
    with served_by(__file__) as url:
        from agent.engine import Engine
        from envs.registry import family
        from sessions.store import Store
        from trajectory.records import AgentConfig

        fam = family("hotpotqa")
        corpus = ROOT / "envs" / "wikipedia" / "corpus" / "hotpotqa.jsonl"
        task = fam.get_task(json.loads(corpus.read_text().splitlines()[0])["id"])
        config = AgentConfig(model="bench", base_url=url, cache=False, timeout_s=60, max_retries=0)
        out: dict = {"answer_after_s": ANSWER_AFTER_S, "rounds": args.n}
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "stop.db"
            store = Store(db)
            engine = Engine(store, api_key="x")
            for how in ("in_process", "flag", "cli"):
                times = [_one(store, engine, task, config, how, db) for _ in range(args.n)]
                out[f"{how}_s"] = {"median": round(statistics.median(times), 3), "max": round(max(times), 3)}
            store.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
