"""Experiments: create one (fixed config, method and task list), run or resume it
concurrently, score it like the paper's Tables 1 and 3, and compare two task by task.

Each worker thread has its own Store connection and Engine (sqlite connections and the
engine's live environments are not shared across threads); writes are short transactions.
An item whose episode fails is recorded with its error and retried by `resume`; an
endpoint that refuses every call stops the batch after a few failures in a row.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from agent import exemplars, jobs, leakage, methods
from agent.batch import BatchAborted, JobResult, run_batch
from agent.client import CallWatch
from agent.engine import Engine, EngineError
from envs.base import EnvError
from envs.registry import family
from sessions import experiments
import sessions.jobs
from sessions.store import Store, StoreError
from sessions.writer import attached, write, write_later
from trajectory.records import AgentConfig, Episode, Task, Version
from trajectory.multiplicity import holm
from trajectory.stats import METHOD_PAIRED, mcnemar_exact, paired_test, tango_diff



def family_or_none(env: str):
    """The kind's family, or None when it is not installed here (its results still show)."""
    try:
        return family(env)
    except EnvError:
        return None


def task_types(env: str) -> tuple[str, ...]:
    """The kind's task types in its results order (the paper's table columns)."""
    fam = family_or_none(env)
    return tuple(t for t, _ in fam.task_types) if fam else ()


def type_label(env: str, task_type: str) -> str:
    """A task type's column title (ALFWorld's `Pick`, `Clean`, ...); else the type itself."""
    fam = family_or_none(env)
    return dict(fam.task_types).get(task_type, task_type) if fam else task_type


# USD per million (prompt, completion) tokens, unless Settings stores a price for the model
# (setting "model_prices": {model: {"prompt": $, "completion": $}}); other models cost 0.
PRICES_SETTING = "model_prices"
PRICES = {"gpt-3.5-turbo-instruct": (1.5, 2.0), "gpt-4o-mini": (0.15, 0.6), "gpt-4o": (2.5, 10.0),
          "gpt-4.1-mini": (0.4, 1.6), "gpt-4.1": (2.0, 8.0)}


class ExperimentError(EngineError):
    """A one-line problem with an experiment (e.g. the batch stopped on failures)."""


# ---------------------------------------------------------------------------- create

def create(store: Store, *, env: str, method: str, config: AgentConfig, tasks: list[Task],
           name: str | None = None, env_options: dict | None = None, params: dict | None = None) -> experiments.Experiment:
    """A new experiment; the method's prompt style is fixed into the config."""
    family(env)
    methods.check_method(env, method)
    methods.check_exemplars(env, method, config.exemplar_set, store)
    update: dict[str, Any] = {"style": methods.prompt_style(method)}
    if method == "react-cot-sc" and config.max_steps is None:  # the back-off budget, not the loop's 7
        update["max_steps"] = methods.backoff_steps(env)
    config = config.model_copy(update=update)
    params = dict(params or {})
    if "sc" in method.replace("-", " ").split():
        params.setdefault("samples", methods.DEFAULT_SAMPLES)
        params.setdefault("sc_temperature", methods.SC_TEMPERATURE)
        if params["samples"] < 1:
            raise ExperimentError("--samples must be at least 1")
    # recorded as it is at launch: the set may change later, the run saw this one
    params[LEAKED_KEY] = [t.key for t in leakage.leaked_tasks(store, config.exemplar_set, tasks)]
    return experiments.create(store, name=name or _default_name(store, env, method), env=env, method=method,
                              config=config, tasks=tasks, env_options=env_options, params=params)


LEAKED_KEY = "leaked"  # params: task keys whose own trajectory was an exemplar of the run
RERUN_KEY = "rerun_of"  # params: the experiment this one re-ran with a change


def leaked_keys(store: Store, exp: experiments.Experiment) -> list[str]:
    """The experiment's leaked task keys: recorded at creation, else (older rows) the
    set as it is now."""
    if LEAKED_KEY in exp.params:
        return list(exp.params[LEAKED_KEY])
    return [t.key for t in leakage.leaked_tasks(store, exp.config.exemplar_set, [it.task for it in experiments.items(store, exp.id)])]


def rerun(store: Store, ref: int | str, *, config: dict[str, Any] | None = None, method: str | None = None,
          name: str | None = None, leave_out_leaked: bool = False) -> experiments.Experiment:
    """A new experiment on the source's tasks with the same settings but the changes
    given (`config`: AgentConfig fields, e.g. {"exemplar_set": "fixed"}); it names its
    source so its paired comparison can open by itself."""
    src = experiments.get(store, ref)
    cfg = src.config.model_validate({**src.config.model_dump(), **(config or {})})
    tasks = [it.task for it in experiments.items(store, src.id)]
    if leave_out_leaked:
        out = {t.key for t in leakage.leaked_tasks(store, cfg.exemplar_set, tasks)}
        tasks = [t for t in tasks if t.key not in out]
    if not tasks:
        raise ExperimentError("no task left to run")
    keep = {k: v for k, v in src.params.items() if k not in (LEAKED_KEY, RERUN_KEY)}
    return create(store, env=src.env, method=method or src.method, config=cfg, tasks=tasks, name=name,
                  env_options=src.env_options, params={**keep, RERUN_KEY: src.id})


def _default_name(store: Store, env: str, method: str) -> str:
    base = f"{env}-{method}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}"
    taken = {e.name for e in experiments.list_all(store)}
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


# ---------------------------------------------------------------------------- run

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


def run_item(engine: Engine, exp: experiments.Experiment, it: experiments.Item, should_stop: Callable[[], bool], *,
             concurrency: int = 1, watch: CallWatch | None = None, token: int | None = None,
             known: Version | None = None) -> dict:
    """Run or continue one task of the experiment in its (single) episode, already linked.
    `token`: the runner's claim of the item; every write of the item checks it (ClaimLost
    when another runner took the item over: nothing of its record is overwritten)."""
    store, item_id, ep_id = engine.store, it.id, it.episode_id

    def on_phase(phase: str, version_id: int) -> None:
        write(store, lambda: experiments.record_phase(store, item_id, phase, version_id, token=token))

    def record(**outcome: Any) -> None:  # light (re-derived by a resume): with the run's next group when it has a writer
        write_later(store, lambda: experiments.record_item(store, item_id, token=token, **outcome),
                    on_error=lambda exc: print(f"experiment {exp.id}: {exc}", file=sys.stderr, flush=True))

    fenced = engine.fenced(ep_id, experiments.fence(item_id, token)) if token is not None else contextlib.nullcontext()
    try:
        with fenced:  # every step of the item checks its claim as it is recorded
            out = methods.run_item(engine, ep_id, exp.method,
                                   samples=int(exp.params.get("samples", methods.DEFAULT_SAMPLES)),
                                   sc_temperature=float(exp.params.get("sc_temperature", methods.SC_TEMPERATURE)),
                                   should_stop=should_stop, phases=it.phases, on_phase=on_phase,
                                   concurrency=concurrency, watch=watch, known=known)
    except experiments.ClaimLost:
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


def _claimed_item(engine: Engine, exp: experiments.Experiment, job_id: int, lease_s: float, item_id: int,
                  should_stop: Callable[[], bool], concurrency: int, watch: CallWatch | None = None,
                  claims: "_Claims | None" = None, starts: "_Starts | None" = None) -> dict:
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
        return run_item(engine, exp, it, lambda: should_stop() or claims.lost(item_id), concurrency=concurrency,
                        watch=watch, token=token, known=made[1] if made else None)
    except experiments.ClaimLost as exc:
        print(f"experiment {exp.id}, job {job_id}: {exc}", file=sys.stderr, flush=True)
        return {"item": item_id, "lost": True, "done": False, "success": None}
    except BaseException:  # (recording the item's result releases it too)
        write(store, lambda: experiments.release(store, item_id, job_id, token), durable=False)
        raise
    finally:
        claims.drop(item_id)


def _start_item(store: Store, exp: experiments.Experiment, job_id: int, lease_s: float, item_id: int,
                rev: int | None) -> tuple[int | None, experiments.Item | None, tuple[Episode, Version] | None]:
    """Claim the item and create its episode, one light transaction (a power cut that loses
    it leaves the item to a resume): (token, item), or (None, None) when another runner
    holds it or it is done. `rev`: `first_revision`, read before the transaction."""
    started = experiments.claim_and_start(store, item_id, job_id, lease_s, exp.config, exp.env_options,
                                          exp.name.replace("{", "{{").replace("}", "}}") + " #{pos}",
                                          methods.PHASES[exp.method][0], rev)
    return started if started is not None else (None, None, None)


def first_revision(store: Store, exp: experiments.Experiment) -> int | None:
    """The exemplar revision an item's new first version is created with (`exemplars.at_start`)."""
    return exemplars.at_start(store, exp.env, exp.config.exemplar_set)


BATCH = 4  # items a worker claims and starts at once (one claim statement and one commit for them)


class _Starts:
    """A run's items claimed and started BATCH at a time, in the order its workers take
    them: the worker that takes an item nobody claimed yet claims it with the next few
    (one light transaction), and the workers taking those find them here. Held in
    `claims` from their claim on (the heartbeat renews them); those never run (the run
    stopped first) are given back by `release_rest`."""

    def __init__(self, store: Store, exp: experiments.Experiment, job_id: int, lease_s: float, order: list[int],
                 claims: "_Claims"):
        self.store, self.exp, self.job_id, self.lease_s, self.claims = store, exp, job_id, lease_s, claims
        self.order, self._next = order, 0
        self._at = {item_id: n for n, item_id in enumerate(order)}
        self._ready: dict[int, tuple] = {}  # item id: (token, item, new rows or None, status before)
        self._claiming: dict[int, threading.Event] = {}  # item id: its batch's claim, under way
        self._refused: set[int] = set()  # done, or another runner's
        self._lock = threading.Lock()

    def take(self, item_id: int) -> tuple:
        """(token, item, new rows or None) of the item, claimed for this run, or (None,)*3."""
        with self._lock:
            if item_id not in self._ready and item_id not in self._refused:
                busy = self._claiming.get(item_id)
                if busy is None:
                    ids = self._batch(item_id)
                    busy = threading.Event()
                    self._claiming.update(dict.fromkeys(ids, busy))
                    ids_mine = ids
                else:
                    ids_mine = None
            else:
                busy = ids_mine = None
        if ids_mine is not None:
            self._claim(ids_mine, busy)
        elif busy is not None:
            busy.wait()
        with self._lock:
            got = self._ready.pop(item_id, None)
            if got is not None:
                return got[:3]
            if item_id in self._refused:
                return None, None, None
        return self._one(item_id)  # (its batch's claim failed: claimed on its own)

    def _batch(self, item_id: int) -> list[int]:
        """The item and the next ones no worker took yet (under the lock)."""
        start = max(self._at.get(item_id, len(self.order)) + 1, self._next)
        more = [i for i in self.order[start:start + BATCH - 1] if i not in self._claiming]
        self._next = start + len(more)
        return [item_id] + more

    def _claim(self, ids: list[int], busy: threading.Event) -> None:
        store, exp = self.store, self.exp
        name = exp.name.replace("{", "{{").replace("}", "}}") + " #{pos}"
        got: dict | None = None
        try:
            rev = first_revision(store, exp)
            got = write(store, lambda: experiments.claim_and_start_many(
                store, ids, self.job_id, self.lease_s, exp.config, exp.env_options, name,
                methods.PHASES[exp.method][0], rev), durable=False)
        finally:
            with self._lock:
                for item_id, (token, it, made) in (got or {}).items():
                    self.claims.hold(item_id, token)
                    self._ready[item_id] = (token, it, made, "pending" if made is not None else None)
                if got is not None:  # (a failed claim: each claimed on its own)
                    self._refused.update(i for i in ids if i not in got)
                for i in ids:
                    self._claiming.pop(i, None)
                busy.set()

    def _one(self, item_id: int) -> tuple:
        rev = first_revision(self.store, self.exp)
        token, it, made = write(self.store, lambda: _start_item(self.store, self.exp, self.job_id, self.lease_s,
                                                                 item_id, rev), durable=False)
        if token is not None:
            self.claims.hold(item_id, token)
        return token, it, made

    def release_rest(self) -> None:
        """Give back the items claimed here that no worker took (the run stopped first)."""
        with self._lock:
            rest, self._ready = self._ready, {}
        for item_id in rest:
            self.claims.drop(item_id)
        experiments.release_unstarted(self.store, self.job_id,
                                      [(item_id, token, status) for item_id, (token, _, _, status) in rest.items()])


class _Claims:
    """The claims a runner holds, {item id: token}. With a heartbeat (`renew` at each
    renewal), a claim missing from the renewed ones is lost and its item stops at its next
    stop check; without one (a worker process), each stop check reads the claim."""

    def __init__(self, store: Store | None = None):
        self.store = store
        self.held: dict[int, tuple[int, float]] = {}  # item id: (token, when it was taken)
        self.gone: set[int] = set()
        self._lock = threading.Lock()

    def hold(self, item_id: int, token: int) -> None:
        with self._lock:
            self.held[item_id] = (token, time.monotonic())
            self.gone.discard(item_id)

    def drop(self, item_id: int) -> None:
        with self._lock:
            self.held.pop(item_id, None)
            self.gone.discard(item_id)

    def renew(self, store: Store, exp_id: int, job_id: int, lease_s: float) -> None:
        """The heartbeat's part: renew the job's claims and note those taken over (a claim
        taken after the renewal began is not in it, and not lost)."""
        began = time.monotonic()
        kept = experiments.renew_claims(store, exp_id, job_id, lease_s)
        with self._lock:
            self.gone.update(i for i, (t, at) in self.held.items() if at < began and kept.get(i) != t)

    def lost(self, item_id: int) -> bool:
        if self.store is not None:
            held = self.held.get(item_id)
            return held is not None and not experiments.holds(self.store, item_id, held[0])
        return item_id in self.gone


def _process_item(db_path: str, exp_id: int, api_key: str | None, job_id: int, lease_s: float, item_id: int) -> dict:
    """An item in a worker process (ALFWorld): one Store + Engine per process. Stop is the
    job's flag in the database, read between model calls."""
    eng = _PROCESS_ENGINES.get(db_path)
    if eng is None:
        eng = _PROCESS_ENGINES[db_path] = Engine(Store(db_path, create=False), api_key=api_key)
    return _claimed_item(eng, experiments.get(eng.store, exp_id), job_id, lease_s, item_id,
                         lambda: sessions.jobs.stop_requested(eng.store, job_id), 1)


_PROCESS_ENGINES: dict[str, Engine] = {}


def run(
    db_path: str, ref: int | str, *, concurrency: int = 1, stop: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None, api_key: str | None = None,
    max_consecutive_failures: int = 5, mode: str = "threads", handle: jobs.Handle | None = None,
    lease_s: float | None = None, tracer: Callable[[str, Any], None] | None = None,
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
        return jobs.run_here(store, "experiment", lambda h: _run(store, exp, h, opts), lease_s=lease_s, stop=stop,
                             experiment_id=exp.id, target=f"experiment {exp.name}",
                             total=sum(experiments.counts(store, exp.id).values()))
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
    counts = {"done": sum(it.status == "done" for it in items),
              "success": sum(bool(it.success) for it in items if it.status == "done"), "failed": 0}
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
            o.on_progress(Progress(len(items), counts["done"], counts["success"], counts["failed"],
                                   time.monotonic() - t0, start_done))

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
        if not h.stop.is_set() and experiments.holders(store, exp.id, h.id):
            status = "running"  # another runner still works on it
    experiments.set_status(store, exp.id, status, add_wall_s=time.monotonic() - t0)
    if error:
        raise ExperimentError(f"experiment {exp.name!r} {error}; fix the cause, then `experiment resume {exp.id}`")
    return summary(store, exp.id)


def _rounds(store: Store, exp: experiments.Experiment, h: jobs.Handle, o: _Options, report: Callable[[JobResult], None],
            claims: _Claims) -> None:
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
        todo = [i for i in experiments.claimable(store, exp.id) if i not in tried]
        if not todo and _free_dead_claims(store, exp.id, h.id):
            continue
        if not todo and experiments.holders(store, exp.id, h.id):  # another runner's items: done by it, or
            h.stop.wait(min(1.0, h.lease_s / 4))  # taken over here once its lease runs out
            continue
        if not todo:
            break
        starts = None
        if o.mode == "processes":
            work: Callable[[int], Any] = functools.partial(_process_item, store.file, exp.id, o.api_key, h.id,
                                                           h.lease_s)
        else:
            starts = _Starts(store, exp, h.id, h.lease_s, todo, claims)

            def work(item_id: int) -> dict:
                return _claimed_item(workers.engine(), exp, h.id, h.lease_s, item_id, h.should_stop,
                                     o.concurrency, h.watch(), claims, starts)
        try:
            run_batch(todo, work, concurrency=o.concurrency, stop=h.stop, on_result=ran,
                      max_consecutive_failures=o.max_failures, mode=o.mode)
        finally:
            if starts is not None:
                starts.release_rest()


def _free_dead_claims(store: Store, exp_id: int, job_id: int) -> bool:
    """Items held by a runner known to be dead (a killed process of this machine, or a
    job already ended) are freed at once; True when some were."""
    freed = False
    for other in experiments.holders(store, exp_id, job_id):
        try:
            job = sessions.jobs.get(store, other)
        except StoreError:
            job = None
        if job is None or sessions.jobs.owner_gone(job):
            if job is not None and job.active:
                sessions.jobs.finish(store, job.id, "stopped", error="its process ended")
            experiments.release_job(store, exp_id, other)
            freed = True
    return freed


# ---------------------------------------------------------------------------- scoring

def _rate(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def _metrics(env: str, done: list, wins: int, n: int) -> dict[str, float | None]:
    """The kind's extra scores (HotpotQA's EM and F1, FEVER's accuracy, ...) over n tasks."""
    out: dict[str, float | None] = {}
    for m in (fam.metrics if (fam := family_or_none(env)) else ()):
        if m.of is None:
            out[m.name] = _rate(wins, n)
        else:
            out[m.name] = round(sum(float(it.metrics.get(m.of) or 0.0) for it in done) / n, 4) if n else None
    return out


def _usage(store: Store, episode_ids: list[int], model: str) -> tuple[int, float]:
    """(tokens, USD) of the calls that reached the model server (cache hits are free)."""
    p_tok, c_tok = store.calls.billed_tokens(episode_ids)
    saved = (store.settings.get(PRICES_SETTING, {}) or {}).get(model)
    if saved:
        p_price, c_price = float(saved.get("prompt", 0.0)), float(saved.get("completion", 0.0))
    else:
        p_price, c_price = PRICES.get(model, (0.0, 0.0))
    return p_tok + c_tok, round((p_tok * p_price + c_tok * c_price) / 1e6, 6)


def summary(store: Store, ref: int | str, *, with_items: bool = False) -> dict[str, Any]:
    """The paper-style score of an experiment (`experiment run/show --json`). Rates, EM/F1
    and accuracy are over finished items: an unfinished one is not a failure, and a run
    with unfinished items is `partial`."""
    exp = experiments.get(store, ref)
    items = experiments.items(store, exp.id)
    n = len(items)
    done = [it for it in items if it.finished]
    wins = sum(bool(it.success) for it in done)
    by_type: dict[str, dict[str, Any]] = {}
    for t in (*task_types(exp.env), *sorted({it.task.type or "other" for it in items})):
        of_type = [it for it in items if (it.task.type or "other") == t]
        fin = [it for it in of_type if it.finished]
        k = sum(bool(it.success) for it in fin)
        by_type.setdefault(t, {"n": len(of_type), "done": len(fin), "success": k, "rate": _rate(k, len(fin))})
    tokens, cost = _usage(store, [it.episode_id for it in items if it.episode_id], exp.config.model)
    out: dict[str, Any] = {
        "experiment": exp.id, "name": exp.name, "env": exp.env, "method": exp.method, "model": exp.config.model,
        "status": exp.status, "episodes": n, "done": len(done), "partial": len(done) < n,
        "success": wins, "success_rate": _rate(wins, len(done)), "rates_over": "finished items",
        "by_type": by_type, "task_set": task_set_label(exp),
    }
    out.update(_metrics(exp.env, done, wins, len(done)))  # over the finished tasks, as success_rate
    out.update(tokens=tokens, cost=cost, wall_s=round(exp.wall_s, 3))
    if with_items:
        out["items"] = [{"task": it.task.id, "type": it.task.type, "episode": it.episode_id, "version": it.version_id,
                         "done": it.finished, "success": it.success if it.finished else None,
                         "status": it.status, "error": it.error} for it in items]
    return out


def task_set_label(exp: experiments.Experiment) -> str:
    """The task set an experiment ran on, in words a results table can print."""
    tasks, source = exp.params.get("tasks", "builtin"), exp.params.get("source")
    if exp.params.get("sample") == "paper":
        return "the notebooks' subset"
    if tasks == "official":
        return f"official {exp.params.get('split') or 'valid_unseen'}"
    if tasks == "react" or source == "react":
        return "the ReAct release's tasks"
    if tasks == "builtin" and not source:
        fam = family_or_none(exp.env)
        return fam.builtin_label if fam else "built-in sample"
    return f"selected tasks ({source or 'builtin'})"


DIFF_CI_METHOD = METHOD_PAIRED
ERROR_RULES = ("failure", "exclude")


def _pair_counts(xa: list[bool], xb: list[bool]) -> dict[str, Any]:
    """The paired 2x2 table, the rates of A and B over these same tasks, and one procedure:
    the exact McNemar test with the interval that inverts it (`stats.paired_test`), so the
    interval excludes 0 exactly when p_value < 0.05. `mcnemar_p` is the exact McNemar p.
    Unrounded (issue 40): a bound of 0.0004 stays 0.0004. Tango's score interval beside it."""
    n = len(xa)
    both = sum(p and q for p, q in zip(xa, xb))
    a_only = sum(p and not q for p, q in zip(xa, xb))
    b_only = sum(q and not p for p, q in zip(xa, xb))
    neither = n - both - a_only - b_only
    r = paired_test(a_only, b_only, n)
    ci = [None, None] if r.ci95 is None else list(r.ci95)
    return {"n": n, "both": both, "a_only": a_only, "b_only": b_only, "neither": neither,
            "a_rate": _rate(sum(xa), n), "b_rate": _rate(sum(xb), n), "rates_over": "the paired tasks",
            "diff": (a_only - b_only) / n if n else None,
            "mcnemar_p": mcnemar_exact(a_only, b_only) if n else None,
            "p_value": r.p_value, "p_method": r.method, "diff_ci": ci,
            "tango_ci": list(tango_diff(a_only, b_only, n)) if n else [None, None],
            "tango_method": "Tango's score interval (Stat Med 1998;17:891), for comparison: not the reported test"}


def _side(it: experiments.Item) -> str:
    """'done', 'error' (stopped on an error: timeout, refusal) or 'unfinished' (pending, running)."""
    return "done" if it.finished else ("error" if it.status == "error" else "unfinished")


def _exclusions(a_items: dict, b_items: dict, listed: list[str], errors: str) -> tuple[list[str], dict[str, Any]]:
    """The paired tasks and why the others are left out: unfinished apart from errors (an
    error is a failure unless `errors` is 'exclude'), with a warning when the sides' error
    counts differ (errors are not missing at random)."""
    keep = ("done", "error") if errors == "failure" else ("done",)
    why: dict[str, Any] = {f"{r}_in_{s}": 0 for r in ("unfinished", "error") for s in ("a", "b", "both")}
    common = []
    for k in listed:
        sa, sb = _side(a_items[k]), _side(b_items[k])
        if sa in keep and sb in keep:
            common.append(k)
            continue
        reason = "unfinished" if "unfinished" in (sa, sb) else "error"
        where = "both" if sa == sb == reason else ("a" if sa == reason else "b")
        why[f"{reason}_in_{where}"] += 1
    ea = sum(_side(a_items[k]) == "error" for k in listed)
    eb = sum(_side(b_items[k]) == "error" for k in listed)
    why["warning"] = (f"errors differ between the sides (A {ea}, B {eb}): the comparison may be biased"
                      if ea != eb else None)
    return common, why


def compare(store: Store, a_ref: int | str, b_ref: int | str, *, errors: str = "failure",
            include_leaked: bool = False) -> dict[str, Any]:
    """Both summaries and the paired comparison over the tasks both sides ended. A task
    unfinished on either side is `excluded`, with the reason counted; a task that ended on
    an error counts as a failure (`errors="exclude"`: left out, the old rule). A task whose
    own trajectory was an exemplar on either side is `leaked` and left out of the paired test
    unless `include_leaked`."""
    if errors not in ERROR_RULES:
        raise ExperimentError(f"--errors takes failure or exclude (got {errors!r})")
    a, b = experiments.get(store, a_ref), experiments.get(store, b_ref)
    if a.env != b.env:
        raise ExperimentError(f"experiments {a.name!r} ({a.env}) and {b.name!r} ({b.env}) are on different environments")
    a_items = {it.task.key: it for it in experiments.items(store, a.id)}
    b_items = {it.task.key: it for it in experiments.items(store, b.id)}
    leaked_set = set(leaked_keys(store, a)) | set(leaked_keys(store, b))
    leaked = [k for k in a_items if k in b_items and k in leaked_set]
    listed = [k for k in a_items if k in b_items and (include_leaked or k not in leaked_set)]
    common, why = _exclusions(a_items, b_items, listed, errors)

    def paired(keys: list[str]) -> dict[str, Any]:
        return _pair_counts([bool(a_items[k].success) for k in keys], [bool(b_items[k].success) for k in keys])

    types = dict.fromkeys([*task_types(a.env), *sorted({a_items[k].task.type or "other" for k in listed})])
    by_type = {t: paired([k for k in common if (a_items[k].task.type or "other") == t]) for t in types}
    for t, p_holm in zip(by_type, holm([v["p_value"] for v in by_type.values()])):  # issue 40: per-type p, Holm
        by_type[t]["p_holm"] = p_holm
    sa, sb = summary(store, a.id), summary(store, b.id)
    err = {"a": sum(_side(a_items[k]) == "error" for k in listed),
           "b": sum(_side(b_items[k]) == "error" for k in listed), "counted_as": errors}
    return {"a": sa, "b": sb, "common": len(common), "listed_in_both": len(listed),
            "excluded": len(listed) - len(common), "excluded_why": why, "errors": err,
            "partial": bool(sa["partial"] or sb["partial"]), **paired(common),
            "leaked": [a_items[k].task.id for k in leaked], "leaked_included": include_leaked,
            "diff_ci_method": DIFF_CI_METHOD, "by_type": by_type,
            "by_type_adjustment": f"Holm over the {sum(v['p_value'] is not None for v in by_type.values())} task types"}


def failures(store: Store, ref: int | str) -> list[experiments.Item]:
    """Items that finished without success or stopped on an error (to open in the Editor)."""
    exp = experiments.get(store, ref)
    return [it for it in experiments.items(store, exp.id) if it.status == "error" or (it.status == "done" and not it.success)]


# ---------------------------------------------------------------------------- background

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

    def start(self, exp_id: int, *, concurrency: int = 1, api_key: str | None = None,
              session: str | None = None) -> bool:
        """Launch (or resume) the experiment; False when a runner already works on it here."""
        with self._lock:
            if any(jobs.handle(self.store, j.id) for j in sessions.jobs.active(self.store, experiment_id=exp_id)):
                return False
            self._errors.pop(exp_id, None)
            exp = experiments.get(self.store, exp_id)

            def work(h: jobs.Handle) -> dict[str, Any]:
                try:
                    return run(self.db_path, exp_id, concurrency=concurrency, api_key=api_key, handle=h,
                               on_progress=lambda p: self._progress.__setitem__(exp_id, p))
                except Exception as exc:  # shown on the page; the items keep their own errors
                    self._errors[exp_id] = " ".join(str(exc).split()) or type(exc).__name__
                    raise

            jobs.start(self.store, "experiment", work, experiment_id=exp_id, target=f"experiment {exp.name}",
                       session=session, total=sum(experiments.counts(self.store, exp_id).values()))
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
