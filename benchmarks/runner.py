"""Does the runner keep up with a GPU cluster? Prints, last, one JSON object.

HotpotQA `react` on the first N (default 300) tasks of the ReAct release's dev set
(../shared/reference/react-repo/data, or $REACT_DATA_DIR; skipped cleanly when absent),
run as an experiment through the one runner (`agent.experiment.run`: jobs, leases, item
claims, one Engine per worker thread, the real `openai` client) at concurrency 1, 8, 16
and 32, each on a fresh database. The model is the scripted OpenAI-compatible server,
answering at once, in a SEPARATE process (its CPU is not the runner's); every task takes
two model calls (Search, then Finish). The environment is the built-in Wikipedia corpus
in the runner's process: its time is measured on its own and reported as `env_ms_per_call`.

- `cpu_ms_per_call`: the runner process's CPU time (all threads) per model call, marginal:
  measured over the timed run only, after a warm-up run (imports, corpus, first client).
- `calls_per_s`: model calls per second of wall time.
- `openai_client_cpu_ms_per_call`: the official client's own CPU per request to the same server, as
  the runner sends it (`AsyncOpenAI` on the SDK's transport, on the process's call loop, waited for
  cancellably), nothing of ours around it. Beside it the synchronous SDK and bare httpx, for scale.
- `parts_ms_per_call` (at the highest level): the runner's CPU per call split into its parts, each
  measured or derived apart: `client` (the figure above), `environment` (`env_ms_per_call`, thread
  CPU of every env step), `store` (thread CPU inside SQLite statements and fetches of the Store's
  connections, timed in an extra run at that level, as its clock costs CPU of its own) and `engine`
  (what is left: the engine, jobs, claims, prompts, threads).
- `statements_per_call`, `commits_per_call`, `durable_commits_per_call`: what the runner asks of
  SQLite per model call, counted in a separate traced run (50 tasks, concurrency 1); each connection
  keeps its own durability setting, so a commit is labelled by its own connection's, and
  `commits_by_connection` lists (commits, durable) per connection.

Usage: python benchmarks/runner.py [--tasks 300] [--levels 1,8,16,32] [--profile FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _root import HERE, ROOT  # noqa: F401  (repo root on sys.path; see _root.py)

REACT_DATA = ROOT.parent / "shared" / "reference" / "react-repo" / "data"


def serve() -> None:
    """The scripted model server (run in its own process): prints its URL, serves until stdin closes."""
    from tests.experiment_agents import wiki_agent
    from tests.scripted_server import ScriptedLLM, _Handler

    _Handler.protocol_version = "HTTP/1.1"  # keep-alive, as a vLLM/SGLang server
    _Handler.disable_nagle_algorithm = True  # as a real server: no 40 ms Nagle/delayed-ACK stall per answer
    llm = ScriptedLLM().start()
    llm.set_responder(wiki_agent({}, react_steps=2))
    llm._record = lambda req: None  # a server that keeps no log (it would grow without bound)
    sys.stdout.write(llm.base_url + "\n")
    sys.stdout.flush()
    sys.stdin.read()
    llm.stop()


def _timed(work: Path, tag: str, url: str, tasks, concurrency: int, env_clock: list[float],
           store_clock: list[float] | None = None) -> dict:
    from agent import experiment
    from sessions.store import Store
    from trajectory.records import AgentConfig

    db = work / f"{tag}.db"
    store = Store(db)
    exp = experiment.create(store, env="hotpotqa", method="react", config=AgentConfig(model="bench", base_url=url, cache=False),
                            tasks=tasks, name=tag)
    store.close()
    env0, store0 = env_clock[0], (store_clock or [0.0])[0]
    cpu0, t0 = time.process_time(), time.perf_counter()
    out = experiment.run(str(db), exp.id, concurrency=concurrency)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    with _Open(db) as st:
        calls = st.db.execute("select count(*) from model_calls").fetchone()[0]
    assert out["done"] == len(tasks), out
    out = {"calls": calls, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
           "cpu_ms_per_call": round(cpu / calls * 1000, 3), "calls_per_s": round(calls / wall, 1),
           "env_ms_per_call": round((env_clock[0] - env0) / calls * 1000, 3)}
    if store_clock is not None:
        out["store_ms_per_call"] = round((store_clock[0] - store0) / calls * 1000, 3)
    return out


class _Open:
    def __init__(self, db: Path):
        from sessions.store import Store

        self.store = Store(db)

    def __enter__(self):
        return self.store

    def __exit__(self, *exc) -> None:
        self.store.close()


def _clock_env(env_clock: list[float]) -> None:
    """Add the CPU time of every environment step to env_clock[0] (thread CPU time)."""
    from envs.wikipedia.env import WikiEnv

    step = WikiEnv.step
    lock = threading.Lock()  # (worker threads add to one total)

    def timed(self, action):
        t = time.thread_time()
        try:
            return step(self, action)
        finally:
            spent = time.thread_time() - t
            with lock:
                env_clock[0] += spent

    WikiEnv.step = timed


def _clock_store(store_clock: list[float]) -> None:
    """Add the thread CPU time spent inside every SQLite statement and fetch of the Store's
    connections (`sessions.connection._Cursor`, which every statement goes through)."""
    from sessions import connection

    lock = threading.Lock()

    def timed(method):
        def call(*a, **k):
            t = time.thread_time()
            try:
                return method(*a, **k)
            finally:
                spent = time.thread_time() - t
                with lock:
                    store_clock[0] += spent

        return call

    for name in ("execute", "executemany", "executescript", "fetchone", "fetchmany", "fetchall", "__next__"):
        setattr(connection._Cursor, name, timed(getattr(connection._Cursor, name)))


def client_floor(url: str, n: int = 400) -> dict:
    """The official client's own CPU per request against the same server, with nothing of ours
    around it: the client's part of `cpu_ms_per_call` on this machine. `openai_client_cpu_ms_per_call`
    is the client as the runner sends (AsyncOpenAI on the call loop, waited for cancellably);
    beside it the synchronous SDK with its default transport, and bare httpx."""
    import threading

    import httpx
    import openai

    from agent.client import run_cancellable, shared_openai

    body = {"model": "bench", "prompt": "Question: who?\nThought 1:", "temperature": 0, "max_tokens": 100,
            "stop": ["\nObservation 1:"]}
    ours = shared_openai("x", url, 20.0)
    never = threading.Event()
    default = openai.OpenAI(api_key="x", base_url=url, max_retries=0, timeout=20)
    bare = httpx.Client(base_url=url, timeout=20)
    out = {}
    for name, send in (("openai_client_cpu_ms_per_call",
                        lambda: run_cancellable(ours.post("/completions", body=body, cast_to=object), never)),
                       ("openai_sync_default_transport_cpu_ms_per_call",
                        lambda: default.post("/completions", body=body, cast_to=object)),
                       ("httpx_cpu_ms_per_call", lambda: bare.post("/completions", json=body).json())):
        for _ in range(50):
            send()
        t0 = time.process_time()
        for _ in range(n):
            send()
        out[name] = round((time.process_time() - t0) / n * 1000, 3)
    bare.close()
    default.close()
    return out


def db_work(work: Path, url: str, tasks) -> dict:
    """SQL statements and commits per model call (a separate, traced run at concurrency 1):
    what the runner asks of SQLite, counted, not timed. A durable commit is an fsync; a
    light one (claims, leases, progress, item results) is not."""
    import sqlite3

    counts = {"statements": 0}
    per_conn: list[dict] = []  # one per connection: its own durability setting and commits
    real = sqlite3.connect

    def tracer(mine: dict):
        def trace(sql: str) -> None:
            if sql.startswith("--"):  # statements SQLite runs for a trigger or the FTS index
                return
            counts["statements"] += 1
            low = sql.lower()
            if low.startswith("pragma synchronous"):
                mine["light_now"] = "normal" in low or "off" in low
            elif low == "commit":
                mine["commits"] += 1
                mine["light"] += mine["light_now"]

        return trace

    def connect(*a, **k):
        conn = real(*a, **k)
        mine = {"commits": 0, "light": 0, "light_now": False}  # sqlite's default: synchronous = full
        per_conn.append(mine)
        conn.set_trace_callback(tracer(mine))
        return conn

    sqlite3.connect = connect
    try:
        out = _timed(work, "traced", url, tasks, 1, [0.0])
    finally:
        sqlite3.connect = real
    calls = out["calls"]
    commits = sum(c["commits"] for c in per_conn)
    light = sum(c["light"] for c in per_conn)
    return {"statements_per_call": round(counts["statements"] / calls, 2),
            "commits_per_call": round(commits / calls, 2),
            "durable_commits_per_call": round((commits - light) / calls, 2),
            "commits_by_connection": [[c["commits"], c["commits"] - c["light"]] for c in per_conn if c["commits"]]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--levels", default="1,8,16,32")
    ap.add_argument("--profile", default=None, help="write a cProfile of an extra, unreported run of the last level here")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve()
    data = Path(os.environ.get("REACT_DATA_DIR") or REACT_DATA)
    if not (data / "hotpot_dev_v1_simplified.json").exists():
        print(json.dumps({"skipped": f"no ReAct release data at {data}"}))
        return
    os.environ["REACT_DATA_DIR"] = str(data)
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        url = server.stdout.readline().strip()
        from agent.task_selection import select_tasks

        tasks = select_tasks("hotpotqa", "react", limit=args.tasks)
        env_clock, store_clock = [0.0], [0.0]
        _clock_env(env_clock)
        levels = [int(x) for x in args.levels.split(",")]
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            os.environ.setdefault("REACT_EDITOR_CACHE", str(work / "cache"))
            _timed(work, "warmup", url, tasks[:20], max(levels), env_clock)
            floor = client_floor(url)
            traced = db_work(work, url, tasks[:50])
            result = {"tasks": len(tasks), "method": "react", "server": "scripted, separate process, answers at once",
                      "env": "built-in Wikipedia corpus, in process (env_ms_per_call)", "levels": {}}
            for c in levels:
                if args.profile and c == levels[-1]:
                    import cProfile

                    prof = cProfile.Profile()
                    prof.enable()
                    _timed(work, f"profiled{c}", url, tasks, c, env_clock)  # an extra run: its CPU is not reported
                    prof.disable()
                    prof.dump_stats(args.profile)
                result["levels"][str(c)] = _timed(work, f"c{c}", url, tasks, c, env_clock)
            _clock_store(store_clock)  # an extra run for the store's part: its clock costs CPU of its own
            store_run = _timed(work, "store", url, tasks, levels[-1], env_clock, store_clock)
    finally:
        server.stdin.close()
        server.wait(10)
    lv = result["levels"]
    result["cpu_ms_per_call"] = max(v["cpu_ms_per_call"] for v in lv.values())
    result["calls_per_s_at_max"] = lv[str(levels[-1])]["calls_per_s"]
    rates = [lv[str(c)]["calls_per_s"] for c in levels]
    result["rising"] = all(b >= a * 0.95 for a, b in zip(rates, rates[1:]))
    result.update(floor)
    result.update(traced)
    top = lv[str(levels[-1])]
    client, env, store = floor["openai_client_cpu_ms_per_call"], top["env_ms_per_call"], store_run["store_ms_per_call"]
    result["parts_ms_per_call"] = {"level": levels[-1], "total": top["cpu_ms_per_call"], "client": client,
                                   "environment": env, "store": store,
                                   "engine": round(top["cpu_ms_per_call"] - client - env - store, 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
