"""Export chosen versions (or an exemplar set) to `prompt`, `react-json`, `jsonl` or
`chat-sft`. Line formats stream: one episode is read at a time and each record is written
as soon as it is built, into a temporary file renamed over the target at the end (a failed
export leaves no half file). No API key can appear: AgentConfig has no field for one.
jsonl is encoded straight from the stored rows (this store wrote them: trusted), with no
record object per step or call; SQLite JSON-quotes their texts, and what many rows share
(a step's JSON in every version holding it, call heads, info dicts) is encoded once.
A large jsonl export runs in two processes on two cores or more (`split.py`: the same bytes).
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import math
import os
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from json.encoder import encode_basestring as _esc  # the text encoder _ENCODER uses (ensure_ascii=False)
from typing import IO, Any, Iterable, Iterator, get_args

from sessions import annotations
from sessions import exemplar_sets
from sessions.exchange import split
from sessions.exchange.chat_sft import chat_record, version_ok
from trajectory import kinds
from trajectory.prompt_files import PromptFileError, exemplar_from
from sessions.exchange.schema import SCHEMA_NAME, SCHEMA_VERSION
from sessions.exchange.selection import EpisodeBatch, Filters, Ref, select
from trajectory.records import EditInfo, Source, Version, env_only, safe_call_params
from sessions.connection import _ids, from_json
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


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # NaN is not JSON


def _dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


# What _ENCODER writes for a text, a number and a flag, without its per-call overhead (the
# records' repeated parts are assembled from these and `_esc` for texts that are never None;
# tests compare the bytes with _dumps).
def _str(v: str | None) -> str:
    return "null" if v is None else _esc(v)


def _num(v: int | float | None) -> str:
    t = type(v)
    if t is int or (t is float and math.isfinite(v)):
        return repr(v)
    return "null" if v is None else _dumps(v)


def _hex(v: str | None) -> str:
    """What SQLite's lower(hex(v)) gives for a text or NULL (a stored digest is bytes)."""
    return "" if v is None else str(v).encode().hex()


def _bool(v: bool) -> str:
    return "true" if v else "false"


# ---------------------------------------------------------------------- jsonl records

_LINE_HEAD = f'{{"schema":{_dumps(SCHEMA_NAME)},"schema_version":{_dumps(SCHEMA_VERSION)},"episode":'


_SOURCES = {s: _esc(s) for s in get_args(Source)}  # a step's source as JSON
_CUT = '"cut_from":'


class Shared:
    """What many episodes of one export share, encoded once: a call's model..params part
    by (call_params id, purpose), an info dict's JSON by its stored text (None: it holds a
    ref, encoded per step). Bounded: cleared when large."""

    LIMIT = 4096

    def __init__(self, store: Store):
        self.store = store
        self.params: dict[int | None, tuple[str, str, str | None]] = {}  # call_params rows by id
        self.heads: dict[tuple, str] = {}
        self.infos: dict[str | None, str | None] = {}

    def learn(self, calls: Iterable[tuple]) -> None:
        """Read the call_params rows of these calls (`Calls.rows` tuples) not known yet."""
        need = {c[2] for c in calls if c[2] not in self.params}
        if need:
            if len(self.params) > self.LIMIT:
                self.params.clear()
            self.params.update(self.store.calls.params_rows(need))

    def head(self, pid: int | None, purpose: str | None) -> str:
        key = (pid, purpose)
        h = self.heads.get(key)
        if h is None:
            if len(self.heads) > self.LIMIT:
                self.heads.clear()
            if pid not in self.params:  # (cleared by `learn` since its chunk was read)
                self.params.update(self.store.calls.params_rows([pid]))
            model, style, params = self.params[pid]
            h = self.heads[key] = (f'"model":{_esc(model)},"api_style":{_esc(style)},"purpose":{_str(purpose)},'
                                   f'"params":{_dumps(safe_call_params(from_json(params, {})))}')
        return h

    def info(self, text: str | None) -> str | None:
        if text in self.infos:
            return self.infos[text]
        if len(self.infos) > self.LIMIT:
            self.infos.clear()
        info = from_json(text, {})
        self.infos[text] = out = None if "carried_from" in info else _dumps(info) if info else "{}"
        return out


class EpisodeEncoder:
    """File-relative refs for one episode, encoded straight from the stored rows
    (`StepCols`, `Calls.rows` tuples: trusted, this store wrote them). A step's JSON is made
    once (the first record that holds it) and reused, so a shared prefix is byte-identical
    in every record. References (edits, carried_from) resolve only to steps of earlier
    records - what an importer has already created when it reads them."""

    def __init__(self, store: Store, batch: EpisodeBatch, ep_ref: int, calls: dict[int, tuple],
                 histories: tuple[dict, dict], shared: Shared):
        self.batch, self.ep_ref, self.shared = batch, ep_ref, shared
        ep = batch.episode
        self.store, self.calls, self.fetched = store, calls, False
        self.step_ids: dict[int, Any] = {}  # an encoded step's recorded call ids
        self.vann, self.sann = histories
        self.heads, self.infos, self.texts = shared.heads, shared.infos, _SOURCES  # (read per call and step)
        self.step_ref: dict[int, int] = {}
        self.call_ref: dict[int, int] = {}
        self.step_cache: dict[int, str] = {}  # a step's JSON, written once and reused
        self.call_cache: dict[int, str] = {}
        self.version_ref: dict[int, int] = {}
        vids = [v.id for v in batch.versions]
        self.current = ep.current_version if ep.current_version in vids else vids[-1]
        self.episode_json = _dumps({
            "ref": ep_ref,
            "name": ep.name,
            "created_at": ep.created_at,
            "task": ep.task.model_dump(mode="json"),
            "config": ep.config.model_dump(mode="json"),
            # the import marks (confirmation, digest) are this database's state, not the episode's
            "env_options": env_only(ep.env_options),
        })

    def _edit(self, e: EditInfo | None, limit: int) -> dict | None:
        if e is None:
            return None
        ref = self.step_ref.get(e.replaced_step) if e.replaced_step is not None else None
        out = {
            "kind": e.kind,
            "index": e.index,
            "replaced_step": ref if ref is not None and ref <= limit else None,
            "old_thought": e.old_thought,
            "old_action": e.old_action,
        }
        if e.origin is not None:  # a suggested edit: critic, prompt hash, the what-if groups that proved it
            out["origin"] = e.origin
        return out

    def _call(self, cid: int) -> int:
        """The call's ref; its JSON is made on first use."""
        ref = self.call_ref.get(cid)
        if ref is not None:
            return ref
        ref = self.call_ref[cid] = len(self.call_ref) + 1
        _, at, pid, purpose, phash, chars, done, pt, ct, kt, lat, att, cached, err, cut = self.calls[cid]
        # byte for byte _dumps({"ref": ..., "created_at": ..., ..., "error": ...}), written directly
        # (the usual types inline; anything else through _num/_str, which _dumps agrees with)
        self.call_cache[cid] = (
            f'{{"ref":{ref},"created_at":{at},{self.heads.get((pid, purpose)) or self.shared.head(pid, purpose)},'
            f'"prompt_hash":"{phash.hex() if phash.__class__ is bytes else _hex(phash)}","prompt_chars":{chars:d},'
            f'"completion":{done},'
            f'"usage":{{"prompt_tokens":{pt if pt.__class__ is int else _num(pt)},'
            f'"completion_tokens":{ct if ct.__class__ is int else _num(ct)},'
            f'"cached_prompt_tokens":{kt if kt.__class__ is int else "null" if kt is None else _num(kt)}}},'
            f'"latency_ms":{_num(lat) if lat.__class__ is not float or lat - lat else repr(lat)},'
            f'"attempts":{att if att.__class__ is int else _num(att)},"cached":{"true" if cached else "false"},'
            f'"error":{err}{f",{_CUT}{_dumps(cut)}}}" if cut else "}"}')
        return ref

    def _recorded(self, ids: list[int]) -> list[int]:
        """The ids among these that name a recorded call. A call recorded under another
        episode is read here, with every other such call of this episode's paths (one query)."""
        calls = self.calls
        if not self.fetched and any(c not in calls for c in ids):
            self.fetched = True
            missing = {c for path in self.batch.paths.values() for s in path for c in _ids(s.call_ids) if c not in calls}
            found = self.store.calls.rows(ids=sorted(missing))
            self.shared.learn(found.values())
            calls.update(found)
        return [c for c in ids if c in calls]

    def _info(self, text: str | None, limit: int) -> str:
        out = self.shared.info(text)
        if out is None:  # refs to steps: this file's, if written before
            info = from_json(text, {})
            src = self.step_ref.get(info["carried_from"])
            out = _dumps({**info, "carried_from": src if src is not None and src <= limit else None})
        return out

    def _step(self, s: tuple, limit: int) -> str:
        sid, _, _, idx, texts, done, r, info, source, edit, cids, at = s
        refs = self.step_ref
        ref = refs[sid] = len(refs) + 1
        # the usual step: one call ("[id]"), of this episode, not yet encoded (no _ids, no list)
        cid = int(cids[1:-1]) if cids and "," not in cids and cids[1:-1].isdecimal() else None
        if cid in self.calls:
            cref = self.call_ref.get(cid) or self._call(cid)
            call_refs, self.step_ids[sid] = f"{cref}", (cid,)
        else:
            ids = self._recorded(_ids(cids))
            call_refs = ",".join([str(self._call(c)) for c in ids])
            self.step_ids[sid] = ids
        ann = self.sann.get(sid)
        notes = _dumps([{"annotator": a.annotator, "created_at": a.created_at, "tags": a.tags, "note": a.note}
                        for a in ann]) if ann else "[]"
        r = r or 0.0  # (as StepRow reads a stored NULL, and -0.0)
        # byte for byte _dumps({"ref": ..., "index": ..., ..., "annotations": ...}), written directly
        # (the usual types inline; anything else through _num/_str, which _dumps agrees with)
        d = self.step_cache[sid] = (
            f'{{"ref":{ref},"index":{idx:d},"thought":{texts},"done":{"true" if done else "false"},'
            f'"reward":{"0.0" if not r else _num(r) if r.__class__ is not float or r - r else repr(r)},'
            f'"info":{self.infos.get(info) or self._info(info, limit)},"source":{self.texts.get(source) or _esc(source)},'
            f'"edit":{"null" if edit is None else _dumps(self._edit(EditInfo.model_validate_json(edit), limit))},'
            f'"calls":[{call_refs}],"created_at":{at},"annotations":{notes}}}')
        return d

    def _version(self, n: int, v: Version, limit: int) -> str:
        return _dumps({
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
        })

    def lines(self) -> Iterator[tuple[str, int]]:
        """One JSON line per version (newline included: no copy to add it), byte for byte
        `_dumps` of the record {schema, schema_version, episode, version, steps, calls}: the parts that repeat
        (the episode, shared steps, calls) are encoded once and joined."""
        cache, step, step_ids, call_cache = self.step_cache, self._step, self.step_ids, self.call_cache
        head = f'{_LINE_HEAD}{self.episode_json},"version":'
        for n, v in enumerate(self.batch.versions, 1):
            self.version_ref[v.id] = n
            limit = len(self.step_ref)
            path = self.batch.paths[v.id]
            steps = ",".join([cache.get(s[0]) or step(s, limit) for s in path])
            # a call is listed once per record, where its first step holds it
            calls = ",".join([call_cache[cid] for cid in dict.fromkeys([c for s in path for c in step_ids[s[0]]])])
            yield f'{head}{self._version(n, v, limit)},"steps":[{steps}],"calls":[{calls}]}}\n', len(path)


# ---------------------------------------------------------------------- writers


class _Sink:
    """A path (written to a temp file, renamed at the end), '-' or an open text stream.

    Only a regular file (or nothing) at the path is replaced: a symlink, FIFO or device
    there is refused, never swapped for our file. The new file gets the mode a plain
    `open()` would (0666 minus the umask), not mkstemp's 0600."""

    def __init__(self, out: str | os.PathLike | IO[str]):
        self.tmp: str | None = None
        self.path = "-"
        if isinstance(out, (str, os.PathLike)) and str(out) != "-":
            target = Path(out)
            try:
                _check_target(target)
                _check_folder(target)
                fd, self.tmp = tempfile.mkstemp(prefix=".export-", dir=str(target.parent))
            except (OSError, ValueError) as exc:
                raise ExportError(f"cannot write {_shown(target)}: {getattr(exc, 'strerror', None) or exc}") from None
            self.f: IO[str] = io.open(fd, "w", encoding="utf-8", newline="")
            self.path = str(target)
        elif isinstance(out, (str, os.PathLike)):
            import sys

            self.f = sys.stdout
        else:
            self.f = out  # type: ignore[assignment]
        self.bytes = 0

    def write(self, text: str) -> None:
        try:
            self.f.write(text)
        except OSError as exc:  # disk full, ...
            raise ExportError(f"cannot write {_shown(Path(self.path))}: {exc.strerror or exc}") from None
        self.bytes += len(text) if text.isascii() else len(text.encode("utf-8"))

    def write_bytes(self, data: bytes) -> None:
        """UTF-8 text already encoded (a second process's lines): past the text layer when
        the stream has one."""
        buf = getattr(self.f, "buffer", None)
        try:
            if buf is None:
                self.f.write(data.decode("utf-8"))
            else:
                self.f.flush()
                buf.write(data)
        except OSError as exc:  # disk full, ...
            raise ExportError(f"cannot write {_shown(Path(self.path))}: {exc.strerror or exc}") from None
        self.bytes += len(data)

    def close(self, ok: bool) -> None:
        if self.tmp is None:
            self.f.flush()
            return
        try:
            self.f.close()
            if ok:
                os.chmod(self.tmp, 0o666 & ~_umask())
                _check_target(Path(self.path))  # still nothing but a regular file there
                os.replace(self.tmp, self.path)
                return
        except OSError as exc:
            raise ExportError(f"cannot write {_shown(Path(self.path))}: {exc.strerror or exc}") from None
        finally:
            if os.path.lexists(self.tmp):
                os.unlink(self.tmp)


def _check_target(target: Path) -> None:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise ExportError(f"{_shown(target)} is a directory; give a file path")
    if not stat.S_ISREG(st.st_mode):
        raise ExportError(f"{_shown(target)} is not a regular file (a symlink, FIFO or device); "
                          "refusing to replace it - give another path, or '-' for stdout")


def _check_folder(target: Path) -> None:
    """The folder must exist (a typo makes no tree of folders) and be reached without a
    symbolic link among the parts typed (`link_to_etc/x.jsonl` would write into /etc)."""
    parent = target.parent
    for part in (parent, *parent.parents):
        if str(part) in ("", ".", "/"):
            continue
        if part.is_symlink():
            raise ExportError(f"{_shown(part)} is a symbolic link; give the folder it points to")
    if not parent.is_dir():
        raise ExportError(f"no folder {_shown(parent)}; create it first")


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (threads share it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _shown(p: Path) -> str:
    return repr(str(p))[1:-1]  # a path with control characters or NUL stays one line


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
        exemplar_sets.get_set(store, exemplar_set)  # unknown -> error before any file is made
    sink = _Sink(out)
    report = ExportReport(format=fmt, path=sink.path)
    ok = False
    try:
        if exemplar_set is not None:
            _write_set(store, exemplar_set, fmt, keys, sink, report)
        elif fmt == "jsonl":
            _write_jsonl_parts(store, refs, filters, sink, report)
        elif fmt == "chat-sft":
            _write_chat(store, select(store, refs, filters), sink, report)
        else:
            _write_prompts(store, select(store, refs, filters), fmt, keys, sink, report)
        ok = True
    finally:
        sink.close(ok)
    report.bytes = sink.bytes
    return report


CHUNK = 200  # episodes whose calls and annotations are read together


def _chunked(batches: Iterable[EpisodeBatch], n: int = CHUNK) -> Iterator[list[EpisodeBatch]]:
    chunk: list[EpisodeBatch] = []
    for b in batches:
        chunk.append(b)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cycle collector paused: a bulk export makes a tuple per row and a string per
    field but no cycles, and the collector's passes over the rows of a chunk cost about
    a tenth of its time. Turned back on (if it was on) however the export ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _write_jsonl(store: Store, batches, sink: _Sink, report: ExportReport) -> None:
    with _no_gc():
        _jsonl_lines(store, batches, sink, report)


def _jsonl_lines(store: Store, batches, sink: _Sink, report: ExportReport) -> None:
    n, shared = 0, Shared(store)
    for chunk in _chunked(batches, CHUNK):  # the calls and annotations of a chunk of episodes in one query each
        calls = store.calls.rows(b.episode.id for b in chunk)
        shared.learn(calls.values())
        histories = (annotations.version_histories(store, [v.id for b in chunk for v in b.versions]),
                     annotations.step_histories(store, [b.episode.id for b in chunk]))
        for batch in chunk:
            n += 1
            enc = EpisodeEncoder(store, batch, n, calls, histories, shared)
            report.episodes += 1
            for line, nsteps in enc.lines():
                sink.write(line)
                report.versions += 1
                report.records += 1
                report.steps += nsteps


def _write_jsonl_parts(store: Store, refs, filters: Filters | None, sink: _Sink, report: ExportReport) -> None:
    """A large selection by filters in two processes (`split.py`), else in this one."""
    f = (filters or Filters()).check()
    ids = None if refs else store.episodes.ids(env=f.env, task_type=f.task_type)
    if ids is None or not split.worth_it(store, len(ids)):
        _write_jsonl(store, select(store, refs, f, raw=True), sink, report)
        return
    cut = int(len(ids) * split.SHARE)
    with split.Part(store, f, ids[cut:]) as part:
        _write_jsonl(store, select(store, None, f, raw=True, episodes=ids[:cut]), sink, report)
        got = part.result()
        part.copy_into(sink, report.episodes)
    for key in ("episodes", "versions", "records", "steps"):
        setattr(report, key, getattr(report, key) + got[key])
    report.skipped += got["skipped"]


def _write_chat(store: Store, batches, sink: _Sink, report: ExportReport) -> None:
    for batch in batches:
        report.episodes += 1
        ep = batch.episode
        vann = annotations.version_histories(store, [v.id for v in batch.versions])
        sann = annotations.episode_step_histories(store, ep.id)
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
            yield exemplar_from(kinds.transcript(batch.episode.task.env), batch.episode, steps)


def _write_prompts(store: Store, batches, fmt: str, keys, sink: _Sink, report: ExportReport) -> None:
    if fmt == "prompt":
        env = None
        for ex in _exemplars(batches, report):
            if env is not None and ex.env != env:
                raise ExportError(f"a prompt export holds one environment ({env}, then {ex.env}); filter by --env")
            env = ex.env
            sink.write(ex.text + kinds.transcript(ex.env).export_trailer(ex))
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
        d = kinds.transcript(items[0].env).assemble(items)
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
    env, d = exemplar_sets.prompt_dict(store, name)
    for e in exemplar_sets.entries(store, name):
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
