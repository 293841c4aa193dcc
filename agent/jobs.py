"""The one runner for long operations: the Editor's steps and runs, the what-if panel,
the Experiments page and the CLI all start work here, as a job row (`sessions.jobs`).

A `Handle` is this process's side of a job: a heartbeat thread renews the job's lease
and writes its progress, and reads the stop flag (set by any face in any process) into
`handle.stop`, a threading.Event that the work checks between model calls and that
cancels a model call in flight (it is the `CallWatch.cancel` of the job's calls). The
Python result stays on the handle for the face that started the job; every other face
reads the row.
"""

from __future__ import annotations

import atexit
import json
import sys
import threading
import time
from typing import Any, Callable

import sessions.jobs
from agent import local_server
from agent.client import UNREACHABLE, CallWatch
from sessions.store import Store, StoreError

_handles: dict[tuple[str, int], "Handle"] = {}
STOP_POLL_S = 0.2  # the heartbeat reads the stop flag this often between its beats (one indexed read)
_guard = threading.Lock()


class Handle:
    """A job run by this process."""

    def __init__(self, store: Store, job: sessions.jobs.Job, lease_s: float, stop: threading.Event | None = None):
        self.store, self.id, self.kind, self.lease_s = store, job.id, job.kind, lease_s
        self.session = job.session
        self.version_id = job.version_id
        self.stop = stop if stop is not None else threading.Event()  # a caller's own Stop, if it has one
        self.finished = threading.Event()
        self.started = time.monotonic()
        self.done_n, self.total, self.detail = 0, job.total, None
        self.state = "running"
        self.result: Any = None  # the work's return value, for the face that started it
        self.error: BaseException | None = None
        self.attempt, self.retry_reason, self.unreachable = 1, None, None
        self.partial = ""  # the answer of the model call in flight so far, as it streams (for a face to show)
        self.on_beat: list[Callable[[], None]] = []  # e.g. renew the leases of claimed items
        self.beat_error: str | None = None  # the last heartbeat's failure, while they fail
        self._beater = threading.Thread(target=self._beat_loop, daemon=True, name=f"job-{job.id}-heartbeat")

    # -- what the work calls
    def progress(
        self,
        done: int | None = None,
        total: int | None = None,
        detail: str | None = None,
        version_id: int | None = None,
    ) -> None:
        """Progress, written with the next heartbeat (never a transaction per step)."""
        if done is not None:
            self.done_n = done
        if total is not None:
            self.total = total
        if detail is not None:
            self.detail = detail
        if version_id is not None:
            self.version_id = version_id

    def should_stop(self) -> bool:
        return self.stop.is_set()

    def sync_stop(self) -> bool:
        """The stop flag as the database holds it now: a face may have raised it since the
        last beat (worker processes read it there, so the work can end before a beat)."""
        if not self.stop.is_set():
            try:
                if sessions.jobs.stop_requested(self.store, self.id):
                    self.stop.set()
            except Exception:  # a busy database: the beats' view stands
                pass
        return self.stop.is_set()

    def watch(self) -> CallWatch:
        """The CallWatch for one model call of this job: Stop cancels it; a step's answer streams
        into `partial` (the Editor shows it as it is written)."""
        self.partial = ""
        return CallWatch(self.stop, on_retry=self.on_retry, on_text=self._on_text if self.kind == "step" else None)

    def _on_text(self, text: str) -> None:
        self.partial = text

    def on_retry(self, attempt: int, reason: str) -> None:
        """Heard of a retry: shown in the status. Never a Stop: the retries announced happen
        (an unreachable endpoint or a hang-up fails the call after them, not at the first)."""
        self.attempt, self.retry_reason, self.partial = attempt + 1, reason, ""
        self.unreachable = reason if reason.startswith(UNREACHABLE) else None

    @property
    def cancelled(self) -> bool:
        return self.stop.is_set()

    def status(self, now: float | None = None) -> str:
        """One line for a face: what is happening and for how long."""
        elapsed = (now if now is not None else time.monotonic()) - self.started
        line = f"Calling the model… {elapsed:.1f} s" if self.kind == "step" else f"{self.kind} running {elapsed:.0f} s"
        if self.kind == "step" and local_server.loading():  # the first step after launch waits for it
            line = f"Loading the built-in model… {elapsed:.1f} s"
        if self.attempt > 1:
            line += f" · attempt {self.attempt} (last: {self.retry_reason})"
        if self.beat_error:
            line += f" · heartbeat failing: {self.beat_error}"
        return line

    # -- the heartbeat
    def _interval(self) -> float:
        return max(0.05, min(1.0, self.lease_s / 3))

    def _beat_loop(self) -> None:
        """A beat (lease and progress, a write) every interval; between beats, the stop flag is
        read every STOP_POLL_S, so `jobs stop N` from another process cancels the calls in flight
        within that (a read: it never waits behind a writer)."""
        self.store.set_level_per_transaction()  # the heartbeat's connection: light transactions only
        next_beat = time.monotonic() + self._interval()
        while not self.finished.wait(max(0.0, min(STOP_POLL_S, next_beat - time.monotonic()))):
            try:
                if not self.stop.is_set() and sessions.jobs.stop_requested(self.store, self.id):
                    self.stop.set()
                if time.monotonic() < next_beat:
                    continue
                next_beat = time.monotonic() + self._interval()
                if sessions.jobs.beat(
                    self.store,
                    self.id,
                    lease_s=self.lease_s,
                    done=self.done_n,
                    total=self.total,
                    detail=self.detail,
                    version_id=self.version_id,
                ):
                    self.stop.set()
                for fn in self.on_beat:
                    fn()
                self.beat_error = None
            except Exception as exc:  # a busy database: the next beat tries again, and the failure is said
                if self.finished.is_set():
                    break
                self._beat_failed(exc)

    def _beat_failed(self, exc: BaseException) -> None:
        """One line on stderr when the heartbeat starts failing (not each second of it): the
        job's lease, and its items' claims, run out unless a beat gets through."""
        msg = " ".join(str(exc).split()) or type(exc).__name__
        if self.beat_error is None:
            print(
                f"job {self.id}: heartbeat failed ({msg}); its lease runs out in {self.lease_s:g} s "
                "unless a beat gets through",
                file=sys.stderr,
                flush=True,
            )
        self.beat_error = msg

    def end(self, state: str, error: str | None = None, result: Any = None) -> None:
        self.state = state
        # a stopped job names the version its work reached, with the end: a step it recorded
        # after Stop (past the engine's last check) is then older than its stop, and the version
        # reads "stopped", not "open". (A run's step that ends done names none: the run's job
        # stands for it.)
        reached = self.version_id if state == "stopped" else None
        try:
            sessions.jobs.finish(
                self.store, self.id, state, error=error, result=result, done=self.done_n, version_id=reached
            )
        finally:  # an ended job's handle is its starter's alone: this process's table lets it go
            forget(self)
            self.finished.set()
            if self._beater.is_alive() and self._beater is not threading.current_thread():
                self._beater.join(5)  # its last beat is done before the caller closes the store


def open_job(
    store: Store, kind: str, *, lease_s: float | None = None, stop: threading.Event | None = None, **row: Any
) -> Handle:
    """A job row held by this process, with its heartbeat running (`stop`: the caller's
    own Stop event becomes the job's)."""
    lease = lease_s if lease_s is not None else sessions.jobs.LEASE_S
    h = Handle(store, sessions.jobs.create(store, kind, lease_s=lease, **row), lease, stop)
    with _guard:
        _handles[(store.file, h.id)] = h
    h._beater.start()
    return h


def _outcome(h: Handle, exc: BaseException | None) -> tuple[str, str | None]:
    """The job's end state: stopped (Stop, Ctrl-C), failed (an exception, or a result that
    reports an error, as a run ended by a model call that failed for good), else done."""
    if exc is None:
        if h.sync_stop():
            return "stopped", None
        error = getattr(h.result, "error", None)
        return ("failed", " ".join(error.split())) if isinstance(error, str) and error else ("done", None)
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if h.cancelled or isinstance(exc, KeyboardInterrupt):
        return "stopped", None if isinstance(exc, KeyboardInterrupt) else msg
    return "failed", msg


def run_here(
    store: Store,
    kind: str,
    work: Callable[[Handle], Any],
    *,
    lease_s: float | None = None,
    stop: threading.Event | None = None,
    **row: Any,
) -> Any:
    """Run `work(handle)` in this thread as a job (the CLI): Ctrl-C ends it "stopped"."""
    h = open_job(store, kind, lease_s=lease_s, stop=stop, **row)
    try:
        h.result = work(h)
    except BaseException as exc:
        h.error = exc
        h.end(*_outcome(h, exc))
        raise
    else:
        h.end(*_outcome(h, None), result=_json(h.result))
    finally:
        forget(h)
    return h.result


def start(
    store: Store, kind: str, work: Callable[[Handle], Any], *, lease_s: float | None = None, **row: Any
) -> Handle:
    """Run `work(handle)` in a thread of its own as a job (the app); returns at once. The
    face that started it keeps the handle; `handle()` finds it only while it runs (so a
    long-running app keeps no handle of an ended job)."""
    h = open_job(store, kind, lease_s=lease_s, **row)

    def target() -> None:
        try:
            h.result = work(h)
            state, error = _outcome(h, None)
        except BaseException as exc:  # kept on the handle for the face that started it
            h.error = exc
            state, error = _outcome(h, exc)
        try:
            h.end(state, error, _json(h.result))
        except StoreError:
            forget(h)
            h.finished.set()

    threading.Thread(target=target, daemon=True, name=f"job-{h.id}-{kind}").start()
    return h


def _json(value: Any) -> Any:
    """The work's result as the row keeps it: JSON, else None (e.g. a list of records)."""
    if not isinstance(value, (dict, list, int, float, str, bool)):
        return None
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def handle(store: Store, job_id: int | None) -> Handle | None:
    """This process's handle of a job (None: another process runs it, or it is unknown)."""
    if job_id is None:
        return None
    return _handles.get((store.file, job_id))


def forget(h: Handle) -> None:
    """Drop a finished job's handle (its row stays)."""
    with _guard:
        if _handles.get((h.store.file, h.id)) is h:
            del _handles[(h.store.file, h.id)]


def stop(store: Store, job_id: int) -> sessions.jobs.Job:
    """Stop a job wherever it runs: here at once (the call in flight is cancelled), in
    another process at its next heartbeat."""
    h = handle(store, job_id)
    if h is not None:
        h.stop.set()
    return sessions.jobs.request_stop(store, job_id)


def _stop_all() -> None:
    """At exit: every job this process still runs ends "stopped" (resumable)."""
    for h in list(_handles.values()):
        if not h.finished.is_set():
            h.stop.set()
            try:
                h.end("stopped", "the process running it ended")
            except Exception:  # pragma: no cover - best effort at exit
                pass


atexit.register(_stop_all)
