"""Which versions an export takes: explicit `EPISODE[:VERSION]` refs and/or filters, read
a chunk of episodes at a time with a few set-based queries, so memory stays bounded however
many versions match."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from sessions import annotations as anno
from sessions import numbering
from sessions.row_records import stored_id
from sessions.store import StepRow, Store, StoreError
from trajectory import kinds
from trajectory.records import Episode, Version

OUTCOMES = ("success", "failure", "unfinished")


class SelectionError(StoreError, ValueError):
    pass


@dataclass
class Filters:
    env: str | None = None
    task_type: str | None = None
    outcome: str | None = None  # automatic outcome: success | failure | unfinished
    verdict: str | None = None  # a person's verdict: success | failure | unsure
    edited: bool = False  # only versions with a person's edit or human-written step
    exemplar_ready: bool = False
    annotator: str | None = None  # only versions (or their steps) annotated by this person
    all_versions: bool = False  # every version of a matched episode, not just the current one

    def check(self) -> "Filters":
        if self.env is not None and self.env not in kinds.known():
            raise SelectionError(f"unknown environment {self.env!r} (one of: {', '.join(kinds.known())})")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise SelectionError(f"unknown outcome {self.outcome!r} (one of: {', '.join(OUTCOMES)})")
        if self.verdict is not None and self.verdict not in anno.VERDICTS:
            raise SelectionError(f"unknown verdict {self.verdict!r} (one of: {', '.join(anno.VERDICTS)})")
        return self

    @classmethod
    def parse(cls, specs: list[str], **base: Any) -> "Filters":
        """`--filter key=value` pairs (env, type, outcome, verdict, edited, exemplar_ready,
        annotator, versions=all)."""
        f = cls(**base)
        for spec in specs:
            key, sep, value = spec.partition("=")
            key = key.strip().replace("-", "_")
            if not sep:
                if key in ("edited", "exemplar_ready", "all_versions"):
                    setattr(f, key, True)
                    continue
                raise SelectionError(f"bad filter {spec!r}: use key=value")
            value = value.strip()
            if key in ("env", "outcome", "verdict", "annotator"):
                setattr(f, key, value)
            elif key in ("type", "task_type"):
                f.task_type = value
            elif key in ("edited", "exemplar_ready"):
                setattr(f, key, value.lower() in ("1", "true", "yes", "y"))
            elif key == "versions":
                f.all_versions = value == "all"
            else:
                raise SelectionError(f"unknown filter {key!r}")
        return f.check()


@dataclass
class Ref:
    episode: int
    version: int | str | None = None  # None: the current version; "r2": a rollout (sessions.numbering)
    all: bool = False


def parse_ref(spec: str) -> Ref:
    """`12` (current version), `12:3` (version v3 of episode 12: the per-episode number
    people read, see sessions.numbering; `12:v3` too), `12:r2` (its rollout r2), `12:all`."""
    ep, sep, ver = str(spec).partition(":")
    try:
        episode = _number(ep)
    except ValueError:
        raise SelectionError(f"bad version reference {str(spec)[:40]!r}: use EPISODE or EPISODE:VERSION") from None
    if not sep:
        return Ref(episode)
    if ver in ("all", "*"):
        return Ref(episode, all=True)
    try:
        return Ref(episode, numbering.parse(ver))
    except ValueError:
        raise SelectionError(f"bad version reference {str(spec)[:40]!r}: use EPISODE:VERSION or EPISODE:all") from None


def _number(text: str) -> int:
    """An id as typed: ASCII digits, at most 18 (`int` takes `²` and 5,000 digits; SQLite
    stops at 2**63-1 with an OverflowError)."""
    s = text.strip()
    if not (s.isascii() and s.isdigit() and len(s) <= 18):
        raise ValueError(text)
    return int(s)


def resolve(store: Store, ref: Ref) -> Ref:
    """The ref with its per-episode version number turned into the version's global id."""
    store.episodes.get(ref.episode)
    if ref.version is None:
        return ref
    return Ref(ref.episode, numbering.id_of(store, ref.episode, ref.version), ref.all)


@dataclass
class EpisodeBatch:
    """One episode with its selected versions and their paths (root -> leaf)."""

    episode: Episode
    versions: list[Version]
    paths: dict[int, list[StepRow]] = field(default_factory=dict)


def _path(steps: dict[int, StepRow], leaf: int | None) -> list[StepRow]:
    """Root -> leaf through the parent pointers of an episode's steps (read once for all
    its versions: a shared prefix is the same objects, not a second read)."""
    out = []
    while leaf is not None:
        s = steps[leaf]
        out.append(s)
        leaf = s.parent_id
    return out[::-1]


def _keep(
    f: Filters,
    v: Version,
    steps: list[StepRow],
    ready: set[int] | None,
    va: dict[int, list[anno.VersionAnnotation]],
    sa: dict[int, list[anno.StepAnnotation]] | None,
) -> bool:
    o = v.outcome
    if f.outcome == "success" and o.success is not True:
        return False
    if f.outcome == "failure" and not (o.done and o.success is not True):
        return False
    if f.outcome == "unfinished" and o.done:
        return False
    if f.edited and not (v.edits or v.draft_edit or any(s.source == "human" for s in steps)):
        return False
    if ready is not None and v.id not in ready:
        return False
    hist = va.get(stored_id(v.id), [])
    if f.verdict and not (hist and hist[-1].verdict == f.verdict):
        return False
    if f.annotator:
        by = {a.annotator for a in hist}
        if sa is not None:
            for s in steps:
                by |= {a.annotator for a in sa.get(s.id, [])}
        if f.annotator not in by:
            return False
    return True


def select(
    store: Store,
    refs: list[Ref] | None = None,
    filters: Filters | None = None,
    *,
    raw: bool = False,
    episodes: Iterable[int] | None = None,
) -> Iterator[EpisodeBatch]:
    """Episode batches in episode order (explicit refs: in the given order, grouped by
    episode). Filters apply to explicit refs too. `raw`: the paths hold `StepJson` (the
    rows as the jsonl export encodes them), not StepRow. `episodes`: only these of the
    episodes the refs or filters name (a part of an export made by two processes)."""
    f = (filters or Filters()).check()
    ready = anno.exemplar_ready_versions(store) if f.exemplar_ready else None
    if refs:
        order: list[int] = []
        wanted: dict[int, list[Ref]] = {}
        refs = [resolve(store, r) for r in refs]  # unknown -> StoreError before writing anything
        for r in refs:
            if r.episode not in wanted:
                order.append(r.episode)
            wanted.setdefault(r.episode, []).append(r)
        allowed = set(store.episodes.ids(env=f.env, task_type=f.task_type)) if (f.env or f.task_type) else None
        plan = [(e, wanted[e]) for e in order if allowed is None or e in allowed]
    else:
        plan = [(e, [Ref(e, all=f.all_versions)]) for e in store.episodes.ids(env=f.env, task_type=f.task_type)]
    if episodes is not None:
        only = set(episodes)
        plan = [p for p in plan if p[0] in only]
    refs_of = dict(plan)
    for ep, versions, steps in store.episodes.read((e for e, _ in plan), raw=raw):
        ep_id = stored_id(ep.id)
        ep_refs = refs_of[ep_id]
        all_versions = {stored_id(v.id): v for v in versions}
        chosen: list[int] = []
        for r in ep_refs:
            if r.all:
                ids = list(all_versions)
            elif r.version is not None:
                assert isinstance(r.version, int)  # resolved above: the version's id
                ids = [r.version]
            else:
                ids = [ep.current_version] if ep.current_version else []
            chosen += [i for i in ids if i not in chosen]
        chosen.sort()
        va = anno.version_histories(store, chosen) if (f.verdict or f.annotator) else {}
        sa = anno.episode_step_histories(store, ep_id) if f.annotator else None
        batch = EpisodeBatch(ep, [])
        for vid in chosen:
            v = all_versions[vid]
            path = _path(steps, v.leaf_step_id)
            if _keep(f, v, path, ready, va, sa):
                batch.versions.append(v)
                batch.paths[vid] = path
        if batch.versions:
            yield batch
