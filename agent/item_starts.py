"""How a run claims and starts its items: BATCH at a time in the order its workers take them
(`_Starts`: one claim statement and one commit for them), or one alone (`_start_item`), each with its
episode and first version; and the claims the runner holds, renewed by its heartbeat (`_Claims`)."""

from __future__ import annotations

import threading
import time

from agent import exemplars, methods
from sessions import experiments, item_claims
from sessions.store import Store
from sessions.writer import write
from trajectory.records import Episode, Version


def _start_item(
    store: Store, exp: experiments.Experiment, job_id: int, lease_s: float, item_id: int, rev: int | None
) -> tuple[int | None, experiments.Item | None, tuple[Episode, Version] | None]:
    """Claim the item and create its episode, one light transaction (a power cut that loses
    it leaves the item to a resume): (token, item), or (None, None) when another runner
    holds it or it is done. `rev`: `first_revision`, read before the transaction."""
    started = experiments.claim_and_start(
        store,
        item_id,
        job_id,
        lease_s,
        exp.config,
        exp.env_options,
        exp.name.replace("{", "{{").replace("}", "}}") + " #{pos}",
        methods.PHASES[exp.method][0],
        rev,
    )
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

    def __init__(
        self,
        store: Store,
        exp: experiments.Experiment,
        job_id: int,
        lease_s: float,
        order: list[int],
        claims: "_Claims",
    ):
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
        more = [i for i in self.order[start : start + BATCH - 1] if i not in self._claiming]
        self._next = start + len(more)
        return [item_id] + more

    def _claim(self, ids: list[int], busy: threading.Event) -> None:
        store, exp = self.store, self.exp
        name = exp.name.replace("{", "{{").replace("}", "}}") + " #{pos}"
        got: dict | None = None
        try:
            rev = first_revision(store, exp)
            got = write(
                store,
                lambda: experiments.claim_and_start_many(
                    store,
                    ids,
                    self.job_id,
                    self.lease_s,
                    exp.config,
                    exp.env_options,
                    name,
                    methods.PHASES[exp.method][0],
                    rev,
                ),
                durable=False,
            )
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
        token, it, made = write(
            self.store,
            lambda: _start_item(self.store, self.exp, self.job_id, self.lease_s, item_id, rev),
            durable=False,
        )
        if token is not None:
            self.claims.hold(item_id, token)
        return token, it, made

    def release_rest(self) -> None:
        """Give back the items claimed here that no worker took (the run stopped first)."""
        with self._lock:
            rest, self._ready = self._ready, {}
        for item_id in rest:
            self.claims.drop(item_id)
        item_claims.release_unstarted(
            self.store, self.job_id, [(item_id, token, status) for item_id, (token, _, _, status) in rest.items()]
        )


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
        kept = item_claims.renew_claims(store, exp_id, job_id, lease_s)
        with self._lock:
            self.gone.update(i for i, (t, at) in self.held.items() if at < began and kept.get(i) != t)

    def lost(self, item_id: int) -> bool:
        if self.store is not None:
            held = self.held.get(item_id)
            return held is not None and not item_claims.holds(self.store, item_id, held[0])
        return item_id in self.gone
