"""What benchmarks/runner.py times with: thread-CPU clocks around every environment step, model
request and SQLite statement (each wrapped in place, once per process), and a cProfile of every
thread merged into one file. Imported before _root (this folder is still on sys.path then)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


def clock_env(env_clock: list[float]) -> None:
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


def clock_client(client_clock: list[float]) -> None:
    """Add the thread CPU time of every model request of ours (`OpenAICompatible.send`, one
    attempt: the official client, its wire, our reading of the answer) to client_clock[0]."""
    from agent.model.openai_compatible import OpenAICompatible

    request = OpenAICompatible.send
    lock = threading.Lock()

    def timed(self, *a, **k):
        t = time.thread_time()
        try:
            return request(self, *a, **k)
        finally:
            spent = time.thread_time() - t
            with lock:
                client_clock[0] += spent

    OpenAICompatible.send = timed


def clock_store(store_clock: list[float]) -> None:
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


def profiled(path: str, run: Callable[[], Any]) -> None:
    """cProfile `run` in every thread (one profiler per thread: a profiler follows one thread's
    stack; the run's work is in its worker and writer threads), merged into one file at `path`."""
    import cProfile
    import pstats

    done: list[cProfile.Profile] = []
    thread_run = threading.Thread.run

    def profiled_run(self) -> None:
        prof = cProfile.Profile()
        prof.enable()
        try:
            thread_run(self)
        finally:
            prof.disable()
            done.append(prof)  # (a thread still running at the end is left out: its profiler is live)

    threading.Thread.run = profiled_run
    main = cProfile.Profile()
    main.enable()
    try:
        run()
    finally:
        main.disable()
        threading.Thread.run = thread_run
    stats = pstats.Stats(main)
    for prof in list(done):
        stats.add(prof)
    stats.dump_stats(path)
