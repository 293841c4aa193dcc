"""How an experiment's items run (`run`, first run and resume alike): as one job, claimed a few
at a time under the job's lease so several runners share an experiment and none runs an item
twice, by worker threads (one Engine each, writes through the Store's one writer) or worker
processes; an endpoint that refuses every call stops the batch after a few failures in a row."""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import sessions.jobs
from agent import jobs, methods
from agent.batch import BatchAborted, JobResult, run_batch
from agent.client import CallWatch
from agent.engine import Engine
from agent.experiment import ExperimentError
from agent.experiment_scores import summary
from agent.item_starts import _Claims, _start_item, _Starts, first_revision
from sessions import experiments, item_claims
from sessions.store import Store, StoreError
from sessions.writer import attached, write, write_later
from trajectory.records import Version


@dataclass
class Progress:
    total: int
    done: int
    success: int
    failed: int
    elapsed_s: float
    started_with: int  # items already done when this run began (for the ETA)

    @property
    def eta_s(self) -> float | None:
        ran = self.done + self.failed - self.started_with
        left = self.total - self.done
        if ran <= 0 or left <= 0:
            return None if left else 0.0
        return self.elapsed_s / ran * left


class _ItemFailed(Exception):
    pass


class _Workers:
    """One Engine (its own environments) per worker thread, all on the run's Store: each
    thread has its own connection, and the Store's lock queues their writes in the process
    (separate Stores would contend through SQLite's busy-wait, which sleeps)."""

    def __init__(self, store: Store, api_key: str | None):
        self.store, self.api_key = store, api_key
        self._local = threading.local()

    def engine(self) -> Engine:
        eng = getattr(self._local, "engine", None)
        if eng is None:
            eng = self._local.engine = Engine(self.store, api_key=self.api_key)
        return eng


def run_item(
    engine: Engine,
    exp: experiments.Experiment,
    it: experiments.Item,
    should_stop: Callable[[], bool],
    *,
    concurrency: int = 1,
    watch: CallWatch | None = None,
    token: int | None = None,
    known: Version | None = None,
) -> dict:
    """Run or continue one task of the experiment in its (single) episode, already linked.
    `token`: the runner's claim of the item; every write of the item checks it (ClaimLost
    when another runner took the item over: nothing of its record is overwritten)."""
    store, item_id, ep_id = engine.store, it.id, it.episode_id

    def on_phase(phase: str, version_id: int) -> None:
        write(store, lambda: experiments.record_phase(store, item_id, phase, version_id, token=token))

    def record(
        **outcome: Any,
    ) -> None:  # light (re-derived by a resume): with the run's next group when it has a writer
        write_later(
            store,
            lambda: experiments.record_item(store, item_id, token=token, **outcome),
            on_error=lambda exc: print(f"experiment {exp.id}: {exc}", file=sys.stderr, flush=True),
        )

    fenced = engine.fenced(ep_id, item_claims.fence(item_id, token)) if token is not None else contextlib.nullcontext()
    try:
        with fenced:  # every step of the item checks its claim as it is recorded
            out = methods.run_item(
                engine,
                ep_id,
                exp.method,
                samples=int(exp.params.get("samples", methods.DEFAULT_SAMPLES)),
                sc_temperature=float(exp.params.get("sc_temperature", methods.SC_TEMPERATURE)),
                should_stop=should_stop,
                phases=it.phases,
                on_phase=on_phase,
                concurrency=concurrency,
                watch=watch,
                known=known,
            )
    except item_claims.ClaimLost:
        raise
    except Exception as exc:  # an environment or store bug: record it on the item, fail the job
        msg = " ".join(str(exc).split()) or type(exc).__name__
        record(status="error", error=msg)
        raise _ItemFailed(msg) from exc
    finally:
        engine.envs.forget_env(ep_id)  # hand the game / pages back: a worker runs many episodes
    status = "done" if out.done else ("running" if out.stopped else "error")
    record(status=status, version_id=out.version_id, success=out.success, metrics=out.metrics, error=out.error)
    if out.error:
        raise _ItemFailed(out.error)
    return {"item": item_id, "episode": ep_id, "done": out.done, "success": out.success}


def _claimed_item(
    engine: Engine,
    exp: experiments.Experiment,
    job_id: int,
    lease_s: float,
    item_id: int,
    should_stop: Callable[[], bool],
    concurrency: int,
    watch: CallWatch | None = None,
    claims: "_Claims | None" = None,
    starts: "_Starts | None" = None,
) -> dict:
    """`run_item` once the item is ours: another runner holding it (or having finished it)
    makes this a skip, so two runners of one experiment never run the same item. The claim,
    the item's episode and its first phase's version commit together. A claim taken over
    meanwhile (this runner's lease ran out) stops the item between model calls, with one
    line: its writes are fenced by the claim's token, so nothing of the other runner's is
    overwritten. `claims`: the job's held claims, which its heartbeat checks (else each
    stop check reads the claim). `starts`: the run's claims in batches (held from the batch's
    claim on)."""
    store = engine.store
    if starts is not None:
        token, it, made = starts.take(item_id)
    else:
        rev = first_revision(store, exp)
        token, it, made = write(store, lambda: _start_item(store, exp, job_id, lease_s, item_id, rev), durable=False)
    if token is None:
        return {"item": item_id, "skipped": True}
    if made is not None:  # the rows just written: the first step reads neither again
        engine.paths.know_new(*made, exemplar_rev=first_revision(store, exp))
    claims = claims if claims is not None else _Claims(store)
    if starts is None:
        claims.hold(item_id, token)
    try:
        return run_item(
            engine,
            exp,
            it,
            lambda: should_stop() or claims.lost(item_id),
            concurrency=concurrency,
            watch=watch,
            token=token,
            known=made[1] if made else None,
        )
    except item_claims.ClaimLost as exc:
        print(f"experiment {exp.id}, job {job_id}: {exc}", file=sys.stderr, flush=True)
        return {"item": item_id, "lost": True, "done": False, "success": None}
    except BaseException:  # (recording the item's result releases it too)
        write(store, lambda: item_claims.release(store, item_id, job_id, token), durable=False)
        raise
    finally:
        claims.drop(item_id)


def _process_item(db_path: str, exp_id: int, api_key: str | None, job_id: int, lease_s: float, item_id: int) -> dict:
    """An item in a worker process (ALFWorld): one Store + Engine per process. Stop is the
    job's flag in the database, read between model calls."""
    eng = _PROCESS_ENGINES.get(db_path)
    if eng is None:
        eng = _PROCESS_ENGINES[db_path] = Engine(Store(db_path, create=False), api_key=api_key)
    return _claimed_item(
        eng,
        experiments.get(eng.store, exp_id),
        job_id,
        lease_s,
        item_id,
        lambda: sessions.jobs.stop_requested(eng.store, job_id),
        1,
    )


_PROCESS_ENGINES: dict[str, Engine] = {}


def run(
    db_path: str,
    ref: int | str,
    *,
    concurrency: int = 1,
    stop: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    api_key: str | None = None,
    max_consecutive_failures: int = 5,
    mode: str = "threads",
    handle: jobs.Handle | None = None,
    lease_s: float | None = None,
    tracer: Callable[[str, Any], None] | None = None,
) -> dict[str, Any]:
    """Run every unfinished item of the experiment (first run and resume alike) as a job,
    and return its summary. Items are claimed a few at a time (BATCH) under the job's lease, so
    several runners (the app, CLI processes) share an experiment's items; a dead runner's
    items are taken over once its lease runs out. Raises ExperimentError when the batch
    stops on consecutive failures. `mode="processes"` runs items in worker processes.
    `tracer`: `fn(sql, params)` for every statement of the Store the run opens (`Store(tracer=...)`)."""
    store = Store(db_path, create=False, tracer=tracer)
    try:
        exp = experiments.get(store, ref)
        opts = _Options(concurrency, stop, on_progress, api_key, max_consecutive_failures, mode)
        if handle is not None:
            return _run(store, exp, handle, opts)
        return jobs.run_here(
            store,
            "experiment",
            lambda h: _run(store, exp, h, opts),
            lease_s=lease_s,
            stop=stop,
            experiment_id=exp.id,
            target=f"experiment {exp.name}",
            total=sum(experiments.counts(store, exp.id).values()),
        )
    finally:
        store.close()


@dataclass
class _Options:
    concurrency: int
    stop: threading.Event | None
    on_progress: Callable[[Progress], None] | None
    api_key: str | None
    max_failures: int
    mode: str


def _run(store: Store, exp: experiments.Experiment, h: jobs.Handle, o: _Options) -> dict[str, Any]:
    items = experiments.items(store, exp.id)
    counts = {
        "done": sum(it.status == "done" for it in items),
        "success": sum(bool(it.success) for it in items if it.status == "done"),
        "failed": 0,
    }
    start_done, t0 = counts["done"], time.monotonic()

    def report(res: JobResult) -> None:
        if res.ok and res.value.get("skipped"):
            return
        if res.ok and res.value["done"]:
            counts["done"] += 1
            counts["success"] += bool(res.value["success"])
        elif not res.ok:
            counts["failed"] += 1
        h.progress(done=counts["done"], total=len(items), detail=f"{counts['success']} successes")
        if o.on_progress:
            o.on_progress(
                Progress(
                    len(items), counts["done"], counts["success"], counts["failed"], time.monotonic() - t0, start_done
                )
            )

    claims = _Claims()
    h.on_beat.append(lambda: claims.renew(store, exp.id, h.id, h.lease_s))
    if o.stop is not None:  # a caller's own Stop (threading.Event) is the job's Stop too
        h.on_beat.append(lambda: o.stop.is_set() and h.stop.set())
    h.progress(done=counts["done"], total=len(items))
    if o.on_progress:
        o.on_progress(Progress(len(items), counts["done"], counts["success"], 0, 0.0, start_done))
    experiments.set_status(store, exp.id, "running")
    first_revision(store, exp)  # (known from here on: the workers' item starts read nothing for it)
    status, error = "done", None
    try:
        with attached(store) if o.mode == "threads" else contextlib.nullcontext():  # one writer, group commits
            _rounds(store, exp, h, o, report, claims)
    except BatchAborted as exc:
        status, error = "aborted", str(exc)
    except KeyboardInterrupt:
        experiments.set_status(store, exp.id, "stopped", add_wall_s=time.monotonic() - t0)
        raise
    left = experiments.counts(store, exp.id)
    h.sync_stop()  # a Stop the workers read in the database before the next beat brought it here
    if status == "done" and sum(n for s, n in left.items() if s != "done"):
        status = "stopped" if h.stop.is_set() else "incomplete"
        if not h.stop.is_set() and item_claims.holders(store, exp.id, h.id):
            status = "running"  # another runner still works on it
    experiments.set_status(store, exp.id, status, add_wall_s=time.monotonic() - t0)
    if error:
        raise ExperimentError(f"experiment {exp.name!r} {error}; fix the cause, then `experiment resume {exp.id}`")
    return summary(store, exp.id)


def _rounds(
    store: Store,
    exp: experiments.Experiment,
    h: jobs.Handle,
    o: _Options,
    report: Callable[[JobResult], None],
    claims: _Claims,
) -> None:
    """Batches over the claimable items until none is left that this run has not tried;
    items another runner holds are waited for (it finishes them, or dies and its lease
    runs out: then they are taken over here), so nothing is lost and nothing runs twice."""
    workers = _Workers(store, o.api_key)
    tried: set[int] = set()

    def ran(res: JobResult) -> None:
        if not (res.ok and res.value.get("skipped")):
            tried.add(res.key)
        report(res)

    while not h.stop.is_set():
        todo = [i for i in item_claims.claimable(store, exp.id) if i not in tried]
        if not todo and _free_dead_claims(store, exp.id, h.id):
            continue
        if not todo and item_claims.holders(store, exp.id, h.id):  # another runner's items: done by it, or
            h.stop.wait(min(1.0, h.lease_s / 4))  # taken over here once its lease runs out
            continue
        if not todo:
            break
        work, starts = _work(store, exp, h, o, workers, claims, todo)
        try:
            run_batch(
                todo,
                work,
                concurrency=o.concurrency,
                stop=h.stop,
                on_result=ran,
                max_consecutive_failures=o.max_failures,
                mode=o.mode,
            )
        finally:
            if starts is not None:
                starts.release_rest()


def _work(
    store: Store,
    exp: experiments.Experiment,
    h: jobs.Handle,
    o: _Options,
    workers: _Workers,
    claims: _Claims,
    todo: list[int],
) -> tuple[Callable[[int], Any], _Starts | None]:
    """What a round's batch runs per item (in a worker process, or in a thread with this run's
    engines), and the round's claims in batches (threads only)."""
    starts = None
    if o.mode == "processes":
        work: Callable[[int], Any] = functools.partial(_process_item, store.file, exp.id, o.api_key, h.id, h.lease_s)
    else:
        starts = _Starts(store, exp, h.id, h.lease_s, todo, claims)

        def work(item_id: int) -> dict:
            return _claimed_item(
                workers.engine(),
                exp,
                h.id,
                h.lease_s,
                item_id,
                h.should_stop,
                o.concurrency,
                h.watch(),
                claims,
                starts,
            )

    return work, starts


def _free_dead_claims(store: Store, exp_id: int, job_id: int) -> bool:
    """Items held by a runner known to be dead (a killed process of this machine, or a
    job already ended) are freed at once; True when some were."""
    freed = False
    for other in item_claims.holders(store, exp_id, job_id):
        try:
            job = sessions.jobs.get(store, other)
        except StoreError:
            job = None
        if job is None or sessions.jobs.owner_gone(job):
            if job is not None and job.active:
                sessions.jobs.finish(store, job.id, "stopped", error="its process ended")
            item_claims.release_job(store, exp_id, other)
            freed = True
    return freed
