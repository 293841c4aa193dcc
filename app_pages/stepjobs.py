"""Model steps run beside the page: a thin face on the one runner (`agent.jobs`).

Each step is a job of the database, started for ONE browser session (tab): only that tab
collects its result, error and notice; any other tab showing the episode sees the job
as progress with Stop (`others`). A double click in the tab takes one step (the tab's step
in flight is returned), and Stop cancels the call in flight through the job's CallWatch -
the version stays as it was. An unreachable endpoint is retried as announced, then fails.
No Streamlit here: jobs outlive the script runs that started them."""

from __future__ import annotations

import threading
import time
from typing import Any

import sessions.jobs
from agent import jobs
from sessions.numbering import label_of

StepJob = jobs.Handle

_mine: dict[tuple[str, str, int], jobs.Handle] = {}  # (database, tab, version) -> the tab's step
_seen: dict[str, float] = {}  # tab -> when it last asked (a tab that stops asking was closed)
_guard = threading.Lock()
IDLE_S = 600.0  # a tab unseen this long is closed: its finished, uncollected steps are let go
_clock = time.monotonic


def _visit(session: str) -> None:
    """The tab is alive; the entries of tabs unseen for IDLE_S (closed) whose jobs ended are
    released, so a long-running app does not grow. Called under _guard."""
    now = _clock()
    _seen[session] = now
    gone = {tab for tab, at in _seen.items() if now - at > IDLE_S}
    if not gone:
        return
    for key, h in list(_mine.items()):
        if key[1] in gone and h.finished.is_set():
            del _mine[key]
            jobs.forget(h)
    waiting = {key[1] for key in _mine}
    for tab in gone - waiting:
        del _seen[tab]


def start(engine: Any, session: str, version_id: int, *, in_run: bool = False) -> jobs.Handle:
    """Start one model step of the version for this tab, or return the tab's step of it
    still in flight (`in_run`: a step of the tab's run, whose own job holds the run)."""
    store = engine.store
    key = (store.file, session, version_id)
    with _guard:
        _visit(session)
        h = _mine.get(key)
        if h is not None and not h.finished.is_set():
            return h
        ep = store.versions.get(version_id).episode_id

        def work(job: jobs.Handle) -> Any:
            rep = engine.step(version_id, watch=job.watch())  # the engine locks what needs it
            job.progress(done=len(rep.steps), version_id=rep.version.id)
            return rep

        # a step of a run names no version: the run's own job stands for it (one status per version)
        h = _mine[key] = jobs.start(
            store,
            "step",
            work,
            episode_id=ep,
            version_id=None if in_run else version_id,
            session=session,
            target=f"episode {ep} {label_of(store, version_id)}",
        )
    return h


def current(store: Any, session: str, version_id: int) -> jobs.Handle | None:
    """This tab's step job of the version (running, or finished and not yet collected)."""
    with _guard:
        _visit(session)
        return _mine.get((store.file, session, version_id))


def collect(job: jobs.Handle) -> None:
    """Forget a finished (or abandoned) job (its row stays, for `react-editor jobs`)."""
    with _guard:
        for key, h in list(_mine.items()):
            if h is job:
                del _mine[key]
    jobs.forget(job)


def cancel(store: Any, session: str, version_id: int) -> bool:
    """Stop: cancel this tab's step in flight (its answer, if any comes, is not used)."""
    job = current(store, session, version_id)
    if job is None or job.finished.is_set():
        return False
    jobs.stop(store, job.id)  # the version reads "stopped" from now on (its answer will not be used)
    collect(job)
    return True


def others(store: Any, episode_id: int, session: str) -> list[sessions.jobs.Job]:
    """Live jobs on the episode that this tab did not start (other tabs, other processes):
    one per run - the step a run takes (it names no version) is shown by its run."""
    live = [j for j in sessions.jobs.active(store, episode_id=episode_id) if j.session != session]
    runs = {j.session for j in live if j.kind != "step" and j.session}
    return [j for j in live if not (j.kind == "step" and j.version_id is None and j.session in runs)]
