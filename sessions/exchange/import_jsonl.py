"""Import of our own `jsonl` export: each line parsed with a size cap and validated against
the versioned pydantic schema plus the cross-record rules of the format (file-relative refs,
contiguous episodes), then, in the caller's transaction, written as episodes, versions,
steps, calls and annotations."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from pydantic import ValidationError

from sessions import annotations as anno
from sessions.exchange.import_report import MAX_DEPTH, TOO_DEEP, ImportFailed, ImportReport, _fail
from sessions.exchange.json_text import lone_surrogate
from sessions.exchange.schema import (
    READABLE_VERSIONS,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    EditRecord,
    StepRecord,
    TrajectoryRecord,
)
from sessions.row_records import stored_id
from sessions.store import Store
from trajectory.records import (
    IMPORT_DIGEST,
    MAX_TEXT,
    UNCONFIRMED_ENDPOINT,
    UNCONFIRMED_REFS,
    EditInfo,
    ModelCall,
    Step,
    Version,
    safe_call_params,
    without_credentials,
)


def _lines(p: Path, cap: int) -> Iterator[tuple[int, bytes]]:
    with open(p, "rb") as f:
        n = 0
        while True:
            line = f.readline(cap + 1)
            if not line:
                return
            n += 1
            if len(line) > cap and not (len(line) == cap + 1 and line.endswith(b"\n")):
                raise _fail(n, f"longer than {cap // 2**20} MB; not a record this tool wrote")
            if line.strip():
                yield n, line


def _free_form(rec: dict[str, Any]) -> Iterator[Any]:
    """The record's untyped values (options, task data, step info, call params, metrics):
    every other field has a fixed shape that validation checks without going deep."""

    def part(o: Any, key: str) -> Any:
        return o.get(key) if isinstance(o, dict) else None

    ep = part(rec, "episode")
    yield part(ep, "env_options")
    yield part(part(ep, "task"), "data")
    yield part(part(part(rec, "version"), "outcome"), "metrics")
    for key, field_ in (("steps", "info"), ("calls", "params")):
        items = part(rec, key)
        for item in items if isinstance(items, list) else ():
            yield part(item, field_)


def _depth(obj: Any) -> int:
    """How deeply `obj` nests (iteratively: a deep file must not exhaust the stack)."""
    deepest, todo = 0, [(obj, 1)]
    while todo:
        o, d = todo.pop()
        deepest = max(deepest, d)
        if isinstance(o, dict):
            todo.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            todo.extend((v, d + 1) for v in o)
    return deepest


def _digest(obj: Any) -> bytes:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).digest()


def _error_text(exc: ValidationError) -> str:
    e = exc.errors()[0]
    loc = ".".join(str(x) for x in e.get("loc", ()))
    msg = e.get("msg", "invalid")
    if e.get("type") == "missing":
        return f"missing field '{loc}'"
    if e.get("type") == "extra_forbidden":
        return f"unknown field '{loc}'"
    return f"{loc}: {msg}" if loc else msg


class _BadNumber(ValueError):
    """NaN, Infinity or a number beyond a float (1e999): Python's json reads them, JSON has
    none; an integer past SQLite's (2**63-1; 5,000 digits would stop `int` itself)."""


def _not_finite(text: str) -> float:
    raise _BadNumber(f"{text[:40]} is not a JSON number (NaN and Infinity are refused)")


def _finite(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else _not_finite(text)


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 18:
        raise _BadNumber(f"the number {text[:20]}... ({len(text):,} digits) is too large")
    return int(text)


def _version_problem(obj: dict[str, Any]) -> str | None:
    """Why a record's format version cannot be read here, or None. Checked before the model
    (whose lax int would take "2" or 2.0 for version 2): every export writes a whole number,
    and a newer one may mean fields this release would misread."""
    if "schema_version" not in obj:
        return "missing field 'schema_version' (every jsonl export writes its format version)"
    sv = obj["schema_version"]
    if type(sv) is not int:
        return f"schema_version is {_json_type(sv)}; a format version is a whole number such as {SCHEMA_VERSION}"
    if sv > SCHEMA_VERSION:
        return f"schema version {sv} is newer than this ReAct Editor understands ({SCHEMA_VERSION})"
    if sv not in READABLE_VERSIONS:
        return f"unknown schema version {sv} (this ReAct Editor reads {READABLE_VERSIONS[0]} to {SCHEMA_VERSION})"
    return None


def _json_type(value: Any) -> str:
    names = {
        bool: "true/false",
        str: "text",
        float: "a decimal number",
        type(None): "null",
        list: "a list",
        dict: "an object",
    }
    return names.get(type(value), type(value).__name__)


def parse_record(n: int, line: bytes) -> TrajectoryRecord:
    try:
        obj = json.loads(line, parse_constant=_not_finite, parse_float=_finite, parse_int=_integer)
    except _BadNumber as exc:
        raise _fail(n, str(exc)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = f"{exc.msg}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise _fail(n, f"bad JSON ({detail})") from None
    except RecursionError:
        raise _fail(n, TOO_DEEP) from None
    if not isinstance(obj, dict):
        raise _fail(n, "a record is a JSON object")
    if why := lone_surrogate(line, obj):  # before anything hashes or stores it
        raise _fail(n, why)
    if max(map(_depth, _free_form(obj)), default=0) > MAX_DEPTH:  # before pydantic/json.dumps give up
        raise _fail(n, TOO_DEEP)
    if "schema" not in obj:
        if "messages" in obj:
            raise _fail(
                n, "a chat-sft record; chat-sft drops provenance and cannot be imported (import the jsonl export)"
            )
        raise _fail(n, "missing field 'schema' (not a react-editor jsonl record)")
    if obj["schema"] != SCHEMA_NAME:
        raise _fail(n, f"unknown schema {str(obj['schema'])[:60]!r} (expected {SCHEMA_NAME!r})")
    why = _version_problem(obj)
    if why:
        raise _fail(n, why)
    try:
        return TrajectoryRecord.model_validate(obj)
    except ValidationError as exc:
        raise _fail(n, _error_text(exc)) from None


@dataclass
class _Ep:
    ref: int
    digest: bytes
    id: int | None = None
    first_version: int | None = None
    steps: dict[int, tuple[int | None, bytes]] = field(default_factory=dict)  # ref -> (parent ref, digest)
    step_ids: dict[int, int] = field(default_factory=dict)
    calls: dict[int, bytes] = field(default_factory=dict)
    call_ids: dict[int, int] = field(default_factory=dict)
    versions: dict[int, int | None] = field(default_factory=dict)  # ref -> db id
    current: int | None = None
    last: int | None = None


def _check_text(n: int | None, where: str, thought: str | None, action: str | None) -> None:
    """Imported thoughts and actions obey the limit people and models do (each is re-sent in
    every later prompt)."""
    for what, text in (("thought", thought), ("action", action)):
        if text is not None and len(text) > MAX_TEXT:
            raise _fail(n, f"{where}: the {what} is {len(text):,} characters; the limit is {MAX_TEXT:,}")


def _check_ref(n: int, ep: _Ep, ref: int | None, what: str) -> None:
    if ref is not None and ref not in ep.steps:
        raise _fail(n, f"{what} refers to step ref {ref}, which is not in an earlier record of this episode")


def _episode_digests(records: list[tuple[int, TrajectoryRecord]]) -> dict[int, str]:
    """episode ref -> a digest of all its records (what a re-import of the same content matches)."""
    parts: dict[int, Any] = {}
    for _, rec in records:
        parts.setdefault(rec.episode.ref, hashlib.sha256()).update(
            json.dumps(rec.model_dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False).encode()
        )
    return {ref: h.hexdigest() for ref, h in parts.items()}


def _jsonl(
    name: str,
    records: list[tuple[int, TrajectoryRecord]],
    store: Store | None,
    report: ImportReport,
    digests: dict[int, str] | None = None,
) -> None:
    """One pass over the parsed records: validates; with a store, also writes (caller's transaction)."""
    ep: _Ep | None = None
    done_refs: set[int] = set()
    for n, rec in records:
        e_dump = rec.episode.model_dump(mode="json")
        if ep is None or rec.episode.ref != ep.ref:
            if ep is not None:
                _finish_episode(store, ep)
                done_refs.add(ep.ref)
            if rec.episode.ref in done_refs:
                raise _fail(n, f"the records of episode ref {rec.episode.ref} are not contiguous")
            ep = _Ep(rec.episode.ref, _digest(e_dump))
            if store is not None:
                task = rec.episode.task
                options = {**_no_url_credentials(n, rec.episode.env_options), UNCONFIRMED_REFS: True}  # wait for an OK
                options.pop(UNCONFIRMED_ENDPOINT, None)
                options[IMPORT_DIGEST] = (digests or {}).get(rec.episode.ref)
                if rec.episode.config.base_url:  # so does the model endpoint the file names
                    options[UNCONFIRMED_ENDPOINT] = rec.episode.config.base_url
                e, v0 = store.episodes.create(
                    task, rec.episode.config, options, rec.episode.name, created_at=rec.episode.created_at
                )
                ep.id, ep.first_version = e.id, v0.id
                report.episodes.append(stored_id(e.id))
        elif _digest(e_dump) != ep.digest:
            raise _fail(n, f"episode ref {ep.ref} differs from its earlier record")
        _record(n, rec, ep, store, report)
    if ep is not None:
        _finish_episode(store, ep)
    if report.versions == 0 and store is None and ep is None:
        raise ImportFailed(f"{name} has no records")


def _no_url_credentials(n: int, options: dict[str, Any]) -> dict[str, Any]:
    """env_options with every URL (a `..._url` option, or text with ://) stripped of
    credentials as a config's base URL is; a URL that cannot be parsed refuses the file."""
    out = dict(options)
    for k, v in options.items():
        if isinstance(v, str) and (k.lower().endswith("url") or "://" in v):
            try:
                out[k] = without_credentials(v)
            except ValueError:
                raise _fail(n, f"env_options.{k[:40]} is not an http(s) URL") from None
    return out


def _split_steps(n: int, rec: TrajectoryRecord, ep: _Ep) -> tuple[list[int], list[StepRecord]]:
    """A record's steps: a known prefix (shared with earlier records, checked unchanged),
    then its new steps (refs, edits and calls checked)."""
    known_prefix: list[int] = []
    new_steps: list[StepRecord] = []
    prev: int | None = None
    record_calls = {c.ref: c for c in rec.calls}
    if len(record_calls) != len(rec.calls):
        raise _fail(n, "a call ref appears twice in one record")
    for i, s in enumerate(rec.steps, 1):
        if s.index != i:
            raise _fail(n, f"step ref {s.ref} has index {s.index} at position {i}")
        d = _digest(s.model_dump(mode="json"))
        if s.ref in ep.steps:
            if new_steps:
                raise _fail(n, f"step ref {s.ref} follows a new step but is from an earlier record")
            parent, dg = ep.steps[s.ref]
            if parent != prev or dg != d:
                raise _fail(n, f"step ref {s.ref} differs from its earlier record")
            known_prefix.append(s.ref)
        else:
            if any(x.ref == s.ref for x in new_steps):
                raise _fail(n, f"step ref {s.ref} appears twice in one record")
            _check_text(n, f"step ref {s.ref}", s.thought, s.action)
            _check_ref(n, ep, s.edit.replaced_step if s.edit else None, f"step ref {s.ref}'s edit")
            cf = s.info.get("carried_from")
            if cf is not None:
                if not isinstance(cf, int):
                    raise _fail(n, f"step ref {s.ref}: info.carried_from must be a step ref")
                _check_ref(n, ep, cf, f"step ref {s.ref}'s carried_from")
            for c in s.calls:
                if c not in record_calls:
                    raise _fail(n, f"step ref {s.ref} uses call ref {c}, which is not in this record's calls")
            new_steps.append(s)
        prev = s.ref
    return known_prefix, new_steps


def _record(n: int, rec: TrajectoryRecord, ep: _Ep, store: Store | None, report: ImportReport) -> None:
    v = rec.version
    if v.ref in ep.versions:
        raise _fail(n, f"version ref {v.ref} appears twice in episode ref {ep.ref}")
    if v.parent is not None and v.parent not in ep.versions:
        raise _fail(n, f"parent version ref {v.parent} is not an earlier record of episode ref {ep.ref}")
    if v.current and ep.current is not None:
        raise _fail(n, f"episode ref {ep.ref} has two current versions")
    known_prefix, new_steps = _split_steps(n, rec, ep)
    for e in list(v.edits) + ([v.draft_edit] if v.draft_edit else []):
        _check_ref(n, ep, e.replaced_step, "the version's edits")
    for c in rec.calls:
        dg = _digest(c.model_dump(mode="json"))
        if c.ref in ep.calls and ep.calls[c.ref] != dg:
            raise _fail(n, f"call ref {c.ref} differs from its earlier record")
    if store is not None:
        vid = _write_version(store, rec, ep, known_prefix, new_steps)
    else:
        vid = None
    # remember what this record defined
    prev = None
    for s in rec.steps:
        if s.ref not in ep.steps:
            ep.steps[s.ref] = (prev, _digest(s.model_dump(mode="json")))
        prev = s.ref
    for c in rec.calls:
        ep.calls.setdefault(c.ref, _digest(c.model_dump(mode="json")))
    ep.versions[v.ref] = vid
    if v.current:
        ep.current = vid if vid is not None else -1
    ep.last = vid
    report.versions += 1
    report.steps += len(new_steps)


def _edit(e: EditRecord | None, ep: _Ep) -> EditInfo | None:
    if e is None:
        return None
    return EditInfo(
        kind=e.kind,
        index=e.index,
        replaced_step=ep.step_ids.get(e.replaced_step) if e.replaced_step else None,
        old_thought=e.old_thought,
        old_action=e.old_action,
        origin=e.origin,
    )


def _write_version(store: Store, rec: TrajectoryRecord, ep: _Ep, known: list[int], new: list[StepRecord]) -> int:
    at = ep.step_ids[known[-1]] if known else None
    if ep.first_version is not None:
        vid = ep.first_version
        ep.first_version = None
        if known:  # pragma: no cover - the first record of an episode has no earlier steps
            raise ImportFailed("internal: first record with shared steps")
    else:
        vid = stored_id(
            store.versions.create(Version(episode_id=stored_id(ep.id), leaf_step_id=at), make_current=False).id
        )
    new_calls: list[ModelCall] = []
    placeholder: dict[int, int] = {}
    record_calls = {c.ref: c for c in rec.calls}
    steps: list[Step] = []
    for s in new:
        ids: list[int] = []
        for cref in s.calls:
            if cref in ep.call_ids:
                ids.append(ep.call_ids[cref])
                continue
            if cref not in placeholder:
                new_calls.append(_model_call(record_calls[cref]))
                placeholder[cref] = -len(new_calls)
            ids.append(placeholder[cref])
        steps.append(_step(s, ep, ids))
    if steps:
        rows, _ = store.versions.append(vid, steps, new_calls)
        for s, row in zip(new, rows):
            ep.step_ids[s.ref] = stored_id(row.id)
            for cref, cid in zip(s.calls, row.call_ids):
                ep.call_ids.setdefault(cref, cid)
            for a in s.annotations:
                anno.insert_step_annotation(
                    store,
                    anno.StepAnnotation(
                        step_id=stored_id(row.id),
                        annotator=a.annotator,
                        created_at=a.created_at,
                        tags=a.tags,
                        note=a.note,
                    ),
                )
    _finish_version(store, vid, rec, ep)
    return vid


def _model_call(c: Any) -> ModelCall:
    """A file's call record (a `CallRecord`) as the ModelCall to store."""
    return ModelCall(
        created_at=c.created_at,
        model=c.model,
        api_style=c.api_style,
        params=safe_call_params(c.params),
        purpose=c.purpose,
        prompt_hash=c.prompt_hash,
        prompt_chars=c.prompt_chars,
        completion=c.completion,
        usage=c.usage,
        latency_ms=c.latency_ms,
        attempts=c.attempts,
        cached=c.cached,
        error=c.error,
        cut_from=c.cut_from,
    )


def _step(s: StepRecord, ep: _Ep, call_ids: list[int]) -> Step:
    """A file's step record as the Step to store (its refs as this database's ids)."""
    info = dict(s.info)
    if info.get("carried_from") is not None:
        info["carried_from"] = ep.step_ids[info["carried_from"]]
    return Step(
        index=s.index,
        thought=s.thought,
        action=s.action,
        observation=s.observation,
        done=s.done,
        reward=s.reward,
        info=info,
        source=s.source,
        edit=_edit(s.edit, ep),
        call_ids=call_ids,
        created_at=s.created_at,
        reasoning=s.reasoning,
        tool_call=s.tool_call,
        message=s.message,
    )


def _finish_version(store: Store, vid: int, rec: TrajectoryRecord, ep: _Ep) -> None:
    """The version's own fields and its label history, as the file gives them."""
    v = rec.version
    store.versions.update(
        vid,
        name=v.name,
        status=v.status,
        error=v.error,
        outcome=v.outcome,
        draft_thought=v.draft_thought,
        draft_edit=_edit(v.draft_edit, ep),
        parent_version=ep.versions.get(v.parent) if v.parent else None,
        edits=[_edit(e, ep) for e in v.edits],
        created_at=v.created_at,
        updated_at=v.updated_at,
    )
    for a in v.annotations:
        anno.insert_version_annotation(
            store,
            anno.VersionAnnotation(
                version_id=vid,
                annotator=a.annotator,
                created_at=a.created_at,
                verdict=a.verdict,
                failure_modes=a.failure_modes,
                notes=a.notes,
                exemplar_ready=a.exemplar_ready,
            ),
        )


def _finish_episode(store: Store | None, ep: _Ep) -> None:
    if store is None:
        return
    target = ep.current if ep.current is not None else ep.last
    if target is not None:
        store.versions.set_current(stored_id(ep.id), target)
