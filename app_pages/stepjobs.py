"""Model steps run beside the page, one per version at a time.

The Editor starts a step here and watches it: it shows the call in flight (elapsed time, the
attempt on retries), refuses a second step of the same version while one runs (a double
click takes one step), and Stop cancels it through the engine's `CallWatch` - the version
stays as it was. An unreachable endpoint fails at once instead of retrying for seconds.
No Streamlit here: jobs outlive the script runs that started them."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agent.client import UNREACHABLE, CallWatch

_jobs: dict[tuple[str, int], "StepJob"] = {}
_guard = threading.Lock()


@dataclass
class StepJob:
    key: tuple[str, int]
    started: float = field(default_factory=time.monotonic)
    watch: CallWatch = field(default_factory=lambda: CallWatch(threading.Event()))
    attempt: int = 1
    retry_reason: str | None = None
    unreachable: str | None = None  # set when the endpoint could not be reached (no retries)
    report: Any = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def on_retry(self, attempt: int, reason: str) -> None:
        self.attempt, self.retry_reason = attempt + 1, reason
        if reason.startswith(UNREACHABLE):
            self.unreachable = reason
            self.watch.cancel.set()

    @property
    def cancelled(self) -> bool:
        return self.watch.cancel.is_set() and self.unreachable is None

    def status(self, now: float | None = None) -> str:
        """One line for the page: what is happening and for how long."""
        elapsed = (now if now is not None else time.monotonic()) - self.started
        line = f"Calling the model… {elapsed:.1f} s"
        if self.attempt > 1:
            line += f" · attempt {self.attempt} (last: {self.retry_reason})"
        return line


def start(engine: Any, lock: Any, db: str, version_id: int) -> StepJob:
    """Start one model step of the version, or return the one already in flight."""
    key = (db, version_id)
    with _guard:
        job = _jobs.get(key)
        if job is not None and not job.done.is_set():
            return job
        job = _jobs[key] = StepJob(key)
    job.watch.on_retry = job.on_retry

    def work() -> None:
        try:
            with lock:
                job.report = engine.step(version_id, watch=job.watch)
        except BaseException as exc:  # handed to the page, which shows it
            job.error = exc
        finally:
            job.done.set()

    threading.Thread(target=work, name=f"step-v{version_id}", daemon=True).start()
    return job


def current(db: str, version_id: int) -> StepJob | None:
    """The version's step job (running, or finished and not yet collected)."""
    return _jobs.get((db, version_id))


def collect(job: StepJob) -> None:
    """Forget a finished (or abandoned) job."""
    with _guard:
        if _jobs.get(job.key) is job:
            del _jobs[job.key]


def cancel(db: str, version_id: int) -> bool:
    """Stop: cancel the step in flight (its answer, if any comes, is not used)."""
    job = current(db, version_id)
    if job is None or job.done.is_set():
        return False
    job.watch.cancel.set()
    collect(job)
    return True
