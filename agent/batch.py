"""A small concurrent job runner: experiments and what-if rollouts run many episodes at once.

Model I/O dominates, so jobs run on threads by default. `mode="processes"` runs them in
worker processes started with forkserver/spawn (never fork: the caller has threads), for
CPU-heavy environment steps that would otherwise queue behind the GIL; then `work` and
the keys must be picklable (a module-level function). On threads, each of `concurrency`
workers takes the next key itself and reports its result (no executor, no future and no
hand-back to the caller's thread per job: a finished job wakes no other thread); in worker
processes the caller's thread submits the jobs and collects them. Either way `on_result`
is called once per finished job, one call at a time, so callbacks never race each other.
Rate limits are handled below this layer: the model client's shared pause gate
(`agent.ratelimit`) slows every job down together.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
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


def _process_pool(concurrency: int) -> ProcessPoolExecutor:
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    return ProcessPoolExecutor(
        max_workers=concurrency, mp_context=ctx, initializer=exit_with_parent, initargs=(os.getpid(),)
    )


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
    batch = _Batch(keys, stop, on_result, max_consecutive_failures)
    if mode == "threads":
        batch.run_threads(work, min(concurrency, max(1, len(keys))))
    else:
        batch.run_pool(work, concurrency)
    results = [r for _, r in sorted(batch.done, key=lambda p: p[0])]
    if batch.aborted:
        raise BatchAborted(batch.aborted, results)
    return results


class _Batch:
    """A batch's shared state: the keys left, the results, the failure streak. Results are
    recorded under `_lock` and reported under `_report` (one callback at a time)."""

    def __init__(
        self,
        keys: Sequence[Any],
        stop: threading.Event | None,
        on_result: Callable[[JobResult], None] | None,
        max_failures: int,
    ):
        self.pending = list(enumerate(keys))
        self.pending.reverse()
        self.stop, self.on_result, self.max_failures = stop, on_result, max_failures
        self.done: list[tuple[int, JobResult]] = []
        self.streak, self.aborted = 0, ""
        self.halted = False  # Ctrl-C, or a callback that raised: nothing new starts
        self.failure: BaseException | None = None  # the callback's exception, raised in the caller
        self._lock = threading.Lock()
        self._report = threading.Lock()

    def _take(self) -> tuple[int, Any] | None:
        """The next job, or None when none may start (none left, aborted, halted, stopped)."""
        with self._lock:
            if not self.pending or self.aborted or self.halted or (self.stop is not None and self.stop.is_set()):
                return None
            return self.pending.pop()

    def _finish(self, n: int, res: JobResult) -> None:
        with self._lock:
            self.done.append((n, res))
            if res.ok:
                self.streak = 0
            else:
                self.streak += 1
                if self.max_failures and self.streak >= self.max_failures and not self.aborted:
                    self.aborted = f"stopped after {self.streak} failures in a row; last error: {res.error or ''}"
        if self.on_result is None:
            return
        with self._report:
            if self.failure is not None:
                return
            try:
                self.on_result(res)
            except BaseException as exc:  # raised in the caller once the jobs in flight are done
                self.failure, self.halted = exc, True

    def _worker(self, work: Callable[[Any], Any]) -> None:
        while (job := self._take()) is not None:
            n, key = job
            try:
                res = JobResult(key, True, work(key))
            except BaseException as exc:  # (as a future would: the job failed, the worker goes on)
                res = JobResult(key, False, error=_one_line(exc))
            self._finish(n, res)

    def run_threads(self, work: Callable[[Any], Any], workers: int) -> None:
        """`workers` threads take the jobs; the caller's thread only waits (Ctrl-C: nothing
        new starts, `stop` is set, and it propagates once the jobs in flight are done)."""
        threads = [threading.Thread(target=self._worker, args=(work,), name=f"batch_{i}") for i in range(workers)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.5)  # (in slices: Ctrl-C is seen at once)
        except KeyboardInterrupt:
            self.halted = True
            if self.stop is not None:
                self.stop.set()
            for t in threads:
                if t.ident is not None:  # (started)
                    t.join()
            raise
        if self.failure is not None:
            raise self.failure

    def run_pool(self, work: Callable[[Any], Any], concurrency: int) -> None:
        """Worker processes: the caller's thread submits jobs, keeps `concurrency` in flight
        and records each result as it ends."""
        running: dict[Future, tuple[int, Any]] = {}
        ended: queue.SimpleQueue[Future] = queue.SimpleQueue()
        with _process_pool(min(concurrency, max(1, len(self.pending)))) as pool:
            while self.pending or running:
                while len(running) < concurrency and (job := self._take()) is not None:
                    fut = pool.submit(work, job[1])
                    running[fut] = job
                    fut.add_done_callback(ended.put)
                if not running:
                    break
                for fut in _finished(ended, running, self.stop):
                    n, key = running.pop(fut)
                    exc = fut.exception()
                    self._finish(
                        n,
                        JobResult(key, True, fut.result())
                        if exc is None
                        else JobResult(key, False, error=_one_line(exc)),
                    )
                    if self.failure is not None:
                        raise self.failure
