"""Find the failures: full-text search over every version, and which episodes carry a
signal. The index (`sessions.search_index`) holds each step once, though every version
whose path holds it shares it: a step hit is reported in one of those versions - the
episode's current version when it holds the step, else the newest - among the ones that
pass the filters. The CLI (`react-editor search`, `episodes --signal`) and the app call this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from sessions import annotations as ann
from sessions import search_index as idx
from sessions.store import EpisodeTree, Store, StoreError
from trajectory.records import OUTCOME_FILTERS
from trajectory.signals import SIGNALS, SignalCounts

OUTCOMES = OUTCOME_FILTERS
DEFAULT_LIMIT = 20
CANDIDATES = 5000  # per indexed table: how many of the newest matches are ranked
BATCH = 50


class SearchError(StoreError, ValueError):
    """A bad query or filter (one line)."""


@dataclass
class Hit:
    episode: int
    version: int
    step: int | None  # the step's position in the version; None for task text and version names/notes
    field: str  # task, thought, action, observation, name, notes (a version's), note (a step's)
    snippet: str
    marks: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of each match in the snippet

    def as_json(self) -> dict[str, Any]:
        return {"episode": self.episode, "version": self.version, "step": self.step, "field": self.field,
                "snippet": self.snippet}


def outcome_matches(outcome: Any, want: str | None) -> bool:
    """The automatic outcome filter (success | failure | unfinished), as the Episodes list has it."""
    if want == "success":
        return outcome.success is True
    if want == "failure":
        return bool(outcome.done and outcome.success is not True)
    if want == "unfinished":
        return not outcome.done
    return True


def check_signal(signal: str | None) -> None:
    if signal is not None and signal not in SIGNALS:
        raise SearchError(f"unknown signal {signal!r} (one of: {', '.join(SIGNALS)})")


@dataclass
class _Filters:
    env: str | None = None
    outcome: str | None = None
    signal: str | None = None

    def pick(self, tree: EpisodeTree, versions: Iterable[int]) -> int | None:
        """The first of `versions` that passes the filters."""
        if self.env and tree.env != self.env:
            return None
        for v in versions:
            if outcome_matches(tree.versions[v][1], self.outcome) and (not self.signal or self.signal in tree.signals(v)):
                return v
        return None


class _Resolver:
    """Turns ranked index rows into hits, a batch at a time (trees are read once per episode)."""

    def __init__(self, store: Store, query: str, filters: _Filters, allowed: set[int] | None):
        self.store, self.query, self.f, self.allowed = store, query, filters, allowed
        self.trees: dict[int, EpisodeTree] = {}

    def resolve(self, batch: list[tuple[float, str, int]], need: int) -> list[Hit]:
        rows: dict[str, list[int]] = {}
        for _, table, rowid in batch:
            rows.setdefault(table, []).append(rowid)
        step_notes = ann.current_note_targets(self.store, "step", rows.get("step_annotations", []))
        version_notes = ann.current_note_targets(self.store, "version", rows.get("version_annotations", []))
        owner = {
            "step": self.store.episodes_of("step", [*rows.get("steps", []), *step_notes.values()]),
            "version": self.store.episodes_of("version", [*rows.get("versions", []), *version_notes.values()]),
            "task": self.store.episodes_of("task", rows.get("tasks", [])),
        }
        if self.allowed is not None:  # episodes the filters rule out are never read
            owner = {k: {key: [e for e in eids if e in self.allowed] for key, eids in found.items()}
                     for k, found in owner.items()}
        wanted = {e for found in owner.values() for eids in found.values() for e in eids} - set(self.trees)
        self.trees.update(self.store.episode_trees(wanted))
        out: list[Hit] = []
        for _, table, rowid in batch:
            if len(out) >= need:
                break
            if table in ("steps", "step_annotations"):
                sid = rowid if table == "steps" else step_notes.get(rowid)
                places = self._step(sid, owner["step"])
            elif table in ("versions", "version_annotations"):
                vid = rowid if table == "versions" else version_notes.get(rowid)
                places = self._version(vid, owner["version"])
            else:
                places = self._task(owner["task"].get(rowid, []))
            if not places:
                continue
            for fld, marked in idx.snippets(self.store.db, table, self.query, rowid):
                text, marks = idx.split_marks(marked)
                out += [Hit(ep, vid, step, fld, text, marks) for ep, vid, step in places]
        return out

    def _step(self, sid: int | None, owner: dict[int, list[int]]) -> list[tuple[int, int, int | None]]:
        if sid is None or not owner.get(sid):
            return []
        tree = self.trees[owner[sid][0]]
        vid = self.f.pick(tree, tree.holding(sid))
        return [] if vid is None else [(tree.id, vid, tree.steps[sid][1])]

    def _version(self, vid: int | None, owner: dict[int, list[int]]) -> list[tuple[int, int, int | None]]:
        if vid is None or not owner.get(vid):
            return []
        tree = self.trees[owner[vid][0]]
        return [(tree.id, vid, None)] if self.f.pick(tree, [vid]) is not None else []

    def _task(self, episodes: list[int]) -> list[tuple[int, int, int | None]]:
        out = []
        for eid in episodes:
            tree = self.trees[eid]
            vid = self.f.pick(tree, tree.preferred(tree.versions))
            if vid is not None:
                out.append((eid, vid, None))
        return out


def search(
    store: Store,
    query: str,
    *,
    env: str | None = None,
    outcome: str | None = None,
    signal: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[Hit]:
    """Hits for an FTS5 query (words, "phrases", prefix*, AND/OR/NOT, column: filters),
    best first; a syntax error is a one-line SearchError."""
    if not query or not query.strip():
        raise SearchError("the search query is empty")
    if outcome is not None and outcome not in OUTCOMES:
        raise SearchError(f"unknown outcome {outcome!r} (one of: {', '.join(OUTCOMES)})")
    check_signal(signal)
    if limit < 1:
        raise SearchError("--limit must be at least 1")
    kept = []  # the episodes each filter leaves (a superset: versions are checked per hit)
    if env:
        kept.append(set(store.episode_ids(env=env)))
    if outcome:
        kept.append(store.episodes_with_outcome(outcome))
    if signal:
        kept.append(store.episodes_flagged(signal))
    allowed = set.intersection(*kept) if kept else None
    ranked: list[tuple[float, str, int]] = []
    errors: list[str] = []
    for table in idx.SOURCES:  # a column filter names columns of some tables only
        try:
            ranked += [(rank, table, rowid) for rank, rowid in idx.matches(store.db, table, query, CANDIDATES)]
        except idx.SearchSyntaxError as exc:
            errors.append(str(exc))
    if len(errors) == len(idx.SOURCES):
        raise SearchError(errors[0])
    if allowed is not None and not allowed:
        return []
    ranked.sort()
    resolver = _Resolver(store, query, _Filters(env, outcome, signal), allowed)
    hits: list[Hit] = []
    i, size = 0, BATCH
    while i < len(ranked) and len(hits) < limit:
        hits += resolver.resolve(ranked[i : i + size], limit - len(hits))
        i, size = i + size, size * 2  # when filters reject rows, read more at a time
    return hits[:limit]


# ---------------------------------------------------------------------- signals


def episodes_with_signal(store: Store, signal: str, *, all_versions: bool = False) -> list[int]:
    """Episodes whose current version (or any version) carries `signal`."""
    check_signal(signal)
    out = []
    for eid, tree in store.episode_trees(store.episodes_flagged(signal)).items():
        versions = tree.versions if all_versions else [tree.current] if tree.current in tree.versions else []
        if any(signal in tree.signals(v) for v in versions):
            out.append(eid)
    return sorted(out)


def signal_counts(store: Store, episode_ids: Iterable[int]) -> SignalCounts:
    """Per task type and signal, the episodes (of `episode_ids`) whose current version
    carries it - for the experiment page: a count per (type, signal) that opens its episodes."""
    ids = list(episode_ids)
    trees = store.episode_trees(ids)
    counts = SignalCounts()
    for eid in ids:
        tree = trees.get(eid)
        if tree is not None and tree.current in tree.versions:
            counts.add(tree.type, eid, sorted(tree.signals(tree.current)))
    return counts
