"""Does the runner keep up with a GPU cluster, next to the bare official client? Prints, last,
one JSON object.

HotpotQA `react` on the first N (default 300) tasks of the ReAct release's dev set
(../shared/reference/react-repo/data, or $REACT_DATA_DIR; skipped cleanly when absent),
run as an experiment through the one runner (`agent.experiment_runner.run`: jobs, leases, item
claims, one Engine per worker thread, the Store's one writer, the real `openai` client) at
each concurrency level, each run on a fresh database (the same tasks again in each run). The
model is the scripted OpenAI-compatible server in a SEPARATE process (its CPU is not the
runner's); every task takes two model calls (Search, then Finish). The environment is the
built-in Wikipedia corpus in the runner's process.

`--latency-ms L` (default 0: the server answers at once): the server holds each answer L ms
(`Reply.delay_s`, an Event wait: no CPU), for the runner and the bare client alike. The server is
a ThreadingHTTPServer with keep-alive (a thread per connection), so concurrent requests wait
concurrently, as on a GPU server batching its running sequences. At 0 the server's speed is not
part of the question and both sides are at this machine's CPU ceiling by concurrency 8 (on a
2-core machine neither rises from 8 to 32); with a latency the question is the one a GPU
cluster asks: calls/s should approach concurrency / L, and does the runner keep up. The pick,
100 ms: a ReAct step of a few tokens from a small model (7-8B) on vLLM or SGLang with the
exemplar prefix cached is about 20 ms of prefill plus 5-10 decode steps of 10-20 ms at 32
running sequences, i.e. 70-220 ms; 100 ms is the fast end of that, the hardest case that still
leaves 8 -> 32 room to rise (80 -> 320 calls/s). A run at concurrency 1 then takes 0.1 s per
call (300 tasks: 60 s per run; use `--pairs 1` or fewer `--tasks` to keep it short).

Each of `--rounds` (default 5) rounds runs, per level, bare, runner, bare, runner, bare:
`--pairs` (default 2) runner runs, each between two bare runs and set against the mean of
those two, so a load that drifts during the round moves both sides alike and neither is
favoured; more runs per round average out the short runs' noise (600 calls, ~2 s each at
L = 0). `levels` gives ranges over the rounds and the medians (`*median`):
- `runner_cpu_ms_per_call`: the runner process's CPU time (all threads) per model call (the
  mean of the round's runner runs); `bare_cpu_ms_per_call`: the official synchronous `openai`
  client doing the same number of requests of the same prompt size and stops from as many
  threads, nothing of ours around it (the mean of the round's bare runs); `cpu_ratio`: the
  round's runner CPU over the bare runs around each of its runs (sum over sum);
  `cpu_ratio_per_run`: the range of each single runner run's ratio.
- `runner_calls_per_s`, `bare_calls_per_s`, `rate_ratio`: model calls per second of wall time
  (the ratio, as the CPU's, against the bare runs around each runner run).
- `rising`: the runner's calls/s never falls by more than 5% from one level to the next, in any
  round; `rising_8_to_32` (levels 8 and 32 both run) per side, `runner` and `bare`: calls/s at
  32 at least 1.25x that at 8 in every round (four times the threads: a rise above the noise),
  and `growth_8_to_32` the range of those factors.
- `env_ms_per_call`: thread CPU of every environment step.
- `bare_retries`: requests of the bare client tried again after a dropped connection (the
  runner's client tries again too; each retry's CPU is the bare client's); a third drop of one
  request ends the benchmark.
- `parts_ms_per_call` (at the highest level): `bare_client` (the bare client's CPU per call),
  `client` (thread CPU inside our model requests: the official client on our transport, our
  body and answer handling), `environment`, `store` (thread CPU inside SQLite statements and
  fetches of the Store's connections; store and client are timed in an extra run, as their
  clocks cost CPU of their own) and `engine` (what is left of the runner's CPU: the engine,
  jobs, claims, prompts, threads, the writer).
- `sql` (a traced run of 50 tasks at concurrency 1 and at the highest level, counted, not
  timed, from the run's `Store(tracer=...)`, `experiment_runner.run(tracer=...)`): `statements_per_call`
  (each execute of the Store's connections, begin and commit
  included), `trace_reports_per_call` (SQLite's trace, which names a statement again per
  trigger program), `commits_per_call`, `durable_commits_per_call`, `log_syncs_per_call` (the
  Store's writer syncing the log without a commit: its power-loss window ended while it was
  idle, or it closed), `fsyncs_per_call` (both), and per connection (thread#n) its [commits, durable].
- `--profile FILE`: a cProfile of an extra, unreported run at the highest level, every thread
  profiled apart (the work is in the worker and writer threads) and merged into FILE
  (`python -m pstats FILE`).
- `--raw FILE`: every run's figures, per round and level, the bare and runner runs in the order
  they ran (JSON), to look at the spread or an order effect.

Measured (2-core machine shared with other sessions; `--rounds 3 --pairs 1`; calls/s of the
runner / the bare client, then rate_ratio's range and median): at L = 0 (`--rounds 5`, four
runs, load 8-18) both sides sit at 100-340 calls/s from concurrency 1 on and neither rises from
8 to 32 (growth_8_to_32 runner 0.67-1.17, bare 0.61-1.13). At L = 100 ms, quiet (load 0.5-1.3,
levels 8,16,32): c=8 72-73 / 74-75 (0.96-0.98); c=16 130-142 / 136-145 (0.95-0.98); c=32
200-231 / 198-238 (0.97-1.01); both rise from 8 to 32 (2.8-3.2x, 2.7-3.2x); cpu_ratio 1.21-1.33,
1.12-1.21, 1.06-1.12. At L = 100 ms under load 4.5-16: c=1 7.5-8.9 / 7.4-9.0 (0.99-1.01); c=8
40-71 / 45-72 (0.87-0.98); c=16 51-84 / 75-135 (0.49-0.96, median 0.68); c=32 77-171 / 138-206
(0.48-0.83, median 0.56); both still rise (1.25-4.31x, 2.1-4.6x): the runner falls behind when
the CPU is contended. A py-spy sample of a run at c=32 then (159 calls/s) finds its workers
~65% in the HTTP request, ~20% waiting for their step's group commit (`Engine._record` ->
`sessions/write_handoff.py` `_Write.answer`) and ~10% waiting for an item claim (`agent/experiment_runner.py`
`_Starts.take`). At L = 200 ms (load 1-4.4): c=1 4.3-4.8 / 4.75-4.9 (0.91-0.99); c=8 37 / 38
(0.98); c=16 73-74 / 74-76 (0.97-1.00); c=32 121-140 / 130-136 (0.93-1.03, median 1.02); rising
3.2-3.7x / 3.4-3.6x; cpu_ratio 1.37-1.43, 1.16-1.22, 1.10-1.21, 0.96-1.19. With a latency the
writer's group commits are smaller: durable commits per call at c=1 0.15-0.18 (100 ms) and
1.04 (200 ms: each step its own durable commit) against 0.06 at L = 0; commits per call at 32
0.69-0.87 against 0.24.

Steadier (measured side by side on one tree, 2-core machine shared with other sessions, load
8-18, runs alternating): `cpu_ratio` at concurrency 1 over 5 rounds, the earlier scheme (bare
then runner, once a round): 1.19-1.49, 1.07-1.42, 0.93-1.32; this one (`--pairs 2`): 1.11-1.21,
1.07-1.24, 1.10-1.23, 0.98-1.22 (medians 1.18, 1.15, 1.14, 1.04); at 8, 16 and 32 the ranges
halve alike (0.24-0.49 wide before, 0.12-0.28 now). Set against only the bare run before each
runner run (the earlier pairing) or only the one after, two runs' medians differ from the
bracket's by up to 0.09, at 8-32 in either direction; at 1 the run before gave 1.19 and 1.07
where the bracket gave 1.14 and 1.04 (a bare run after a runner run cost a little more there:
maybe the runner's garbage collected in it; `--raw` shows each run). Since then every run of
either side starts after an untimed `gc.collect()`, so no run pays for the garbage of the run
before it. A default run takes ~5.5 min (was ~2).

Issue 38 (the model layer on the SDK's public API, libcurl removed; `--tasks` = 20 x concurrency,
`--rounds 2 --pairs 1`, load 13-21 at 100 ms, 6-10 at 300 ms, 1.5 at 0; rate_ratio range (median),
before = main with libcurl / after): L = 100 ms c=8 0.87-1.03 (0.95) / 0.95-1.03 (0.99); c=32 1.02-1.36
(1.19) / 0.91-1.00 (0.955); c=64 1.03-1.20 (1.115) / 0.83-0.90 (0.865). L = 300 ms c=8 0.96-1.00 (0.98) /
0.96-0.99 (0.975); c=32 0.92-0.97 (0.945) / 0.99-1.00 (0.995); c=64 0.99-1.00 (0.995) / 0.99-1.00 (0.995).
At c=64, 100 ms both sides are at the 2 cores' ceiling: runner CPU per call 2.02-2.21 ms against the bare
client's 1.37-1.43; by part: client (the SDK's `.create` path on our wire) 1.14 (main's libcurl path 0.70),
store 0.17, environment 0.03, engine 0.69-0.88. Instant server, c=8 (load 1.5): CPU per call runner
1.64-1.71 ms / bare 1.03 (main: 1.14-1.37 / 1.00-1.03); client part 1.06 (main 0.46). Every call streamed
(a variant measured the same way): c=8, 100 ms 0.84-0.89; c=64 client part 1.6: only the Editor's steps stream.

Usage: python benchmarks/runner.py [--tasks 300] [--levels 1,8,16,32] [--rounds 5] [--pairs 2]
       [--latency-ms 0] [--profile FILE] [--raw FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from _runner_clocks import clock_client, clock_env, clock_store, profiled  # (before _root: this folder leaves sys.path)
from _runner_figures import cpu_parts, rising, table

# isort: split
from _root import HERE, ROOT  # noqa: E402,F401  (repo root on sys.path; see _root.py)

REACT_DATA = ROOT.parent / "shared" / "reference" / "react-repo" / "data"


def serve(latency_s: float = 0.0) -> None:
    """The scripted model server (run in its own process): prints its URL, serves until stdin
    closes. `latency_s`: each answer is held that long (`Reply.delay_s`: an Event wait, no CPU;
    a thread per connection, so concurrent requests wait concurrently, as on a batching GPU server)."""
    from tests.experiment_agents import wiki_agent
    from tests.scripted_server import ScriptedLLM, _Handler, _Server

    _Server.request_queue_size = 256  # as a real server: 32 clients connecting at once are not reset
    _Handler.protocol_version = "HTTP/1.1"  # keep-alive, as a vLLM/SGLang server
    _Handler.disable_nagle_algorithm = True  # as a real server: no 40 ms Nagle/delayed-ACK stall per answer
    llm = ScriptedLLM().start()
    llm.set_responder(wiki_agent({}, react_steps=2, latency_s=latency_s))
    llm._record = lambda req: None  # a server that keeps no log (it would grow without bound)
    sys.stdout.write(llm.base_url + "\n")
    sys.stdout.flush()
    sys.stdin.read()
    llm.stop()


def _timed(
    work: Path,
    tag: str,
    url: str,
    tasks,
    concurrency: int,
    env_clock: list[float],
    store_clock: list[float] | None = None,
    tracer: Callable[[str, Any], None] | None = None,
    client_clock: list[float] | None = None,
) -> dict:
    """One run of the experiment at `concurrency`, timed from its start (its creation is
    not); `tracer`: the run's `Store(tracer=...)` (`experiment_runner.run(tracer=...)`)."""
    from agent import experiment, experiment_runner
    from sessions.store import Store
    from trajectory.records import AgentConfig

    db = work / f"{tag}.db"
    store = Store(db)
    exp = experiment.create(
        store,
        env="hotpotqa",
        method="react",
        config=AgentConfig(model="bench", base_url=url, cache=False),
        tasks=tasks,
        name=tag,
    )
    store.close()
    env0, store0, client0 = env_clock[0], (store_clock or [0.0])[0], (client_clock or [0.0])[0]
    gc.collect()  # (untimed, before each run of either side: neither pays for the other's garbage)
    cpu0, t0 = time.process_time(), time.perf_counter()
    try:
        out = experiment_runner.run(str(db), exp.id, concurrency=concurrency, tracer=tracer)
    finally:
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    store = Store(db)
    calls = store.db.execute("select count(*) from model_calls").fetchone()[0]
    store.close()
    assert out["done"] == len(tasks), out
    out = {
        "calls": calls,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_call": round(cpu / calls * 1000, 3),
        "calls_per_s": round(calls / wall, 1),
        "env_ms_per_call": round((env_clock[0] - env0) / calls * 1000, 3),
    }
    if store_clock is not None:
        out["store_ms_per_call"] = round((store_clock[0] - store0) / calls * 1000, 3)
    if client_clock is not None:
        out["client_ms_per_call"] = round((client_clock[0] - client0) / calls * 1000, 3)
    return out


def bare_prompt(work: Path) -> tuple[str, list[str]]:
    """A prompt of the runner's mean size (the warm-up's calls) and its stop: what the bare
    client sends, so both do the same requests."""
    from sessions.store import Store

    st = Store(work / "warmup.db")
    chars = st.db.execute("select avg(prompt_chars) from model_calls").fetchone()[0] or 0
    st.close()
    tail = "Question: who?\nThought 1:"
    return "x" * max(0, int(chars) - len(tail) - 1) + "\n" + tail, ["\nObservation 1:"]


def bare_client(url: str, prompt: str, stop: list[str], calls: int, concurrency: int, warm: int = 20) -> dict:
    """The official synchronous `openai` client, nothing of ours around it: `calls` requests
    from `concurrency` threads (one client, as an application would share it), after `warm`
    untimed ones."""
    import socket

    import httpx
    import openai

    # TCP_NODELAY: the sync transport writes a request's head and body apart, and Nagle's
    # algorithm would hold the body for the server's delayed ACK (40 ms a call at concurrency 1)
    transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    client = openai.OpenAI(
        api_key="x", base_url=url, max_retries=0, timeout=20, http_client=httpx.Client(transport=transport, timeout=20)
    )
    left = iter(range(calls))
    lock = threading.Lock()
    failed: list[BaseException] = []
    retried: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            for attempt in range(3):  # a dropped connection is tried again, as the runner's client does
                try:
                    client.completions.create(model="bench", prompt=prompt, temperature=0, max_tokens=100, stop=stop)
                    break
                except openai.APIConnectionError as exc:
                    retried.append(exc)
                    if attempt == 2:
                        failed.append(exc)
                        return
                except Exception as exc:  # counted: a run with failures is not a measurement
                    failed.append(exc)
                    return

    for _ in range(warm):  # warm: the connection, the SDK's lazy imports
        client.completions.create(model="bench", prompt=prompt, temperature=0, max_tokens=100, stop=stop)
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    gc.collect()  # (as before a runner run)
    cpu0, t0 = time.process_time(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    client.close()
    if failed:
        raise SystemExit(f"the bare client failed {len(failed)} time(s): {failed[0]!r} ({failed[0].__cause__!r})")
    out = {"cpu_ms_per_call": round(cpu / calls * 1000, 3), "calls_per_s": round(calls / wall, 1)}
    if retried:  # (rare: seen twice in a dozen runs on a loaded machine)
        out["retries"] = [f"{exc!r} ({exc.__cause__!r})" for exc in retried]
    return out


def db_work(work: Path, url: str, tasks, concurrency: int, tag: str) -> dict:
    """SQL statements and commits per model call in a separate, traced run (counted, not
    timed), from the run's `Store(tracer=...)`. `statements_per_call`: the statements the
    runner issues (each execute of the Store's connections, begin and commit included);
    `trace_reports_per_call`: what SQLite's trace reports, which also names a write again
    for each trigger program it runs and FTS5's reads of its own config. A commit is counted
    on its own connection (one per thread), labelled by that connection's safety level at
    the time: durable (an fsync) or light."""
    counts = {"statements": 0, "reports": 0}
    conns: dict[int, dict] = {}  # a Store opens one connection per thread
    lock = threading.Lock()

    def trace(sql: str, _params) -> None:
        mine = conns.get(threading.get_ident())
        if mine is None:  # sqlite's default: synchronous = full
            with lock:
                mine = conns[threading.get_ident()] = {
                    "thread": threading.current_thread().name,
                    "commits": 0,
                    "light": 0,
                    "light_now": False,
                    "last": None,
                }
        if sql.startswith("--"):  # statements SQLite runs for a trigger or the FTS index
            return
        with lock:
            counts["reports"] += 1
            if not sql.startswith(("PRAGMA 'main'.", "SELECT k, v FROM 'main'.")) and not (
                sql == mine["last"] and sql.split(None, 1)[0].lower() in ("insert", "update", "delete", "replace")
            ):
                counts["statements"] += 1  # (not FTS5's own reads, not a write reported again per trigger program)
                mine["last"] = sql
        low = sql.lower()
        if low.startswith("pragma synchronous"):
            mine["light_now"] = "normal" in low or "off" in low
        elif low == "commit":
            mine["commits"] += 1
            mine["light"] += mine["light_now"]

    from sessions.writer import LOG_SYNCS

    syncs0 = LOG_SYNCS[0]
    out = _timed(work, tag, url, tasks, concurrency, [0.0], tracer=trace)
    calls, syncs = out["calls"], LOG_SYNCS[0] - syncs0
    per_conn = list(conns.values())
    commits = sum(c["commits"] for c in per_conn)
    light = sum(c["light"] for c in per_conn)
    return {
        "concurrency": concurrency,
        "statements_per_call": round(counts["statements"] / calls, 2),
        "trace_reports_per_call": round(counts["reports"] / calls, 2),
        "commits_per_call": round(commits / calls, 3),
        "durable_commits_per_call": round((commits - light) / calls, 3),
        "log_syncs_per_call": round(syncs / calls, 3),
        "fsyncs_per_call": round((commits - light + syncs) / calls, 3),
        "commits_by_connection": {
            f"{c['thread']}#{i}": [c["commits"], c["commits"] - c["light"]]
            for i, c in enumerate(per_conn)
            if c["commits"]
        },
    }


def _round(
    work: Path, url: str, tasks, levels: list[int], env_clock: list[float], prompt, n: int, pairs: int, warm: int
) -> dict:
    """One round: at each level, bare, runner, bare, ... (`pairs` runner runs, each between two
    bare runs), so a change of the machine's load hits both alike."""
    out = {}
    for c in levels:

        def bare() -> dict:
            return bare_client(url, prompt[0], prompt[1], 2 * len(tasks), c, warm)

        level: dict[str, list] = {"bare": [bare()], "runner": []}
        for i in range(pairs):
            level["runner"].append(_timed(work, f"r{n}c{c}p{i}", url, tasks, c, env_clock))
            level["bare"].append(bare())
        out[str(c)] = level
    return out


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--levels", default="1,8,16,32")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (runner and bare client); ranges printed")
    ap.add_argument("--pairs", type=int, default=2, help="runner runs per level and round, each between two bare runs")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="the server holds each answer this long (no CPU)")
    ap.add_argument(
        "--profile", default=None, help="write a cProfile of an extra, unreported run of the last level here"
    )
    ap.add_argument(
        "--raw",
        default=None,
        help="write every run's figures here (JSON: rounds, levels, bare and runner runs in order)",
    )
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pairs < 1 or args.rounds < 1 or args.latency_ms < 0:
        ap.error("--pairs and --rounds must be at least 1, --latency-ms at least 0")
    return args


def _measure(args: argparse.Namespace, url: str, tasks, levels: list[int]) -> tuple[list, list, dict]:
    """The rounds, the traced SQL runs, the optional profile and the parts run, in one work folder."""
    env_clock, store_clock, client_clock = [0.0], [0.0], [0.0]
    clock_env(env_clock)
    warm = 20 if not args.latency_ms else 2  # (a held answer: fewer warm-up calls, same warm connection)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ.setdefault("REACT_EDITOR_CACHE", str(work / "cache"))
        _timed(work, "warmup", url, tasks[:20], max(levels), env_clock)
        prompt = bare_prompt(work)
        rounds = [_round(work, url, tasks, levels, env_clock, prompt, n, args.pairs, warm) for n in range(args.rounds)]
        sql = [db_work(work, url, tasks[:50], c, f"traced{c}") for c in sorted({1, levels[-1]})]
        if args.profile:  # an extra run: its CPU is not reported
            profiled(args.profile, lambda: _timed(work, "profiled", url, tasks, levels[-1], env_clock))
        # an extra run for the store's and our client's parts: their clocks cost CPU of their own
        clock_store(store_clock)
        clock_client(client_clock)
        store_run = _timed(work, "store", url, tasks, levels[-1], env_clock, store_clock, client_clock=client_clock)
    return rounds, sql, store_run


def main() -> None:
    args = _args()
    if args.serve:
        return serve(args.latency_ms / 1000)
    data = Path(os.environ.get("REACT_DATA_DIR") or REACT_DATA)
    if not (data / "hotpot_dev_v1_simplified.json").exists():
        print(json.dumps({"skipped": f"no ReAct release data at {data}"}))
        return
    os.environ["REACT_DATA_DIR"] = str(data)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency-ms", str(args.latency_ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        url = server.stdout.readline().strip()
        from agent.task_selection import select_tasks

        tasks = select_tasks("hotpotqa", "react", limit=args.tasks)
        levels = [int(x) for x in args.levels.split(",")]
        rounds, sql, store_run = _measure(args, url, tasks, levels)
    finally:
        server.stdin.close()
        server.wait(10)
    held = f"holds each answer {args.latency_ms:g} ms (no CPU)" if args.latency_ms else "answers at once"
    result = {
        "tasks": len(tasks),
        "method": "react",
        "rounds": args.rounds,
        "pairs": args.pairs,
        "latency_ms": args.latency_ms,
        "server": f"scripted, separate process, {held}",
        "bare_client": "openai.OpenAI (sync), same prompt size and stops, from as many threads as the level",
        "env": "built-in Wikipedia corpus, in process",
        "levels": table(rounds, levels),
        "sql": sql,
        "parts_ms_per_call": cpu_parts(rounds, levels[-1], store_run),
        **rising(rounds, levels),
        "bare_retries": sum(len(b.get("retries", ())) for r in rounds for lv in r.values() for b in lv["bare"]),
        "load": os.getloadavg(),
    }
    if args.raw:
        Path(args.raw).write_text(json.dumps(rounds))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
