"""Labels a person puts on versions and steps. Append-only: every change is a new row with
its annotator and time; the latest row is the current state and the older ones are the
history (annotations are versioned like everything else, never overwritten).

A version carries a verdict, failure modes (the paper's Table 2 plus loops and invalid
actions), notes and an "exemplar-ready" flag; a step carries tags and a note. The
automatic outcome (won / exact match / label) is the version's own `outcome`.
"""

from __future__ import annotations

import getpass
import json
import os
from typing import Any, Iterable, Literal

from pydantic import Field

from sessions.store import Store, StoreError
from trajectory.records import Record, now

FAILURE_MODES: tuple[str, ...] = (
    "reasoning_error",
    "search_result_error",
    "hallucination",
    "label_ambiguity",
    "repetitive_loop",
    "invalid_action",
)
VERDICTS: tuple[str, ...] = ("success", "failure", "unsure")
# Suggested step tags (any short tag is allowed). Negative ones mask a step in chat-sft.
STEP_TAGS: tuple[str, ...] = (
    "approved",
    "rejected",
    "hallucinated",
    "good_subgoal",
    "key_observation",
    "reasoning_error",
    "invalid_action",
    "repetitive",
)
NEGATIVE_TAGS = frozenset({"rejected", "hallucinated", "reasoning_error", "invalid_action", "repetitive", "bad"})
POSITIVE_TAGS = frozenset({"approved", "good", "good_subgoal"})
MAX_NOTE = 20_000
MAX_TAG = 64

Verdict = Literal["success", "failure", "unsure"]
_KEEP: Any = object()  # "leave this field as it is"


class AnnotationError(StoreError, ValueError):
    """Bad annotation input (one line)."""


class VersionAnnotation(Record):
    id: int | None = Field(None, description="Row id in this database; None until stored.")
    version_id: int = Field(description="The version labelled.")
    annotator: str = Field(description="Who labelled it (--by, REACT_EDITOR_USER or the OS user).")
    created_at: str = Field(
        default_factory=now, description="When (UTC, ISO 8601); the latest row is the current state."
    )
    verdict: Verdict | None = Field(None, description="A person's judgement: success, failure or unsure.")
    failure_modes: list[str] = Field(
        default_factory=list, description="Failure modes seen (reasoning_error, search_result_error, ...)."
    )
    notes: str | None = Field(None, description="Free text.")
    exemplar_ready: bool = Field(False, description="True when a person marks it fit to serve as an exemplar.")


class StepAnnotation(Record):
    id: int | None = Field(None, description="Row id in this database; None until stored.")
    step_id: int = Field(description="The step labelled.")
    annotator: str = Field(description="Who labelled it (--by, REACT_EDITOR_USER or the OS user).")
    created_at: str = Field(
        default_factory=now, description="When (UTC, ISO 8601); the latest row is the current state."
    )
    tags: list[str] = Field(
        default_factory=list,
        description="Short tags (approved, rejected, ...); negative ones give the step weight 0 in chat-sft.",
    )
    note: str | None = Field(None, description="Free text.")


def current_user(by: str | None = None) -> str:
    """The annotator: `--by`, else $REACT_EDITOR_USER, else the OS user."""
    for name in (by, os.environ.get("REACT_EDITOR_USER")):
        if name and name.strip():
            return _one_line(name.strip(), "annotator", 200)
    try:
        return getpass.getuser() or "unknown"
    except Exception:  # no user database entry (containers)
        return "unknown"


def normalize_tag(tag: str) -> str:
    """A tag as stored: lower case, words joined by `_`. Raises AnnotationError when it is empty,
    not one line or longer than MAX_TAG."""
    t = "_".join(str(tag).strip().lower().replace("-", " ").split())
    if not t:
        raise AnnotationError("a tag is empty")
    return _one_line(t, "tag", MAX_TAG)


def _one_line(text: str, what: str, limit: int) -> str:
    if "\n" in text or "\r" in text:
        raise AnnotationError(f"the {what} must be one line")
    if len(text) > limit:
        raise AnnotationError(f"the {what} is too long ({len(text)} characters; limit {limit})")
    return text


def _note(text: str | None) -> str | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise AnnotationError("a note must be text")
    if len(text) > MAX_NOTE:
        raise AnnotationError(f"the note is too long ({len(text):,} characters; limit {MAX_NOTE:,})")
    return text.strip() or None


def _modes(modes: Iterable[str]) -> list[str]:
    out: list[str] = []
    for m in modes:
        key = "_".join(str(m).strip().lower().replace("-", " ").split())
        if key not in FAILURE_MODES:
            raise AnnotationError(f"unknown failure mode {m!r} (one of: {', '.join(FAILURE_MODES)})")
        if key not in out:
            out.append(key)
    return out


# ---------------------------------------------------------------------- versions


def _va_from_row(r: Any) -> VersionAnnotation:
    return VersionAnnotation(
        id=r[0],
        version_id=r[1],
        annotator=r[2],
        created_at=r[3],
        verdict=r[4],
        failure_modes=json.loads(r[5]) if r[5] else [],
        notes=r[6],
        exemplar_ready=bool(r[7]),
    )


_VA_COLS = "id, version_id, annotator, created_at, verdict, failure_modes, notes, exemplar_ready"
_SA_COLS = "id, step_id, annotator, created_at, tags, note"


def version_annotation(store: Store, version_id: int) -> VersionAnnotation | None:
    """The current (latest) annotation of a version, or None."""
    r = store.db.execute(
        f"select {_VA_COLS} from version_annotations where version_id = ? order by id desc limit 1", [version_id]
    ).fetchone()
    return _va_from_row(r) if r else None


def version_history(store: Store, version_id: int) -> list[VersionAnnotation]:
    """Every annotation of the version, oldest first (the last is the current one); [] when none."""
    rows = store.db.execute(
        f"select {_VA_COLS} from version_annotations where version_id = ? order by id", [version_id]
    )
    return [_va_from_row(r) for r in rows]


def version_histories(store: Store, version_ids: Iterable[int]) -> dict[int, list[VersionAnnotation]]:
    """Histories of many versions in one query (export reads a whole episode at once)."""
    ids = list(version_ids)
    out: dict[int, list[VersionAnnotation]] = {}
    for chunk in _chunks(ids):
        rows = store.db.execute(
            f"select {_VA_COLS} from version_annotations where version_id in ({','.join('?' * len(chunk))}) order by id",
            chunk,
        )
        for r in rows:
            out.setdefault(r[1], []).append(_va_from_row(r))
    return out


def annotate_version(
    store: Store,
    version_id: int,
    *,
    by: str | None = None,
    verdict: Any = _KEEP,
    failure_modes: Any = _KEEP,
    add_failure_modes: Iterable[str] = (),
    remove_failure_modes: Iterable[str] = (),
    notes: Any = _KEEP,
    exemplar_ready: Any = _KEEP,
) -> VersionAnnotation:
    """Record a new annotation state for a version: fields not given keep their latest
    value. Nothing changes (no row) when the result equals the latest state.
    Raises AnnotationError for an unknown verdict, a value that is too long, or a first
    annotation with nothing in it."""
    store.versions.get(version_id)  # unknown version -> StoreError
    latest = version_annotation(store, version_id)
    base = latest or VersionAnnotation(version_id=version_id, annotator="")
    if verdict is not _KEEP and verdict is not None and verdict not in VERDICTS:
        raise AnnotationError(f"unknown verdict {verdict!r} (one of: {', '.join(VERDICTS)})")
    modes = list(base.failure_modes) if failure_modes is _KEEP else _modes(failure_modes or [])
    for m in _modes(add_failure_modes):
        if m not in modes:
            modes.append(m)
    drop = set(_modes(remove_failure_modes))
    modes = [m for m in modes if m not in drop]
    new = VersionAnnotation(
        version_id=version_id,
        annotator=current_user(by),
        verdict=base.verdict if verdict is _KEEP else (verdict or None),
        failure_modes=modes,
        notes=base.notes if notes is _KEEP else _note(notes),
        exemplar_ready=base.exemplar_ready if exemplar_ready is _KEEP else bool(exemplar_ready),
    )
    if latest is not None and _same_va(latest, new):
        return latest
    if latest is None and _same_va(VersionAnnotation(version_id=version_id, annotator=""), new):
        raise AnnotationError("nothing to annotate: give a verdict, failure modes, notes or the exemplar-ready flag")
    return insert_version_annotation(store, new)


def _same_va(a: VersionAnnotation, b: VersionAnnotation) -> bool:
    keys = ("verdict", "failure_modes", "notes", "exemplar_ready")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def insert_version_annotation(store: Store, a: VersionAnnotation) -> VersionAnnotation:
    """Append one row as given (import keeps the original annotator and time)."""
    with store.transaction():
        rid = store.db.execute(
            "insert into version_annotations (version_id, annotator, created_at, verdict, failure_modes, notes, "
            "exemplar_ready) values (?,?,?,?,?,?,?)",
            [
                a.version_id,
                a.annotator,
                a.created_at,
                a.verdict,
                json.dumps(a.failure_modes) if a.failure_modes else None,
                a.notes,
                int(a.exemplar_ready),
            ],
        ).lastrowid
    return a.model_copy(update={"id": rid})


# ---------------------------------------------------------------------- steps


def _sa_from_row(r: Any) -> StepAnnotation:
    return StepAnnotation(
        id=r[0], step_id=r[1], annotator=r[2], created_at=r[3], tags=json.loads(r[4]) if r[4] else [], note=r[5]
    )


def step_annotation(store: Store, step_id: int) -> StepAnnotation | None:
    """The current (latest) annotation of a step, or None."""
    r = store.db.execute(
        f"select {_SA_COLS} from step_annotations where step_id = ? order by id desc limit 1", [step_id]
    ).fetchone()
    return _sa_from_row(r) if r else None


def step_annotations(store: Store, step_ids: Iterable[int]) -> dict[int, StepAnnotation]:
    """The latest tag/note state of each of these steps that has one (one query)."""
    ids = [int(i) for i in step_ids]
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = store.db.execute(
        f"select {_SA_COLS} from step_annotations where id in (select max(id) from step_annotations "
        f"where step_id in ({marks}) group by step_id)",
        ids,
    ).fetchall()
    return {a.step_id: a for a in (_sa_from_row(r) for r in rows)}


def step_history(store: Store, step_id: int) -> list[StepAnnotation]:
    """Every annotation of the step, oldest first (the last is the current one); [] when none."""
    rows = store.db.execute(f"select {_SA_COLS} from step_annotations where step_id = ? order by id", [step_id])
    return [_sa_from_row(r) for r in rows]


def episode_step_histories(store: Store, episode_id: int) -> dict[int, list[StepAnnotation]]:
    """All step annotations of an episode, by step id (one query)."""
    return step_histories(store, [episode_id])


def step_histories(store: Store, episode_ids: Iterable[int]) -> dict[int, list[StepAnnotation]]:
    """All step annotations of many episodes, by step id (one query per 500 episodes)."""
    out: dict[int, list[StepAnnotation]] = {}
    for chunk in _chunks(list(episode_ids)):
        rows = store.db.execute(
            f"select {', '.join('a.' + c.strip() for c in _SA_COLS.split(','))} from step_annotations a "
            f"join steps s on s.id = a.step_id where s.episode_id in ({','.join('?' * len(chunk))}) order by a.id",
            chunk,
        )
        for r in rows:
            out.setdefault(r[1], []).append(_sa_from_row(r))
    return out


def tag_step(
    store: Store,
    step_id: int,
    *,
    by: str | None = None,
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
    tags: Iterable[str] | None = None,
    note: Any = _KEEP,
) -> StepAnnotation:
    """A new tag/note state for a step (`tags` replaces the set; `add`/`remove` edit it).
    Raises AnnotationError for a bad tag or note, or a first one with neither."""
    store.versions.step(step_id)  # unknown step -> StoreError
    latest = step_annotation(store, step_id)
    current = list(latest.tags) if latest else []
    if tags is not None:
        current = []
        for t in tags:
            t = normalize_tag(t)
            if t not in current:
                current.append(t)
    for t in add:
        t = normalize_tag(t)
        if t not in current:
            current.append(t)
    drop = {normalize_tag(t) for t in remove}
    current = [t for t in current if t not in drop]
    new = StepAnnotation(
        step_id=step_id,
        annotator=current_user(by),
        tags=current,
        note=(latest.note if latest else None) if note is _KEEP else _note(note),
    )
    if latest is not None and latest.tags == new.tags and latest.note == new.note:
        return latest
    if latest is None and not new.tags and new.note is None:
        raise AnnotationError("nothing to record: give a tag or a note")
    return insert_step_annotation(store, new)


def insert_step_annotation(store: Store, a: StepAnnotation) -> StepAnnotation:
    """Store `a` as the step's newest annotation (history is kept); `a` with its new id."""
    with store.transaction():
        rid = store.db.execute(
            "insert into step_annotations (step_id, annotator, created_at, tags, note) values (?,?,?,?,?)",
            [a.step_id, a.annotator, a.created_at, json.dumps(a.tags) if a.tags else None, a.note],
        ).lastrowid
    return a.model_copy(update={"id": rid})


# ---------------------------------------------------------------------- queries for filters


def is_annotated(store: Store, version_id: int) -> bool:
    """Whether a person has labelled the version (then it must never change again)."""
    return (
        store.db.execute("select 1 from version_annotations where version_id = ? limit 1", [version_id]).fetchone()
        is not None
    )


def exemplar_ready_versions(store: Store) -> set[int]:
    """Versions whose latest annotation has the exemplar-ready flag."""
    rows = store.db.execute(
        "select a.version_id, a.exemplar_ready from version_annotations a join "
        "(select version_id, max(id) m from version_annotations group by version_id) l on l.m = a.id"
    )
    return {r[0] for r in rows if r[1]}


def current_note_targets(store: Store, kind: str, row_ids: Iterable[int]) -> dict[int, int]:
    """Annotation rows (kind "version" or "step") that are their target's current state,
    mapped to the target's id: a note replaced later is history, not a search hit."""
    table, target = ("version_annotations", "version_id") if kind == "version" else ("step_annotations", "step_id")
    out: dict[int, int] = {}
    for chunk in _chunks(list(row_ids)):
        rows = store.db.execute(
            f"select a.id, a.{target} from {table} a where a.id in ({','.join('?' * len(chunk))}) and a.id = "
            f"(select max(b.id) from {table} b where b.{target} = a.{target})",
            chunk,
        )
        out.update(dict(rows.fetchall()))
    return out


def _chunks(ids: list[int], n: int = 500) -> Iterable[list[int]]:
    for i in range(0, len(ids), n):
        yield ids[i : i + n]
