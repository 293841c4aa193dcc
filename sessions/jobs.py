"""Jobs: every long operation (a step, a run, a resample, a what-if, an experiment) is a
row, whoever runs it - the app or a CLI process. Owns the `jobs` table.

A job is held by a lease: its runner renews `lease_until` with a heartbeat; a job whose
lease ran out (its process died, even by kill -9) reads as "stopped" and its work can be
taken over. Stop is a flag on the row that every runner reads between model calls.
Progress (done/total, one line of detail) is written with the heartbeat, so any face in
any process can follow a job and stop it.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Mapping, cast

from pydantic import Field

from sessions.store import Store, StoreError
from trajectory.records import Record, now

JobKind = Literal["step", "run", "edit-and-resume", "resample", "whatif", "experiment", "suggest"]
JobState = Literal["queued", "running", "stopping", "done", "failed", "stopped"]
KINDS: tuple[str, ...] = ("step", "run", "edit-and-resume", "resample", "whatif", "experiment", "suggest")
ACTIVE = ("queued", "running", "stopping")
LEASE_S = float(os.environ.get("REACT_EDITOR_LEASE_S") or 15.0)
_RETURNING = sqlite3.sqlite_version_info >= (3, 35)  # `update ... returning` (older SQLite: a second select)
RECENT = 20  # finished jobs `react-editor jobs` lists besides the active ones


class Job(Record):
    id: int = Field(description="Row id in this database.")
    kind: str = Field(description="What it does: step, run, edit-and-resume, resample, whatif, experiment or suggest.")
    episode_id: int | None = Field(None, description="The episode it works on, if any.")
    version_id: int | None = Field(None, description="The version it works on, if any.")
    experiment_id: int | None = Field(None, description="The experiment it runs, if any.")
    target: str | None = Field(
        None, description="What it works on, as people read it (`episode 3 v2`, `experiment NAME`)."
    )
    owner: str = Field(description="host:pid of the process that runs it.")
    pid: int | None = Field(None, description="Process id of its runner.")
    session: str | None = Field(None, description="The app session that started it; None for a CLI process.")
    state: str = Field(
        description="queued, running, stopping, done, failed or stopped (a lapsed lease reads as stopped)."
    )
    stop: bool = Field(False, description="True once a stop was asked; runners read it between model calls.")
    done: int = Field(0, description="Units of work finished (steps, rollouts, items).")
    total: int | None = Field(None, description="Units of work planned; None when not known.")
    detail: str | None = Field(None, description="One line of progress.")
    error: str | None = Field(None, description="Why it failed, in one line.")
    result: Any = Field(None, description="What it produced (JSON), once finished.")
    lease_until: float | None = Field(
        None, description="Unix time its runner's lease runs out; renewed by the heartbeat."
    )
    created_at: str = Field(description="When it started (UTC, ISO 8601).")
    updated_at: str = Field(description="When its row last changed (UTC, ISO 8601).")

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def as_json(self) -> dict[str, Any]:
        """The job as the CLI's `--json` prints it (plain values)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "target": self.target,
            "episode": self.episode_id,
            "version": self.version_id,
            "experiment": self.experiment_id,
            "owner": self.owner,
            "pid": self.pid,
            "session": self.session,
            "progress": {"done": self.done, "total": self.total, "detail": self.detail},
            "error": self.error,
            "stop_requested": self.stop,
            "started": self.created_at,
            "updated": self.updated_at,
        }


_COLS = (
    "id, kind, episode_id, version_id, experiment_id, target, owner, pid, session, state, stop, done, total, "
    "detail, error, result, lease_until, created_at, updated_at"
)


def _owner() -> str:  # per call: a forked worker has its own pid
    return f"{socket.gethostname()}:{os.getpid()}"


def _job(r: Any, clock: float) -> Job:
    state = r[9]
    if state in ACTIVE and r[16] is not None and r[16] < clock:
        state = "stopped"  # the runner's lease ran out: its process is gone
    return Job(
        id=r[0],
        kind=r[1],
        episode_id=r[2],
        version_id=r[3],
        experiment_id=r[4],
        target=r[5],
        owner=r[6],
        pid=r[7],
        session=r[8],
        state=state,
        stop=bool(r[10]),
        done=r[11] or 0,
        total=r[12],
        detail=r[13],
        error=r[14],
        result=json.loads(r[15]) if r[15] else None,
        lease_until=r[16],
        created_at=r[17],
        updated_at=r[18],
    )


def create(
    store: Store,
    kind: str,
    *,
    episode_id: int | None = None,
    version_id: int | None = None,
    experiment_id: int | None = None,
    target: str | None = None,
    session: str | None = None,
    total: int | None = None,
    lease_s: float = LEASE_S,
) -> Job:
    """A running job held by this process (the caller then heartbeats it).
    Raises StoreError for an unknown kind."""
    if kind not in KINDS:
        raise StoreError(f"unknown job kind {kind!r}")
    stamp = now()
    with store.transaction():
        jid = store.db.execute(
            "insert into jobs (kind, episode_id, version_id, experiment_id, target, owner, pid, session, state, "
            "total, lease_until, created_at, updated_at) values (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                kind,
                episode_id,
                version_id,
                experiment_id,
                target,
                _owner(),
                os.getpid(),
                session,
                "running",
                total,
                time.time() + lease_s,
                stamp,
                stamp,
            ],
        ).lastrowid
    return get(store, cast(int, jid))  # (an insert's row id)


def get(store: Store, job_id: int) -> Job:
    """The job, its state as of now (a runner whose lease ran out reads "stopped"). Raises StoreError
    for an unknown id."""
    r = store.db.execute(f"select {_COLS} from jobs where id = ?", [job_id]).fetchone()
    if r is None:
        raise StoreError(f"unknown job {job_id}")
    return _job(r, time.time())


def listing(store: Store, *, recent: int = RECENT) -> list[Job]:
    """Active jobs (newest first), then the `recent` newest finished ones."""
    clock = time.time()
    rows = store.db.execute(
        f"select {_COLS} from jobs where state in ('queued', 'running', 'stopping') order by id desc"
    ).fetchall()
    live = [_job(r, clock) for r in rows]
    ended = [j for j in live if not j.active]
    live = [j for j in live if j.active]
    rows = store.db.execute(
        f"select {_COLS} from jobs where state not in ('queued', 'running', 'stopping') order by id desc limit ?",
        [recent],
    ).fetchall()
    return live + sorted(ended + [_job(r, clock) for r in rows], key=lambda j: -j.id)[:recent]


def count(store: Store) -> int:
    """How many jobs the database holds (what `listing` pages through)."""
    n: int = store.db.execute("select count(*) from jobs").fetchone()[0]
    return n


def beat(
    store: Store,
    job_id: int,
    *,
    lease_s: float = LEASE_S,
    done: int | None = None,
    total: int | None = None,
    detail: str | None = None,
    version_id: int | None = None,
) -> bool:
    """Renew the lease and write progress; True when Stop was asked for."""
    sets, params = ["lease_until = ?", "updated_at = ?"], [time.time() + lease_s, now()]
    for col, value in (("done", done), ("total", total), ("detail", detail), ("version_id", version_id)):
        if value is not None:
            sets.append(f"{col} = ?")
            params.append(value)
    sql = f"update jobs set {', '.join(sets)} where id = ? and state in ('running', 'stopping')"
    with store.transaction(durable=False):  # a lease and progress: the next beat writes them again
        if _RETURNING:  # the stop flag in the same statement
            row = store.db.execute(sql + " returning stop", params + [job_id]).fetchone()
            if row is not None:
                return bool(row[0])
        else:
            store.db.execute(sql, params + [job_id])
    return stop_requested(store, job_id)


def stop_requested(store: Store, job_id: int) -> bool:
    """Has someone asked the job to stop? False for an unknown id."""
    r = store.db.execute("select stop from jobs where id = ?", [job_id]).fetchone()
    return bool(r and r[0])


def request_stop(store: Store, job_id: int) -> Job:
    """Raise the job's stop flag; its runner cancels its model calls in flight and ends."""
    job = get(store, job_id)
    if job.active:
        with store.transaction():
            store.db.execute(
                "update jobs set stop = 1, state = case when state = 'running' then 'stopping' "
                "else state end, updated_at = ? where id = ?",
                [now(), job_id],
            )
    return get(store, job_id)


def finish(
    store: Store,
    job_id: int,
    state: str,
    *,
    error: str | None = None,
    result: Any = None,
    done: int | None = None,
    version_id: int | None = None,
) -> None:
    """End the job (`done`, `version_id`: its last progress, which no beat may have written).
    Raises StoreError for a state other than done, failed or stopped."""
    if state not in ("done", "failed", "stopped"):
        raise StoreError(f"a job ends done, failed or stopped, not {state!r}")
    with store.transaction():
        store.db.execute(
            "update jobs set state = ?, error = ?, result = ?, done = coalesce(?, done), "
            "version_id = coalesce(?, version_id), lease_until = null, updated_at = ? where id = ?",
            [state, error, json.dumps(result) if result is not None else None, done, version_id, now(), job_id],
        )


def owner_gone(job: Job) -> bool:
    """True when the job's runner is known to be dead: a process of this machine that no
    longer exists (a runner elsewhere is only known dead when its lease runs out)."""
    if not job.active:
        return True
    host, _, pid = job.owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def active(store: Store, *, episode_id: int | None = None, experiment_id: int | None = None) -> list[Job]:
    """Live jobs touching an episode (or an experiment), newest first."""
    col, value = ("episode_id", episode_id) if episode_id is not None else ("experiment_id", experiment_id)
    clock = time.time()
    rows = store.db.execute(
        f"select {_COLS} from jobs where {col} = ? and state in ('queued', 'running', 'stopping') order by id desc",
        [value],
    ).fetchall()
    return [j for j in (_job(r, clock) for r in rows) if j.active]


def status_word(done: bool, success: bool | None, status: str | None) -> str:
    """The one word every face uses for a version: success, failure, running, stopped or
    open (`status`: its version_states entry, else the version's own status)."""
    if done:
        return "success" if success else "failure"
    return status if status in ("stopped", "running") else "open"


def version_words(store: Store, rows: Iterable[dict[str, Any]], key: str = "version") -> dict[int, str]:
    """status_word of each row (a dict with the version id under `key`, `done`, `success`,
    `status`), with one jobs query: a CLI list says what the app and `jobs` say."""
    rows = [r for r in rows if r.get(key) is not None]
    states = version_states(store, [r[key] for r in rows])
    return {r[key]: status_word(r["done"], r["success"], states.get(r[key], r.get("status"))) for r in rows}


def _ended(job: Job) -> str:
    """When the job ended, as the versions' timestamps read: its lease's end when its runner
    died (the row was never finished), else its last update."""
    if job.lease_until is not None and job.state == "stopped":
        return datetime.fromtimestamp(job.lease_until, timezone.utc).isoformat(timespec="microseconds")
    return job.updated_at


def version_states(store: Store, version_ids: Iterable[int], since: Mapping[int, str] | None = None) -> dict[int, str]:
    """ "running" (a live job works on it) or "stopped" (its last job was stopped, asked to
    stop - its answer will not be used - or its runner died) per version; versions with neither are left out (their own status holds).
    `since` (version id -> its updated_at): a stop older than the version's last change (a
    step taken by hand since) no longer counts."""
    ids = list(version_ids)
    out: dict[int, str] = {}
    clock = time.time()
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        q = ",".join("?" * len(chunk))
        rows = store.db.execute(
            f"select {_COLS} from jobs where version_id in ({q}) and (state in ('queued', 'running', 'stopping') "
            f"or id in (select max(id) from jobs where version_id in ({q}) group by version_id)) order by id",
            chunk + chunk,
        ).fetchall()
        busy: set[int] = set()
        latest: dict[int, Job] = {}
        for job in (_job(r, clock) for r in rows):  # by id: the last one per version is its latest job
            vid = cast(int, job.version_id)  # (the rows were selected by their version ids)
            if job.active and not job.stop:
                busy.add(vid)
            latest[vid] = job
        for vid, job in latest.items():
            if vid in busy:
                out[vid] = "running"
            elif (job.state == "stopped" or (job.active and job.stop)) and not (
                since and since.get(vid, "") > _ended(job)
            ):
                out[vid] = "stopped"
    return out
