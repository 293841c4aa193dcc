"""Export chosen versions (or an exemplar set) to `prompt`, `react-json`, `jsonl` or
`chat-sft`. Line formats stream: one episode is read at a time and each record is written
as soon as it is built, into a temporary file renamed over the target at the end (a failed
export leaves no half file). No API key can appear: AgentConfig has no field for one.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from sessions import annotations as ann
from sessions import exemplar_sets as sets
from sessions.exchange.chat_sft import chat_record, version_ok
from trajectory.prompt_files import PromptFileError, WIKI_DEFAULT_TRAILER, assemble, exemplar_from
from sessions.exchange.schema import SCHEMA_NAME, SCHEMA_VERSION
from sessions.exchange.selection import EpisodeBatch, Filters, Ref, select
from trajectory.records import EditInfo, ModelCall, Step
from sessions.store import Store, StoreError

FORMATS = ("prompt", "react-json", "jsonl", "chat-sft")


class ExportError(StoreError, ValueError):
    pass


@dataclass
class ExportReport:
    format: str
    path: str
    episodes: int = 0
    versions: int = 0
    records: int = 0  # lines (jsonl, chat-sft), keys (react-json), exemplars (prompt)
    steps: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------- jsonl records


class EpisodeEncoder:
    """File-relative refs for one episode. A step's dict is built once (the first record
    that holds it) and reused, so a shared prefix is byte-identical in every record.
    References (edits, carried_from) resolve only to steps of earlier records - what an
    importer has already created when it reads them."""

    def __init__(self, store: Store, batch: EpisodeBatch, ep_ref: int):
        self.store, self.batch, self.ep_ref = store, batch, ep_ref
        ep = batch.episode
        ids = sorted({cid for path in batch.paths.values() for s in path for cid in s.call_ids})
        # by primary key (model_calls has no episode index), in chunks under SQLite's variable limit
        self.calls = {c.id: c for i in range(0, len(ids), 500) for c in store.calls(ids[i : i + 500])}
        self.vann = ann.version_histories(store, [v.id for v in batch.versions])
        self.sann = ann.episode_step_histories(store, ep.id)
        self.step_ref: dict[int, int] = {}
        self.call_ref: dict[int, int] = {}
        self.step_cache: dict[int, dict] = {}
        self.call_cache: dict[int, dict] = {}
        self.version_ref: dict[int, int] = {}
        vids = [v.id for v in batch.versions]
        self.current = ep.current_version if ep.current_version in vids else vids[-1]
        self.episode_dict = {
            "ref": ep_ref,
            "name": ep.name,
            "created_at": ep.created_at,
            "task": ep.task.model_dump(mode="json"),
            "config": ep.config.model_dump(mode="json"),
            "env_options": ep.env_options,
        }

    def _edit(self, e: EditInfo | None, limit: int) -> dict | None:
        if e is None:
            return None
        ref = self.step_ref.get(e.replaced_step) if e.replaced_step is not None else None
        return {
            "kind": e.kind,
            "index": e.index,
            "replaced_step": ref if ref is not None and ref <= limit else None,
            "old_thought": e.old_thought,
            "old_action": e.old_action,
        }

    def _call(self, c: ModelCall) -> dict:
        d = self.call_cache.get(c.id)
        if d is None:
            ref = self.call_ref.setdefault(c.id, len(self.call_ref) + 1)
            d = {
                "ref": ref,
                "created_at": c.created_at,
                "model": c.model,
                "api_style": c.api_style,
                "purpose": c.purpose,
                "params": c.params,
                "prompt_hash": c.prompt_hash,
                "prompt_chars": c.prompt_chars,
                "completion": c.completion,
                "usage": c.usage.model_dump(mode="json"),
                "latency_ms": c.latency_ms,
                "attempts": c.attempts,
                "cached": c.cached,
                "error": c.error,
            }
            self.call_cache[c.id] = d
        return d

    def _step(self, s: Step, limit: int) -> dict:
        d = self.step_cache.get(s.id)
        if d is not None:
            return d
        ref = self.step_ref.setdefault(s.id, len(self.step_ref) + 1)
        info = s.info
        if "carried_from" in info:
            src = self.step_ref.get(info["carried_from"])
            info = {**info, "carried_from": src if src is not None and src <= limit else None}
        call_refs = []
        for cid in s.call_ids:
            c = self.calls.get(cid)
            if c is not None:
                call_refs.append(self._call(c)["ref"])
        d = {
            "ref": ref,
            "index": s.index,
            "thought": s.thought,
            "action": s.action,
            "observation": s.observation,
            "done": s.done,
            "reward": s.reward,
            "info": info,
            "source": s.source,
            "edit": self._edit(s.edit, limit),
            "calls": call_refs,
            "created_at": s.created_at,
            "annotations": [
                {"annotator": a.annotator, "created_at": a.created_at, "tags": a.tags, "note": a.note}
                for a in self.sann.get(s.id, [])
            ],
        }
        self.step_cache[s.id] = d
        return d

    def records(self) -> Iterator[tuple[dict, int]]:
        for n, v in enumerate(self.batch.versions, 1):
            self.version_ref[v.id] = n
            limit = len(self.step_ref)
            path = self.batch.paths[v.id]
            steps = [self._step(s, limit) for s in path]
            seen: set[int] = set()
            calls = []
            for s in path:
                for cid in s.call_ids:
                    if cid in self.calls and cid not in seen:
                        seen.add(cid)
                        calls.append(self.call_cache[cid])
            version = {
                "ref": n,
                "parent": self.version_ref.get(v.parent_version) if v.parent_version else None,
                "current": v.id == self.current,
                "name": v.name,
                "status": v.status,
                "error": v.error,
                "outcome": v.outcome.model_dump(mode="json"),
                "draft_thought": v.draft_thought,
                "draft_edit": self._edit(v.draft_edit, limit),
                "edits": [self._edit(e, limit) for e in v.edits],
                "created_at": v.created_at,
                "updated_at": v.updated_at,
                "annotations": [
                    {"annotator": a.annotator, "created_at": a.created_at, "verdict": a.verdict,
                     "failure_modes": a.failure_modes, "notes": a.notes, "exemplar_ready": a.exemplar_ready}
                    for a in self.vann.get(v.id, [])
                ],
            }
            yield {
                "schema": SCHEMA_NAME,
                "schema_version": SCHEMA_VERSION,
                "episode": self.episode_dict,
                "version": version,
                "steps": steps,
                "calls": calls,
            }, len(path)


# ---------------------------------------------------------------------- writers


class _Sink:
    """A path (written to a temp file, renamed at the end), '-' or an open text stream."""

    def __init__(self, out: str | os.PathLike | IO[str]):
        self.tmp: str | None = None
        self.path = "-"
        if isinstance(out, (str, os.PathLike)) and str(out) != "-":
            target = Path(out)
            if target.is_dir():
                raise ExportError(f"{target} is a directory; give a file path")
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = tempfile.mkstemp(prefix=".export-", dir=str(target.parent))
            self.f: IO[str] = io.open(fd, "w", encoding="utf-8", newline="")
            self.path = str(target)
        elif isinstance(out, (str, os.PathLike)):
            import sys

            self.f = sys.stdout
        else:
            self.f = out  # type: ignore[assignment]
        self.bytes = 0

    def write(self, text: str) -> None:
        self.f.write(text)
        self.bytes += len(text.encode("utf-8"))

    def close(self, ok: bool) -> None:
        if self.tmp is None:
            self.f.flush()
            return
        self.f.close()
        if ok:
            os.replace(self.tmp, self.path)
        else:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass


def export(
    store: Store,
    fmt: str,
    out: str | os.PathLike | IO[str],
    *,
    refs: list[Ref] | None = None,
    filters: Filters | None = None,
    exemplar_set: str | None = None,
    keys: list[str] | None = None,
) -> ExportReport:
    """Write the selection (or `exemplar_set`) in format `fmt`; returns the counts."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (one of: {', '.join(FORMATS)})")
    if exemplar_set is not None and fmt not in ("prompt", "react-json"):
        raise ExportError("an exemplar set exports as 'prompt' or 'react-json'; select its versions for jsonl/chat-sft")
    if exemplar_set is not None and (refs or (filters and filters != Filters())):
        raise ExportError("give either an exemplar set or versions/filters, not both")
    if exemplar_set is not None:
        sets.get_set(store, exemplar_set)  # unknown -> error before any file is made
    sink = _Sink(out)
    report = ExportReport(format=fmt, path=sink.path)
    ok = False
    try:
        if exemplar_set is not None:
            _write_set(store, exemplar_set, fmt, keys, sink, report)
        elif fmt == "jsonl":
            _write_jsonl(store, select(store, refs, filters), sink, report)
        elif fmt == "chat-sft":
            _write_chat(store, select(store, refs, filters), sink, report)
        else:
            _write_prompts(store, select(store, refs, filters), fmt, keys, sink, report)
        ok = True
    finally:
        sink.close(ok)
    report.bytes = sink.bytes
    return report


def _write_jsonl(store: Store, batches, sink: _Sink, report: ExportReport) -> None:
    for n, batch in enumerate(batches, 1):
        enc = EpisodeEncoder(store, batch, n)
        report.episodes += 1
        for rec, nsteps in enc.records():
            sink.write(_dumps(rec) + "\n")
            report.versions += 1
            report.records += 1
            report.steps += nsteps


def _write_chat(store: Store, batches, sink: _Sink, report: ExportReport) -> None:
    for batch in batches:
        report.episodes += 1
        ep = batch.episode
        vann = ann.version_histories(store, [v.id for v in batch.versions])
        sann = ann.episode_step_histories(store, ep.id)
        tags = {sid: set(h[-1].tags) for sid, h in sann.items() if h}
        for v in batch.versions:
            steps = batch.paths[v.id]
            if not steps:
                report.skipped.append(f"{ep.id}:{v.id} has no steps")
                continue
            hist = vann.get(v.id)
            ok = version_ok(v.outcome.success, hist[-1].verdict if hist else None)
            sink.write(_dumps(chat_record(ep.task.env, ep.task.text, steps, tags, ok)) + "\n")
            report.versions += 1
            report.records += 1
            report.steps += len(steps)


def _exemplars(batches, report: ExportReport):
    for batch in batches:
        report.episodes += 1
        for v in batch.versions:
            steps = batch.paths[v.id]
            if not steps:
                report.skipped.append(f"{batch.episode.id}:{v.id} has no steps")
                continue
            report.versions += 1
            report.steps += len(steps)
            yield exemplar_from(batch.episode, steps)


def _write_prompts(store: Store, batches, fmt: str, keys, sink: _Sink, report: ExportReport) -> None:
    if fmt == "prompt":
        env = None
        for ex in _exemplars(batches, report):
            if env is not None and ex.env != env:
                raise ExportError(f"a prompt export holds one environment ({env}, then {ex.env}); filter by --env")
            env = ex.env
            trailer = "" if ex.env == "alfworld" else (ex.trailer if ex.trailer is not None else WIKI_DEFAULT_TRAILER[ex.env])
            sink.write(ex.text + trailer)
            report.records += 1
        if report.records == 0:
            raise ExportError("nothing to export: no version matches")
        return
    items = list(_exemplars(batches, report))
    if not items:
        raise ExportError("nothing to export: no version matches")
    envs = {i.env for i in items}
    if len(envs) > 1:
        raise ExportError(f"a react-json file holds one environment (found {', '.join(sorted(envs))}); filter by --env")
    try:
        d = assemble(items[0].env, items)
    except PromptFileError as exc:
        raise ExportError(str(exc)) from None
    _write_dict(d, keys, sink, report)


def _write_dict(d: dict[str, str], keys, sink: _Sink, report: ExportReport) -> None:
    if keys:
        missing = [k for k in keys if k not in d]
        if missing:
            raise ExportError(f"no entry {missing[0]!r} (entries: {', '.join(d)})")
        d = {k: d[k] for k in keys}
    # json.dumps defaults are how the original prompt files were written (byte-identical)
    sink.write(json.dumps(d))
    report.records = len(d)


def _write_set(store: Store, name: str, fmt: str, keys, sink: _Sink, report: ExportReport) -> None:
    env, d = sets.prompt_dict(store, name)
    for e in sets.entries(store, name):
        if e.version_id is not None:
            report.versions += 1
    if fmt == "react-json":
        _write_dict(d, keys, sink, report)
        return
    chosen = keys or list(d)
    for k in chosen:
        if k not in d:
            raise ExportError(f"exemplar set {name!r} has no entry {k!r}")
        sink.write(d[k])
        report.records += 1
