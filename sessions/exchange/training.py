"""The training exports - `chat-sft`, `dpo`, `kto` and `steps` - as records: the one library
call the CLI (`react-editor export --format ...`) and the app's Export page both make.

    records, counts = export_records(store, "dpo", filters=Filters(env="hotpotqa"),
                                     exclude_experiments=("heldout",), proven_only=True)
    for rec in records: ...          # dicts in TRL's dataset formats (docs/training-data.md)
    counts.written, counts.left_out  # filled as the records are read: read them all first

`records` is a lazy iterator (a chunk of episodes is read at a time, so memory stays bounded);
`counts` says how many were written and how many left out, by reason. `dataset_files.write`
writes them as JSONL, Parquet or a `datasets` dataset with its card.

dpo, kto and steps read every version of the matched episodes (pairs and values live across
versions); chat-sft takes the selection as the other exports do (the current version unless
`all_versions`). `exclude_experiments` leaves out every episode of a task those experiments
evaluate, so training data never holds their test set.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

from sessions.exchange.chat_sft import chat_record, version_ok
from sessions.exchange.messages import Conversations
from sessions.exchange.preference_pairs import pair_records
from sessions.exchange.selection import EpisodeBatch, Filters, Ref, _path, select
from sessions.exchange.step_values import value_records
from sessions.exchange.training_options import Counts, TrainingOptions, excluded_episodes
from sessions.exchange.tree_facts import Facts, load
from sessions.exchange.unpaired_labels import label_records
from sessions.row_records import StepRow, stored_id
from sessions.store import Store
from trajectory.records import Version

TRAINING_FORMATS = ("chat-sft", "dpo", "kto", "steps")
CHUNK = 200  # episodes whose facts are read together


def export_records(
    store: Store, fmt: str, *, refs: list[Ref] | None = None, filters: Filters | None = None, **options: Any
) -> tuple[Iterator[dict[str, Any]], Counts]:
    """The records of training format `fmt` for the selection, and their counts (filled as the
    records are read). `options`: TrainingOptions fields (continuation, implicit_prompt, unit,
    exclude_experiments, proven_only, min_effect). Bad options raise before any record."""
    if fmt not in TRAINING_FORMATS:
        raise ValueError(f"not a training format: {fmt!r} (one of: {', '.join(TRAINING_FORMATS)})")
    opts = options.pop("opts", None) or TrainingOptions(**options)
    opts.check()
    f = (filters or Filters()).check()
    if fmt != "chat-sft" and not refs:
        f = replace(f, all_versions=True)
    excluded = excluded_episodes(store, opts.exclude_experiments) if opts.exclude_experiments else {}
    counts = Counts()
    batches = select(store, refs, f)  # unknown refs fail here, before any record
    return _records(store, fmt, batches, f, opts, excluded, counts), counts


def _records(
    store: Store,
    fmt: str,
    batches: Iterator[EpisodeBatch],
    f: Filters,
    opts: TrainingOptions,
    excluded: dict[int, str],
    counts: Counts,
) -> Iterator[dict[str, Any]]:
    conv = Conversations()
    chunk: list[EpisodeBatch] = []
    for b in batches:
        if b.episode.id in excluded:
            counts.leave_out(
                f"episode of a task experiment {excluded[b.episode.id]!r} evaluates (--exclude-experiment)", 1
            )
            continue
        chunk.append(b)
        if len(chunk) == CHUNK:
            yield from _chunk(store, fmt, chunk, conv, opts, counts)
            chunk = []
    if chunk:
        yield from _chunk(store, fmt, chunk, conv, opts, counts)


def _chunk(
    store: Store, fmt: str, chunk: list[EpisodeBatch], conv: Conversations, opts: TrainingOptions, counts: Counts
) -> Iterator[dict[str, Any]]:
    facts = load(store, [stored_id(b.episode.id) for b in chunk])
    for batch in chunk:
        ff = facts[stored_id(batch.episode.id)]
        if fmt == "chat-sft":
            yield from _chat(batch, ff, conv, counts)
            continue
        versions, paths = _whole_tree(store, batch, ff)
        if fmt == "dpo":
            yield from pair_records(batch, ff, paths, versions, conv, opts, counts)
        elif fmt == "kto":
            yield from label_records(batch, ff, conv, opts, counts)
        else:
            yield from value_records(batch, ff, paths, versions, counts)


def _whole_tree(store: Store, batch: EpisodeBatch, facts: Facts) -> tuple[dict[int, Version], dict[int, list[StepRow]]]:
    """Every version of the episode with its path: the batch itself when it holds them all (no
    filter left one out), else read again."""
    if len(batch.versions) == len(facts.labels):
        return {stored_id(v.id): v for v in batch.versions}, batch.paths
    for _, versions, steps in store.episodes.read([stored_id(batch.episode.id)]):
        return {stored_id(v.id): v for v in versions}, {stored_id(v.id): _path(steps, v.leaf_step_id) for v in versions}
    return {}, {}  # pragma: no cover - the episode was just read


def _chat(batch: EpisodeBatch, facts: Facts, conv: Conversations, counts: Counts) -> Iterator[dict[str, Any]]:
    ep = batch.episode
    for v in batch.versions:
        steps = batch.paths[stored_id(v.id)]
        if not steps:
            counts.leave_out("version with no steps")
            continue
        ok = version_ok(v.outcome.success, facts.verdicts.get(stored_id(v.id)))
        counts.wrote()
        yield chat_record(conv, ep.task.env, ep.task.text, steps, facts.tags, ok)
