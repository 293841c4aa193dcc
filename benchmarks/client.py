"""What does our model client cost, next to the bare official client? Prints, last, one JSON object.

Against the instant scripted server (a SEPARATE process, HTTP/1.1 keep-alive, as in
`benchmarks/runner.py`), N threads each make calls back to back, at concurrency 1, 8 and 32,
in interleaved rounds (every round runs every path at every level, so a busy machine moves
them all alike). Per path and level: this process's CPU per call (all threads, ms) and calls/s.

- `bare_create`: one official sync `openai.OpenAI` shared by the threads (it is thread-safe),
  `completions.create(...)`, the SDK's default transport: what "the bare client" means.
- `bare_post`: the same client, `post("/completions", body=..., cast_to=object)` (no typed
  parameters or response models).
- `ours`: `agent.client.ModelClient.complete(..., watch=CallWatch(...))`, one ModelClient per
  thread, as the runner's workers call it (record, stop cut, retries loop, Stop watch), streamed
  (`.with_streaming_response.create(stream=True, ...)` on the bounded wire, `agent/model/wire.py`).
- `ours_no_stream`: the same with `--no-stream` (one JSON answer).
- `async_tasks`: async end-to-end, for scale: one `openai.AsyncOpenAI` on one event loop, N
  tasks instead of N threads, `post(...)` as above (what the client part would cost if the
  runner were async throughout).
(The libcurl-era client of before issue 38 is measured by running this script in a checkout of it.)

Same prompt size and stops as a HotpotQA step (~5 kB prompt, one stop).

Usage: python benchmarks/client.py [--calls 600] [--rounds 5] [--levels 1,8,32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

from _root import served_by

PROMPT = (
    "Question: which magazine was started first, Arthur's Magazine or First for Women?\n"
    "Thought 1: I need to search both magazines and find which was started first.\n" * 30
)[:5000]
STOP = ["\nObservation 1:"]


def serve() -> None:
    """The scripted model server (its own process): prints its URL, serves until stdin closes."""
    from tests.scripted_server import Reply, ScriptedLLM, _Handler, _Server

    _Server.request_queue_size = 256  # as a real server: 32 clients connecting at once are not reset
    _Handler.protocol_version = "HTTP/1.1"  # keep-alive, as a vLLM/SGLang server
    _Handler.disable_nagle_algorithm = True
    llm = ScriptedLLM(default=Reply(text=" I need to search Arthur's Magazine.\nAction 1: Search[Arthur's Magazine]"))
    llm.start()
    llm._record = lambda req: None  # a server that keeps no log
    sys.stdout.write(llm.base_url + "\n")
    sys.stdout.flush()
    sys.stdin.read()
    llm.stop()


def _paths(url: str) -> dict:
    """name -> a factory of one thread's `call()` (built once per thread, outside the clock)."""
    import openai

    import agent.client
    from trajectory.records import AgentConfig

    shared = openai.OpenAI(api_key="x", base_url=url, max_retries=0, timeout=20)
    body = {"model": "bench", "prompt": PROMPT, "temperature": 0, "max_tokens": 100, "stop": STOP}
    config = AgentConfig(model="bench", base_url=url, cache=False, timeout_s=20)

    def bare_create():
        return lambda: (
            shared.completions.create(model="bench", prompt=PROMPT, temperature=0, max_tokens=100, stop=STOP)
            .choices[0]
            .text
        )

    def bare_post():
        return lambda: shared.post("/completions", body=body, cast_to=object)

    def model_client(stream: bool):
        def make():
            client = agent.client.ModelClient(config, api_key="x", stream=stream)
            watch = agent.client.CallWatch(threading.Event())
            return lambda: client.complete(PROMPT, STOP, watch=watch)

        return make

    return {
        "bare_create": bare_create,
        "bare_post": bare_post,
        "ours": model_client(True),
        "ours_no_stream": model_client(False),
        "async_tasks": _AsyncTasks(url, body),
    }


class _AsyncTasks:
    """Not a thread path: `run(tasks, calls)` makes the calls from tasks on one event loop."""

    def __init__(self, url: str, body: dict):
        import asyncio

        import openai

        self.loop, self.body = asyncio.new_event_loop(), body
        self.client = openai.AsyncOpenAI(api_key="x", base_url=url, max_retries=0, timeout=20)

    def run(self, tasks: int, calls: int) -> tuple[float, float]:
        import asyncio

        per = calls // tasks

        async def one(n: int) -> None:
            for _ in range(n):
                await self.client.post("/completions", body=self.body, cast_to=object)

        async def all_of(n: int) -> None:
            await asyncio.gather(*(one(n) for _ in range(tasks)))

        async def connect() -> list:
            return await asyncio.gather(*(one(1) for _ in range(tasks)), return_exceptions=True)

        for _ in range(5):  # the connections exist before the clock starts (the server's accept
            if not any(self.loop.run_until_complete(connect())):  # queue is short: some may be reset)
                break
        cpu0, t0 = time.process_time(), time.perf_counter()
        self.loop.run_until_complete(all_of(per))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        return cpu / (per * tasks) * 1000, per * tasks / wall


def _run(make, threads: int, calls: int) -> tuple[float, float]:
    """(CPU ms per call, calls/s) of `calls` calls made by `threads` threads."""
    if isinstance(make, _AsyncTasks):
        return make.run(threads, calls)
    per = calls // threads
    ready, go = threading.Barrier(threads + 1), threading.Event()

    def work() -> None:
        call = make()
        for attempt in range(5):  # this thread's connection and client exist before the clock starts
            try:
                call()
                break
            except Exception:  # (a reset: the server's accept queue is short)
                time.sleep(0.1)
        ready.wait()
        go.wait()
        for _ in range(per):
            call()

    pool = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for t in pool:
        t.start()
    ready.wait()
    cpu0, t0 = time.process_time(), time.perf_counter()
    go.set()
    for t in pool:
        t.join()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    n = per * threads
    return cpu / n * 1000, n / wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=640)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve()
    with served_by(__file__) as url:
        paths = _paths(url)
        levels = [int(x) for x in args.levels.split(",")]
        for make in paths.values():  # warm-up: imports, first clients
            _run(make, 2, 100)
        got: dict = {name: {str(c): [] for c in levels} for name in paths}
        for _ in range(args.rounds):
            for c in levels:
                for name, make in paths.items():
                    got[name][str(c)].append(_run(make, c, args.calls))
    result = {"calls_per_run": args.calls, "rounds": args.rounds, "load": os.getloadavg()[0], "paths": {}}
    for name, by_level in got.items():
        result["paths"][name] = {
            c: _summary(runs, got["bare_create"][c], got["bare_post"][c]) for c, runs in by_level.items()
        }
    print(json.dumps(result))


def _summary(runs: list[tuple[float, float]], bare: list[tuple[float, float]], post: list[tuple[float, float]]) -> dict:
    """Medians and ranges, and the ratios to the bare client in the same round (medians):
    `x_bare` to `bare_create`, `x_post` to `bare_post`."""
    cpu, rate = [r[0] for r in runs], [r[1] for r in runs]

    def ratio(to: list, i: int) -> float:
        return round(statistics.median(a[i] / b[i] for a, b in zip(runs, to)), 2)

    return {
        "cpu_ms_per_call": round(statistics.median(cpu), 3),
        "cpu_range": [round(min(cpu), 3), round(max(cpu), 3)],
        "calls_per_s": round(statistics.median(rate), 1),
        "rate_range": [round(min(rate), 1), round(max(rate), 1)],
        "cpu_x_bare": ratio(bare, 0),
        "rate_x_bare": ratio(bare, 1),
        "cpu_x_post": ratio(post, 0),
        "rate_x_post": ratio(post, 1),
    }


if __name__ == "__main__":
    main()
