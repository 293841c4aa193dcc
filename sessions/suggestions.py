"""Suggested fixes (issue 29): owns `suggestions` and `candidates`.

A suggestion is one critic answer for one version: the exact text sent to the critic (so
`suggest --show-prompt` shows it byte for byte), the template's label and hash, the raw
answer and its candidate edits. Each candidate's verification is written when it
finishes, so a killed `suggest` continues with the candidates not yet verified. A
suggestion made for an experiment is claimed by one job at a time (compare-and-set, like
experiment items): a dead job's claim is taken over once its job no longer runs.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, cast

from pydantic import Field

from sessions.connection import StoreError
from sessions.store import Store
from trajectory.records import Record, now

STATES = ("asking", "asked", "done")  # no critic answer yet | candidates recorded | every candidate verified
CANDIDATE_STATES = ("pending", "verified", "flagged", "skipped", "accepted", "dismissed")


class Candidate(Record):
    id: int = Field(description="Row id in this database.")
    suggestion_id: int = Field(description="The suggestion it belongs to.")
    number: int = Field(description="Its position in the critic's answer, from 1.")
    step: int | None = Field(None, description="The step the edit is made at; None when the critic named none.")
    kind: str | None = Field(None, description="The edit kind the critic proposed.")
    text: str | None = Field(None, description="The edit's new text.")
    rationale: str | None = Field(None, description="Why the critic proposes it.")
    leaks_answer: bool = Field(False, description="True when the text gives away the gold answer.")
    skip: str | None = Field(
        None, description="Why it is not verified (does not apply, leaks the answer); None when it is."
    )
    result: dict[str, Any] | None = Field(None, description="The what-if: arms, effect, interval, p, verdict, cost.")
    state: str = Field("pending", description="pending, verified, flagged, skipped, accepted or dismissed.")
    accepted_version: int | None = Field(None, description="The version made when a person accepted it.")


class Suggestion(Record):
    id: int = Field(description="Row id in this database.")
    episode_id: int = Field(description="The episode criticised.")
    version_id: int = Field(description="The version criticised.")
    experiment_id: int | None = Field(None, description="The experiment it was made for, if any.")
    request_key: str = Field(description="What identifies the request, so asking again finds this suggestion.")
    critic: dict[str, Any] = Field(
        default_factory=dict, description="The critic model: model, base_url, api_style (never a key)."
    )
    prompt_label: str | None = Field(None, description="The prompt template's label.")
    prompt_hash: str | None = Field(None, description="Hash of the prompt template.")
    prompt_text: str | None = Field(None, description="The exact text sent to the critic.")
    response: str | None = Field(None, description="The critic's raw answer.")
    call_id: int | None = Field(None, description="The model call that asked the critic.")
    first_failure_step: int | None = Field(None, description="The step the critic says things first went wrong.")
    verify_n: int = Field(description="Rollouts per arm when a candidate is verified.")
    state: str = Field(
        description="asking (no answer yet), asked (candidates recorded) or done (every candidate verified)."
    )
    claimed_by: int | None = Field(None, description="The job that holds it (experiments: one job at a time).")
    lease_until: float | None = Field(None, description="Unix time the claim runs out.")
    created_at: str = Field(description="When it was made (UTC, ISO 8601).")
    candidates: list[Candidate] = Field(default_factory=list, description="The candidate edits, in the critic's order.")


_S_COLS = (
    "id, episode_id, version_id, experiment_id, request_key, critic, prompt_label, prompt_hash, prompt_text, "
    "response, call_id, first_failure_step, verify_n, state, claimed_by, lease_until, created_at"
)
_C_COLS = "id, suggestion_id, number, step, kind, text, rationale, leaks_answer, skip, result, state, accepted_version"


def _candidate(r: Any) -> Candidate:
    keys = [c.strip() for c in _C_COLS.split(",")]
    d = dict(zip(keys, r))
    d["leaks_answer"] = bool(d["leaks_answer"])
    d["result"] = json.loads(d["result"]) if d["result"] else None
    return Candidate(**d)


def _suggestion(store: Store, r: Any) -> Suggestion:
    keys = [c.strip() for c in _S_COLS.split(",")]
    d = dict(zip(keys, r))
    d["critic"] = json.loads(d["critic"] or "{}")
    rows = store.db.execute(f"select {_C_COLS} from candidates where suggestion_id = ? order by number", [d["id"]])
    return Suggestion(**d, candidates=[_candidate(c) for c in rows])


def create(
    store: Store,
    *,
    episode_id: int,
    version_id: int,
    request_key: str,
    critic: dict[str, Any],
    verify_n: int,
    experiment_id: int | None = None,
    first_failure_step: int | None = None,
) -> Suggestion:
    """A suggestion waiting for its critic answer."""
    stamp = now()
    with store.transaction(durable=False):
        sid = store.db.execute(
            "insert into suggestions (episode_id, version_id, experiment_id, request_key, critic, first_failure_step, "
            "verify_n, state, created_at, updated_at) values (?,?,?,?,?,?,?,?,?,?)",
            [
                episode_id,
                version_id,
                experiment_id,
                request_key,
                json.dumps(critic, sort_keys=True),
                first_failure_step,
                verify_n,
                "asking",
                stamp,
                stamp,
            ],
        ).lastrowid
    return get(store, cast(int, sid))  # (an insert's row id)


def get(store: Store, suggestion_id: int) -> Suggestion:
    """The suggestion with its candidates. Raises StoreError for an unknown id."""
    r = store.db.execute(f"select {_S_COLS} from suggestions where id = ?", [suggestion_id]).fetchone()
    if r is None:
        raise StoreError(f"no suggestion {suggestion_id}")
    return _suggestion(store, r)


def find(store: Store, version_id: int, request_key: str, experiment_id: int | None = None) -> Suggestion | None:
    """The latest suggestion made for the same request (to continue it), or None."""
    r = store.db.execute(
        f"select {_S_COLS} from suggestions where version_id = ? and request_key = ? and "
        "coalesce(experiment_id, 0) = ? order by id desc limit 1",
        [version_id, request_key, experiment_id or 0],
    ).fetchone()
    return None if r is None else _suggestion(store, r)


def latest(store: Store, version_id: int) -> Suggestion | None:
    """The version's latest suggestion with candidates (what `suggest --accept` applies)."""
    r = store.db.execute(
        f"select {_S_COLS} from suggestions where version_id = ? and state != 'asking' order by id desc limit 1",
        [version_id],
    ).fetchone()
    return None if r is None else _suggestion(store, r)


def of_experiment(store: Store, experiment_id: int, request_key: str) -> list[Suggestion]:
    """The experiment's suggestions made for one request (`request_key`), oldest first."""
    rows = store.db.execute(
        f"select {_S_COLS} from suggestions where experiment_id = ? and request_key = ? order by id",
        [experiment_id, request_key],
    ).fetchall()
    return [_suggestion(store, r) for r in rows]


def for_experiment(store: Store, experiment_id: int) -> list[Suggestion]:
    """The latest suggestion of each failure of an experiment (whatever request made it)."""
    rows = store.db.execute(
        f"select {_S_COLS} from suggestions where id in (select max(id) from suggestions where experiment_id = ? "
        "and state != 'asking' group by version_id) order by id",
        [experiment_id],
    ).fetchall()
    return [_suggestion(store, r) for r in rows]


def record_answer(
    store: Store,
    suggestion_id: int,
    *,
    prompt_label: str,
    prompt_hash: str,
    prompt_text: str,
    response: str,
    call_id: int | None,
    candidates: Iterable[dict[str, Any]],
) -> Suggestion:
    """The critic's answer and its candidates, in one transaction (all or nothing)."""
    stamp = now()
    with store.transaction():
        store.db.execute(
            "update suggestions set prompt_label = ?, prompt_hash = ?, prompt_text = ?, response = ?, call_id = ?, "
            "state = 'asked', updated_at = ? where id = ?",
            [prompt_label, prompt_hash, prompt_text, response, call_id, stamp, suggestion_id],
        )
        for c in candidates:
            store.db.execute(
                "insert into candidates (suggestion_id, number, step, kind, text, rationale, leaks_answer, skip, "
                "state, updated_at) values (?,?,?,?,?,?,?,?,?,?)",
                [
                    suggestion_id,
                    c["number"],
                    c.get("step"),
                    c.get("kind"),
                    c.get("text"),
                    c.get("rationale"),
                    int(bool(c.get("leaks_answer"))),
                    c.get("skip"),
                    c.get("state", "pending"),
                    stamp,
                ],
            )
    return get(store, suggestion_id)


def record_result(store: Store, candidate_id: int, result: dict[str, Any], *, state: str = "verified") -> None:
    """A candidate's verification, written once it finished (a rerun skips it)."""
    with store.transaction():
        store.db.execute(
            "update candidates set result = ?, state = ?, updated_at = ? where id = ?",
            [json.dumps(result, sort_keys=True), state, now(), candidate_id],
        )


def set_state(store: Store, candidate_id: int, state: str, *, accepted_version: int | None = None) -> None:
    """Set a candidate's state (and the version accepting it made). Raises StoreError for a state
    not in CANDIDATE_STATES."""
    if state not in CANDIDATE_STATES:
        raise StoreError(f"unknown candidate state {state!r}")
    with store.transaction():
        store.db.execute(
            "update candidates set state = ?, accepted_version = coalesce(?, accepted_version), "
            "updated_at = ? where id = ?",
            [state, accepted_version, now(), candidate_id],
        )


def finish(store: Store, suggestion_id: int) -> None:
    """Mark the suggestion done and drop its claim (a light write)."""
    with store.transaction(durable=False):
        store.db.execute(
            "update suggestions set state = 'done', claimed_by = null, lease_until = null, updated_at = ? where id = ?",
            [now(), suggestion_id],
        )


def claim(store: Store, suggestion_id: int, job_id: int, lease_s: float, *, holder: int | None) -> bool:
    """Take the suggestion for `job_id` (compare-and-set on the holder seen): False when it
    is done or another job took it meanwhile. The caller decides a holder is gone."""
    with store.transaction(durable=False):
        return (
            store.db.execute(
                "update suggestions set claimed_by = ?, lease_until = ? where id = ? and state != 'done' and "
                "coalesce(claimed_by, 0) = ?",
                [job_id, time.time() + lease_s, suggestion_id, holder or 0],
            ).rowcount
            == 1
        )


def release(store: Store, suggestion_id: int, job_id: int) -> None:
    """Drop the claim of job `job_id` on the suggestion (nothing when another holds it; a light write)."""
    with store.transaction(durable=False):
        store.db.execute(
            "update suggestions set claimed_by = null, lease_until = null where id = ? and claimed_by = ?",
            [suggestion_id, job_id],
        )
