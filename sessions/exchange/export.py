"""Export chosen versions (or an exemplar set) to `prompt`, `react-json`, `jsonl` or
`chat-sft`, and the training formats `dpo`, `kto` and `steps` (`training.py`). Line formats
stream: one episode is read at a time and each record is written as soon as it is built, into
a temporary file renamed over the target at the end (a failed export leaves no half file;
`sink.py`). No API key can appear: AgentConfig has no field for one. jsonl is encoded straight
from the stored rows (`jsonl_encoder.py`). A large jsonl export runs in two processes on two
cores or more (`split.py`: the same bytes).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Iterable, Iterator, cast

from sessions import annotations as anno
from sessions import exemplar_sets
from sessions.exchange import dataset_files, split
from sessions.exchange.jsonl_encoder import EpisodeEncoder, Shared, _dumps  # noqa: F401 (_dumps: tests use it here)
from sessions.exchange.selection import EpisodeBatch, Filters, Ref, select
from sessions.exchange.sink import ExportError, _Sink  # noqa: F401 (re-exported: split_child, callers)
from sessions.exchange.training import TRAINING_FORMATS, export_records
from sessions.exchange.training_options import Counts, TrainingOptions
from sessions.row_records import stored_id
from sessions.store import Store, StoreError  # noqa: F401 (StoreError: callers catch it here)
from trajectory import kinds
from trajectory.prompt_files import Exemplar, PromptFileError, exemplar_from
from trajectory.records import Step

FORMATS = ("prompt", "react-json", "jsonl", "chat-sft", "dpo", "kto", "steps")


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
    left_out: dict[str, int] = field(default_factory=dict)  # training formats: reason -> records left out
    output: str = "jsonl"  # training formats: jsonl, parquet or hf (a `datasets` folder)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def export(
    store: Store,
    fmt: str,
    out: str | os.PathLike[str] | IO[str],
    *,
    refs: list[Ref] | None = None,
    filters: Filters | None = None,
    exemplar_set: str | None = None,
    keys: list[str] | None = None,
    options: TrainingOptions | None = None,
    hf: bool = False,
    source: str | None = None,
) -> ExportReport:
    """Write the selection (or `exemplar_set`) in format `fmt`; returns the counts. The
    training formats (chat-sft, dpo, kto, steps; `training.export_records`) take `options`
    and write JSONL, Parquet (`out` ending in .parquet) or, with `hf`, a `datasets` folder
    whose card names `source` (the database)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (one of: {', '.join(FORMATS)})")
    if fmt in TRAINING_FORMATS and exemplar_set is None:
        return _export_training(store, fmt, out, refs, filters, options or TrainingOptions(), hf, source)
    if hf or dataset_files.output_kind(out, False) != "jsonl":
        raise ExportError(f"{fmt} writes its own file format; Parquet and --hf are for chat-sft, dpo, kto and steps")
    if options is not None and options != TrainingOptions():
        raise ExportError(
            f"training options (--exclude-experiment, --proven-only, ...) are for chat-sft, dpo, kto "
            f"and steps, not {fmt}"
        )
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


def _write_jsonl(store: Store, batches: Iterable[EpisodeBatch], sink: _Sink, report: ExportReport) -> None:
    with _no_gc():
        _jsonl_lines(store, batches, sink, report)


def _jsonl_lines(store: Store, batches: Iterable[EpisodeBatch], sink: _Sink, report: ExportReport) -> None:
    n, shared = 0, Shared(store)
    for chunk in _chunked(batches, CHUNK):  # the calls and annotations of a chunk of episodes in one query each
        episode_ids = [stored_id(b.episode.id) for b in chunk]
        calls = store.calls.rows(episode_ids)
        shared.learn(calls.values())
        shared.learn_extras(episode_ids)
        histories = (
            anno.version_histories(store, [stored_id(v.id) for b in chunk for v in b.versions]),
            anno.step_histories(store, episode_ids),
        )
        for batch in chunk:
            n += 1
            enc = EpisodeEncoder(store, batch, n, calls, histories, shared)
            report.episodes += 1
            for line, nsteps in enc.lines():
                sink.write(line)
                report.versions += 1
                report.records += 1
                report.steps += nsteps


def _write_jsonl_parts(
    store: Store, refs: list[Ref] | None, filters: Filters | None, sink: _Sink, report: ExportReport
) -> None:
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


def _export_training(
    store: Store,
    fmt: str,
    out: str | os.PathLike[str] | IO[str],
    refs: list[Ref] | None,
    filters: Filters | None,
    options: TrainingOptions,
    hf: bool,
    source: str | None,
) -> ExportReport:
    kind = dataset_files.output_kind(out, hf)
    records, counts = export_records(store, fmt, refs=refs, filters=filters, opts=options)
    if kind == "jsonl":
        sink = _Sink(out)
        report = ExportReport(format=fmt, path=sink.path, output=kind)
        ok = False
        try:
            with _no_gc():  # dicts and lists by the hundred thousand, no cycles (as the jsonl export)
                dataset_files.write_jsonl(records, sink)
            ok = True
        finally:
            sink.close(ok)
        report.bytes = sink.bytes
    else:
        assert isinstance(out, (str, os.PathLike))  # output_kind: parquet and hf are paths
        report = ExportReport(format=fmt, path=str(out), output=kind)
        if kind == "parquet":
            _, report.bytes = dataset_files.write_parquet(records, out)
        else:
            card = {
                "format": fmt,
                "db": source or store.file,
                "counts": counts,
                "trl_type": _trl_type(fmt, options),
                "options": options.as_json(),
                "selection": _selection_text(refs, filters),
            }
            _, report.bytes = dataset_files.write_hf(records, out, card)
    _fill(report, counts)
    return report


def _fill(report: ExportReport, counts: Counts) -> None:
    report.records = counts.written
    report.left_out = dict(counts.as_json()["left_out"])


def _trl_type(fmt: str, options: TrainingOptions) -> str:
    if fmt == "dpo" and options.implicit_prompt:
        return "conversational preference, implicit prompt"
    return dataset_files.TRL_TYPES[fmt]


def _selection_text(refs: list[Ref] | None, filters: Filters | None) -> str:
    parts = [f"{r.episode}:{'all' if r.all else (r.version or 'current')}" for r in refs or []]
    f = filters or Filters()
    parts += [f"{k}={v}" for k, v in vars(f).items() if v not in (None, False)]
    return ", ".join(parts) or "everything"


def _exemplars(batches: Iterable[EpisodeBatch], report: ExportReport) -> Iterator[Exemplar]:
    for batch in batches:
        report.episodes += 1
        for v in batch.versions:
            steps = batch.paths[stored_id(v.id)]
            if not steps:
                report.skipped.append(f"{batch.episode.id}:{v.id} has no steps")
                continue
            report.versions += 1
            report.steps += len(steps)
            # a StepRow has the fields of a Step that an exemplar reads
            yield exemplar_from(kinds.transcript(batch.episode.task.env), batch.episode, cast("list[Step]", steps))


def _write_prompts(
    store: Store, batches: Iterable[EpisodeBatch], fmt: str, keys: list[str] | None, sink: _Sink, report: ExportReport
) -> None:
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


def _write_dict(d: dict[str, str], keys: list[str] | None, sink: _Sink, report: ExportReport) -> None:
    if keys:
        missing = [k for k in keys if k not in d]
        if missing:
            raise ExportError(f"no entry {missing[0]!r} (entries: {', '.join(d)})")
        d = {k: d[k] for k in keys}
    # json.dumps defaults are how the original prompt files were written (byte-identical)
    sink.write(json.dumps(d))
    report.records = len(d)


def _write_set(store: Store, name: str, fmt: str, keys: list[str] | None, sink: _Sink, report: ExportReport) -> None:
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
