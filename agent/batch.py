"""A small concurrent job runner: experiments and what-if rollouts run many episodes at once.

Model I/O dominates, so jobs run on threads by default. `mode="processes"` runs them in
worker processes started with forkserver/spawn (never fork: the caller has threads), for
CPU-heavy environment steps that would otherwise queue behind the GIL; then `work` and
the keys must be picklable (a module-level function). The caller's thread submits jobs,
keeps `concurrency` in flight, and calls `on_result` for each finished job, so callbacks
never race each other. Rate limits are handled below this layer: the model client's shared
pause gate (`agent.ratelimit`) slows every job down together.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

MODES = ("threads", "processes")


@dataclass
class JobResult:
    key: Any
    ok: bool
    value: Any = None
    error: str | None = None


class BatchAborted(Exception):
    """Too many failures in a row (e.g. an endpoint refusing every call). The message is one
    line; `.results` holds the JobResults of every job that finished."""

    def __init__(self, message: str, results: list[JobResult]):
        super().__init__(message)
        self.results = results


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _executor(mode: str, concurrency: int) -> Executor:
    if mode == "threads":
        return ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="batch")
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    return ProcessPoolExecutor(max_workers=concurrency, mp_context=ctx, initializer=exit_with_parent,
                               initargs=(os.getpid(),))


def exit_with_parent(parent_pid: int, every_s: float = 0.5) -> None:
    """In a worker process: exit when the process that started the batch is gone, even
    killed with -9 (a forkserver worker's own parent is the fork server, so it watches
    the batch's process by id). Then the fork server and resource tracker end too."""

    def watch() -> None:
        while True:
            time.sleep(every_s)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # pragma: no cover - the id now names someone else's process
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _next(ended: "queue.SimpleQueue[Future]") -> Future:
    """The next finished future; waits in short slices so Ctrl-C is seen at once."""
    while True:
        try:
            return ended.get(timeout=0.5)
        except queue.Empty:
            continue


def _finished(ended: queue.SimpleQueue, running: dict[Future, Any], stop: threading.Event | None) -> list[Future]:
    """The futures that ended: waits for one, then takes all that are ready (a queue the
    futures put themselves on: no O(concurrency) wait). Ctrl-C: jobs that watch `stop` end
    early, the queued ones are cancelled, and it propagates."""
    try:
        finished = [_next(ended)]
    except KeyboardInterrupt:
        if stop is not None:
            stop.set()
        for fut in running:
            fut.cancel()
        raise
    while not ended.empty():
        finished.append(ended.get_nowait())
    return finished


def run_batch(
    keys: Sequence[Any],
    work: Callable[[Any], Any],
    *,
    concurrency: int = 1,
    stop: threading.Event | None = None,
    on_result: Callable[[JobResult], None] | None = None,
    max_consecutive_failures: int = 5,
    mode: str = "threads",
) -> list[JobResult]:
    """Run `work(key)` for every key, `concurrency` at a time; return the results in key
    order (only jobs that ran: a set `stop` launches nothing new, in-flight jobs finish;
    Ctrl-C sets `stop` so jobs that watch it end early).
    An exception in `work` is a failed JobResult with a one-line error; after
    `max_consecutive_failures` failures in a row nothing new starts and BatchAborted is
    raised once the jobs in flight are done."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if mode not in MODES:
        raise ValueError(f"unknown batch mode {mode!r}; use {' or '.join(MODES)}")
    pending = list(enumerate(keys))
    pending.reverse()
    done: list[tuple[int, JobResult]] = []
    streak, last_error, aborted = 0, "", ""
    running: dict[Future, tuple[int, Any]] = {}
    ended: queue.SimpleQueue[Future] = queue.SimpleQueue()
    with _executor(mode, min(concurrency, max(1, len(keys)))) as pool:
        while pending or running:
            while pending and len(running) < concurrency and not aborted and not (stop and stop.is_set()):
                n, key = pending.pop()
                fut = pool.submit(work, key)
                running[fut] = (n, key)
                fut.add_done_callback(ended.put)
            if not running:
                break
            for fut in _finished(ended, running, stop):
                n, key = running.pop(fut)
                exc = fut.exception()
                res = JobResult(key, True, fut.result()) if exc is None else JobResult(key, False, error=_one_line(exc))
                done.append((n, res))
                if res.ok:
                    streak = 0
                else:
                    streak, last_error = streak + 1, res.error or ""
                    if max_consecutive_failures and streak >= max_consecutive_failures and not aborted:
                        aborted = f"stopped after {streak} failures in a row; last error: {last_error}"
                if on_result is not None:
                    on_result(res)
    results = [r for _, r in sorted(done, key=lambda p: p[0])]
    if aborted:
        raise BatchAborted(aborted, results)
    return results
