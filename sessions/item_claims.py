"""Experiment item claims: which runner holds an item (a lease it renews, a fencing token that grows
with every claim), taken compare-and-set, renewed by the heartbeat, given back, and checked as a fence by
every write of the claimed item (`ClaimLost` when another runner took it over). The rows are
`experiment_items`, which `sessions.experiments` owns with this module."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from sessions.connection import Fence, FenceLost
from sessions.store import Store


class ClaimLost(FenceLost):
    """The writer no longer holds the item's claim: its lease ran out and another runner
    took the item (or finished it). Nothing was written."""


_RETURNING = sqlite3.sqlite_version_info >= (3, 35)  # `update ... returning` (older SQLite: a second select)


def release_unstarted(store: Store, job_id: int, held: list[tuple[int, int, str | None]]) -> None:
    """Give back items claimed (and started) in a batch that this runner will not run
    (it stops first): [(item id, token, the status to put back or None to keep it)]. An
    item whose episode the batch made reads as before it (pending); its episode stays
    linked, and whoever runs it continues it in place."""
    if not held:
        return
    with store.transaction(durable=False):
        store.db.conn.executemany(
            "update experiment_items set claimed_by = null, lease_until = null, status = coalesce(?, status) "
            "where id = ? and claimed_by = ? and claim_token = ?",
            [(status, item_id, job_id, token) for item_id, token, status in held],
        )


def claimable(store: Store, experiment_id: int) -> list[int]:
    """Unfinished items no live runner holds (never claimed, released, or a lease run out)."""
    rows = store.db.execute(
        "select id from experiment_items where experiment_id = ? and status != 'done' and "
        "(claimed_by is null or lease_until < ?) order by pos",
        [experiment_id, time.time()],
    )
    return [r[0] for r in rows]


def holders(store: Store, experiment_id: int, job_id: int) -> set[int]:
    """The other jobs holding unfinished items of the experiment under a live lease."""
    rows = store.db.execute(
        "select distinct claimed_by from experiment_items where experiment_id = ? and status != 'done' and "
        "claimed_by is not null and claimed_by != ? and lease_until >= ?",
        [experiment_id, job_id, time.time()],
    )
    return {r[0] for r in rows}


def release_job(store: Store, experiment_id: int, job_id: int) -> None:
    """Free every item a job holds (its runner is known to be gone)."""
    with store.transaction(durable=False):
        store.db.execute(
            "update experiment_items set claimed_by = null, lease_until = null "
            "where experiment_id = ? and claimed_by = ?",
            [experiment_id, job_id],
        )


def claim(store: Store, item_id: int, job_id: int, lease_s: float) -> int | None:
    """Take the item for job `job_id` (compare-and-set): its fencing token (a number that
    grows with every claim of the item), or None when it is done or another runner holds it
    under a live lease. A dead runner's lease runs out and the item is free. Every write of
    the claimed item passes the token: a runner whose claim was taken over writes nothing."""
    sql, params = _CLAIM_SQL, _claim_params(item_id, job_id, lease_s)
    with store.transaction(durable=False):
        if _RETURNING:  # one statement
            row = store.db.execute(sql + " returning claim_token", params).fetchone()
            return None if row is None else int(row[0])
        if store.db.execute(sql, params).rowcount != 1:
            return None
        return int(store.db.execute("select claim_token from experiment_items where id = ?", [item_id]).fetchone()[0])


_CLAIM_SQL = (
    "update experiment_items set claimed_by = ?, lease_until = ?, claim_token = claim_token + 1 "
    "where id = ? and status != 'done' and (claimed_by is null or claimed_by = ? or lease_until < ?)"
)


def _claim_params(item_id: int, job_id: int, lease_s: float) -> list[Any]:
    clock = time.time()
    return [job_id, clock + lease_s, item_id, job_id, clock]


def holds(store: Store, item_id: int, token: int) -> bool:
    """Whether the claim that got `token` is still the item's (no runner took it over)."""
    return (
        store.db.execute("select 1 from experiment_items where id = ? and claim_token = ?", [item_id, token]).fetchone()
        is not None
    )


def _lost(item_id: int) -> ClaimLost:
    return ClaimLost(
        f"experiment item {item_id}: this runner's claim was taken over (its lease ran out); "
        "it stops the item and writes nothing"
    )


def _fenced(store: Store, item_id: int, token: int | None) -> None:
    """Inside the write's transaction: refuse it when the claim with `token` was taken over."""
    if token is not None and not holds(store, item_id, token):
        raise _lost(item_id)


def fence(item_id: int, token: int) -> Fence:
    """The claim with `token` as a fence for the item's other writes (its steps: the engine
    checks it in the statement that records each, `Versions.append`)."""
    return Fence(
        "exists (select 1 from experiment_items where id = ? and claim_token = ?)",
        [item_id, token],
        lambda: _lost(item_id),
    )


def renew_claims(store: Store, experiment_id: int, job_id: int, lease_s: float) -> dict[int, int]:
    """The heartbeat: every item the job holds stays held (its experiment's items only: the
    (experiment_id, pos) index, not a scan of every experiment's items). Returns {item id:
    token} of the claims renewed: a claim of the job missing there was taken over."""
    params = [time.time() + lease_s, experiment_id, job_id]
    with store.transaction(durable=False):
        if _RETURNING:  # one statement
            rows = store.db.execute(
                "update experiment_items set lease_until = ? where experiment_id = ? and "
                "claimed_by = ? returning id, claim_token",
                params,
            ).fetchall()
        else:
            store.db.execute(
                "update experiment_items set lease_until = ? where experiment_id = ? and claimed_by = ?", params
            )
            rows = store.db.execute(
                "select id, claim_token from experiment_items where experiment_id = ? and claimed_by = ?", params[1:]
            ).fetchall()
    return {int(r[0]): int(r[1]) for r in rows}


def release(store: Store, item_id: int, job_id: int, token: int | None = None) -> None:
    """Give the item back (only the claim that got `token`, when given)."""
    with store.transaction(durable=False):
        store.db.execute(
            "update experiment_items set claimed_by = null, lease_until = null "
            "where id = ? and claimed_by = ? and (? is null or claim_token = ?)",
            [item_id, job_id, token, token],
        )
