"""Rows and records: the plain rows of bulk reads (export, search), tuples with the records'
field names, cheaper than a pydantic record per row; the versions and steps rows read as
records and written from them; a record's cheap copy (`replaced`)."""

from __future__ import annotations

import functools
import json
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from sessions.connection import _ids, from_json, to_json
from trajectory.records import EditInfo, Outcome, Step, ToolCall, Version

# the columns of a versions row and of a steps row, as the readers below take them
VCOLS = (
    "id, episode_id, parent_version, leaf_step_id, draft_thought, draft_edit, edits, name, status, "
    "error, outcome, created_at, updated_at"
)
SCOLS = (
    "id, episode_id, parent_id, idx, thought, action, observation, done, reward, info, source, "
    "edit, call_ids, snapshot, created_at, signals, reasoning, tool_call, message"
)
# the columns of a steps row for `StepJson`: its texts JSON-quoted by SQLite (json_quote writes
# what json.dumps(ensure_ascii=False) writes for a text, and null for NULL: tested for every
# character), thought, action and observation in one text; the JSON columns as stored
SJSON = (
    "id, episode_id, parent_id, idx, json_quote(thought) || ',\"action\":' || json_quote(action) || "
    "',\"observation\":' || json_quote(observation), done, reward, info, source, edit, call_ids, json_quote(created_at)"
)


class StepRow(NamedTuple):
    """A stored step as plain attributes: `trajectory.records.Step`'s fields, for bulk reads."""

    id: int
    episode_id: int
    parent_id: int | None
    index: int  # type: ignore[assignment]  # (Step's field name; NamedTuple's own index() is not used)
    thought: str | None
    action: str | None
    observation: str | None
    done: bool
    reward: float
    info: dict[str, Any]
    source: str
    edit: EditInfo | None
    call_ids: list[int]
    snapshot: dict[str, Any] | None
    created_at: str
    signals: list[str]
    reasoning: str | None
    tool_call: ToolCall | None
    message: dict[str, Any] | None

    def model_copy(self, *, update: dict[str, Any]) -> "StepRow":
        """As `Step.model_copy` (the prompt writers copy a step to drop its observation)."""
        return self._replace(**update)


class StepJson(NamedTuple):
    """A stored step as the jsonl export encodes it (`SJSON`), nothing converted per row in
    Python; `id`, `parent_id` and `source` are what selection reads, as in StepRow."""

    id: int
    episode_id: int
    parent_id: int | None
    index: int  # type: ignore[assignment]  # (as in StepRow)
    texts: str  # '"thought","action":"…","observation":…' (JSON, the keys but the first)
    done: int
    reward: float | None
    info: str | None
    source: str
    edit: str | None
    call_ids: str | None
    created_at: str  # JSON


class UsageRow(NamedTuple):
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_prompt_tokens: int | None


class CallRow(NamedTuple):
    """A recorded model call as plain attributes: `ModelCall`'s fields, for bulk reads."""

    id: int
    episode_id: int | None
    created_at: str
    model: str
    api_style: str
    purpose: str
    params: dict[str, Any]
    prompt_hash: str
    prompt_chars: int
    completion: str | None
    usage: UsageRow
    latency_ms: float | None
    attempts: int | None
    cached: bool
    error: str | None
    cache_key: str | None
    cut_from: int | None


def maker(cls: type) -> Any:
    """`cls._make` as one C call (tuple.__new__ bound to the row class; `_make` is a Python
    frame and a length check): bulk reads make a row per stored row, from values they put
    in the fields' order themselves."""
    return functools.partial(tuple.__new__, cls)


_set = object.__setattr__
_Record = TypeVar("_Record", bound=BaseModel)


def replaced(record: _Record, update: dict[str, Any]) -> _Record:
    """`record.model_copy(update=update)` as pydantic makes it (a shallow copy whose fields
    set grows by the updated ones; records forbid extras and hold no private attributes),
    without its copy-module dispatch: the store copies a step and its version per step."""
    cls = record.__class__
    new = cls.__new__(cls)
    fields = record.__dict__.copy()
    fields.update(update)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", record.__pydantic_fields_set__ | update.keys())
    _set(new, "__pydantic_private__", None)
    return new


def version_row(v: Version, config_id: int | None, exemplar_rev: int | None) -> dict[str, Any]:
    """The versions row of a new version, pinned to its config and exemplar revision."""
    return {
        "episode_id": v.episode_id,
        "parent_version": v.parent_version,
        "leaf_step_id": v.leaf_step_id,
        "draft_thought": v.draft_thought,
        "draft_edit": to_json(v.draft_edit),
        "edits": to_json([e.model_dump(exclude_defaults=True) for e in v.edits]) if v.edits else None,
        "name": v.name,
        "status": v.status,
        "error": v.error,
        "outcome": to_json(v.outcome),
        "created_at": v.created_at,
        "updated_at": v.updated_at,
        "config_id": config_id,
        "exemplar_rev": exemplar_rev,
    }


def version_from_row(r: Any) -> Version:
    """A `VCOLS` row as its record."""
    # A row this store wrote is trusted: construct without re-validating (hot: every step reads one).
    return Version.model_construct(
        id=r[0],
        episode_id=r[1],
        parent_version=r[2],
        leaf_step_id=r[3],
        draft_thought=r[4],
        draft_edit=EditInfo.model_validate_json(r[5]) if r[5] else None,
        edits=[EditInfo.model_validate(e) for e in from_json(r[6], [])],
        name=r[7],
        status=r[8],
        error=r[9],
        outcome=Outcome.model_validate_json(r[10]) if r[10] else Outcome(),
        created_at=r[11],
        updated_at=r[12],
    )


def step_fields(r: Any, infos: dict[str, dict[str, Any]] | None = None) -> tuple[Any, ...]:
    """A steps row (`SCOLS`) as the values of `StepRow`'s fields, in order."""
    (
        sid,
        eid,
        parent,
        idx,
        thought,
        action,
        obs,
        done,
        reward,
        info,
        source,
        edit,
        calls,
        snap,
        at,
        sig,
        reasoning,
        call,
        message,
    ) = r
    if infos is None or info is None:
        info = from_json(info, {})
    else:
        info = infos[info] if info in infos else infos.setdefault(info, json.loads(info))
    return (
        sid,
        eid,
        parent,
        idx,
        thought,
        action,
        obs,
        bool(done),
        reward or 0.0,
        info,
        source,
        EditInfo.model_validate_json(edit) if edit else None,
        _ids(calls),
        json.loads(snap) if snap else None,
        at,
        json.loads(sig) if sig else [],
        reasoning,
        ToolCall.model_validate_json(call) if call else None,
        json.loads(message) if message else None,
    )


def step_from_row(r: Any) -> Step:
    """A `SCOLS` row as its record."""
    return Step(**dict(zip(StepRow._fields, step_fields(r))))


def stored_id(row_id: int | None) -> int:
    """The id of a record read from the store, where it is never None; an unsaved record's
    None raises LookupError (a programming error, not bad input)."""
    if row_id is None:
        raise LookupError("the record has no id: it was never stored")
    return row_id


def insert_versions(db: Any, versions: list[Version], config_id: int, exemplar_rev: int | None) -> None:
    """Insert new versions of one config and exemplar revision in one statement (`Episodes.create_many`'s
    first versions): their rows differ only in id, episode and times."""
    first = version_row(versions[0], config_id, exemplar_rev)
    values = [
        {**first, "id": v.id, "episode_id": v.episode_id, "created_at": v.created_at, "updated_at": v.updated_at}
        for v in versions
    ]
    cols = ", ".join(f'"{c}"' for c in values[0])
    db.execute(
        f"insert into versions ({cols}) values " + ",".join(["(" + ",".join("?" * len(values[0])) + ")"] * len(values)),
        [x for r in values for x in r.values()],
    )
