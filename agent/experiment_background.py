"""The app's face on experiment jobs (`Background`): starts them in this process and follows
any experiment job of the database, whichever process runs it, with Stop."""

from __future__ import annotations

import threading
from typing import Any

import sessions.jobs
from agent import jobs
from agent.experiment_runner import Progress, run
from sessions import experiments
from sessions.store import Store


class Background:
    """The app's face on experiment jobs: starts them in this process (a long batch never
    blocks the page or other sessions) and follows any experiment job of the database,
    whichever process runs it (the CLI's too), with Stop."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self._store: Store | None = None
        self._progress: dict[int, Progress] = {}
        self._errors: dict[int, str] = {}
        self._lock = threading.Lock()

    @property
    def store(self) -> Store:
        if self._store is None:  # opened on first use (the page may load before the database exists)
            self._store = Store(self.db_path)
        return self._store

    def start(
        self, exp_id: int, *, concurrency: int = 1, api_key: str | None = None, session: str | None = None
    ) -> bool:
        """Launch (or resume) the experiment; False when a runner already works on it here."""
        with self._lock:
            if any(jobs.handle(self.store, j.id) for j in sessions.jobs.active(self.store, experiment_id=exp_id)):
                return False
            self._errors.pop(exp_id, None)
            exp = experiments.get(self.store, exp_id)

            def work(h: jobs.Handle) -> dict[str, Any]:
                try:
                    return run(
                        self.db_path,
                        exp_id,
                        concurrency=concurrency,
                        api_key=api_key,
                        handle=h,
                        on_progress=lambda p: self._progress.__setitem__(exp_id, p),
                    )
                except Exception as exc:  # shown on the page; the items keep their own errors
                    self._errors[exp_id] = " ".join(str(exc).split()) or type(exc).__name__
                    raise

            jobs.start(
                self.store,
                "experiment",
                work,
                experiment_id=exp_id,
                target=f"experiment {exp.name}",
                session=session,
                total=sum(experiments.counts(self.store, exp_id).values()),
            )
            return True

    def job(self, exp_id: int) -> sessions.jobs.Job | None:
        """The newest live job on the experiment, in any process."""
        live = sessions.jobs.active(self.store, experiment_id=exp_id)
        return live[0] if live else None

    def stop(self, exp_id: int) -> None:
        """Stop every runner of the experiment: each cancels its model calls in flight and ends."""
        for j in sessions.jobs.active(self.store, experiment_id=exp_id):
            jobs.stop(self.store, j.id)

    def running(self, exp_id: int) -> bool:
        return self.job(exp_id) is not None

    def progress(self, exp_id: int) -> Progress | None:
        return self._progress.get(exp_id)

    def error(self, exp_id: int) -> str | None:
        return self._errors.get(exp_id)
