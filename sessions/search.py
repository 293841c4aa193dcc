"""Find the failures: full-text search over every version, and which episodes carry a
signal. The index (`sessions.search_index`) holds each step once, though every version
whose path holds it shares it: a step hit is reported in one of those versions - the
episode's current version when it holds the step, else the newest - among the ones that
pass the filters. The CLI (`react-editor search`, `episodes --signal`) and the app call this.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from sessions import annotations as notes  # (not `annotations`: the __future__ import has that name)
from sessions import search_index, search_reads
from sessions.store import EpisodeTree, Store, StoreError
from trajectory.records import OUTCOME_FILTERS
from trajectory.search_text import QueryError, check_query, literal
from trajectory.signals import SIGNALS, STEP_LIMIT, SignalCounts

OUTCOMES = OUTCOME_FILTERS
DEFAULT_LIMIT = 20
CANDIDATES = 5000  # per indexed table: how many of the newest matches are ranked
BATCH = 50
TIME_BUDGET_S = 5.0  # a search running longer than this is stopped (SQLite progress handler)
PROGRESS_EVERY = 1000  # SQLite VM instructions between two looks at the clock


class SearchError(StoreError, ValueError):
    """A bad query or filter (one line)."""


@dataclass
class Hit:
    episode: int
    version: int
    step: int | None  # the step's position in the version; None for task text and version names/notes
    field: str  # task, thought, action, observation, name, notes (a version's), note (a step's)
    snippet: str
    marks: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (start, end) of each match in the snippet

    def as_json(self) -> dict[str, Any]:
        """The hit as the CLI's `--json` prints it (plain values; the marks left out)."""
        return {
            "episode": self.episode,
            "version": self.version,
            "step": self.step,
            "field": self.field,
            "snippet": self.snippet,
        }


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
    """Raises SearchError (one line naming the known ones) for a signal that is not one."""
    if signal is not None and signal not in SIGNALS:
        raise SearchError(f"unknown signal {signal!r} (one of: {', '.join(SIGNALS)})")


@dataclass
class _Filters:
    env: str | None = None
    outcome: str | None = None
    signal: str | None = None

    def first_step(self, tree: EpisodeTree, vid: int) -> int | None:
        """With a signal filter: the position of the version's first step carrying it."""
        carrying = [tree.steps[s][1] for s in tree.path(vid) if self.carries(tree, vid, s)]
        return min(carrying) if carrying else None

    def carries(self, tree: EpisodeTree, vid: int, sid: int) -> bool:
        """Does step `sid` of version `vid` itself carry the filter's signal? (`step_limit`
        is a version's signal, shown on its last step.)"""
        if self.signal == STEP_LIMIT:
            return sid == tree.versions[vid][0] and STEP_LIMIT in tree.signals(vid)
        return self.signal in tree.steps[sid][2]

    def pick(self, tree: EpisodeTree, versions: Iterable[int]) -> int | None:
        """The first of `versions` that passes the filters."""
        if self.env and tree.env != self.env:
            return None
        for v in versions:
            if outcome_matches(tree.versions[v][1], self.outcome) and (
                not self.signal or self.signal in tree.signals(v)
            ):
                return v
        return None


class _Resolver:
    """Turns ranked index rows into hits, a batch at a time (trees are read once per episode)."""

    def __init__(self, store: Store, query: str, filters: _Filters):
        self.store, self.query, self.f = store, query, filters
        self.trees: dict[int, EpisodeTree] = {}
        self.passed: dict[int, bool] = {}  # episode -> may it hold a hit the filters keep (a superset)

    def _allowed(self, episodes: set[int]) -> set[int]:
        """Which of `episodes` the filters may keep, asked of the hits' own episodes only (a
        filter's whole set of episodes grows with the store; a page of hits does not)."""
        if not (self.f.env or self.f.outcome or self.f.signal):
            return episodes
        new = episodes - set(self.passed)
        if new:
            kept = search_reads.passing(self.store, new, env=self.f.env, outcome=self.f.outcome, signal=self.f.signal)
            self.passed.update({e: e in kept for e in new})
        return {e for e in episodes if self.passed[e]}

    def resolve(self, batch: list[tuple[float, str, int]], need: int) -> list[Hit]:
        rows: dict[str, list[int]] = {}
        for _, table, rowid in batch:
            rows.setdefault(table, []).append(rowid)
        step_notes = notes.current_note_targets(self.store, "step", rows.get("step_annotations", []))
        version_notes = notes.current_note_targets(self.store, "version", rows.get("version_annotations", []))
        owner = {
            "step": search_reads.of(self.store, "step", [*rows.get("steps", []), *step_notes.values()]),
            "version": search_reads.of(self.store, "version", [*rows.get("versions", []), *version_notes.values()]),
            "task": search_reads.of(self.store, "task", rows.get("tasks", [])),
        }
        allowed = self._allowed({e for found in owner.values() for eids in found.values() for e in eids})
        owner = {
            k: {key: [e for e in eids if e in allowed] for key, eids in found.items()}  # the others are never read
            for k, found in owner.items()
        }
        wanted = {e for found in owner.values() for eids in found.values() for e in eids} - set(self.trees)
        self.trees.update(search_reads.trees(self.store, wanted))
        placed = []  # (table, rowid, places) of the rows the filters keep, in rank order
        for _, table, rowid in batch:
            if table in ("steps", "step_annotations"):
                sid = rowid if table == "steps" else step_notes.get(rowid)
                places = self._step(sid, owner["step"])
            elif table in ("versions", "version_annotations"):
                vid = rowid if table == "versions" else version_notes.get(rowid)
                places = self._version(vid, owner["version"])
            else:
                places = self._task(owner["task"].get(rowid, []))
            if places:
                placed.append((table, rowid, places))
        out: list[Hit] = []
        while placed and len(out) < need:  # snippets for as many rows as hits are still needed, a table at a time
            take, placed = placed[: need - len(out)], placed[need - len(out) :]
            marked: dict[str, dict[int, list[tuple[str, str]]]] = {}
            for table in {t for t, _, _ in take}:
                marked[table] = search_index.snippets(
                    self.store.db, table, self.query, [r for t, r, _ in take if t == table]
                )
            for table, rowid, places in take:
                for fld, text in marked[table].get(rowid, []):
                    plain, marks = search_index.split_marks(text)
                    out += [Hit(ep, vid, step, fld, plain, marks) for ep, vid, step in places]
        return out

    def _step(self, sid: int | None, owner: dict[int, list[int]]) -> list[tuple[int, int, int | None]]:
        if sid is None or not owner.get(sid):
            return []
        tree = self.trees[owner[sid][0]]
        holding = tree.holding(sid)
        if self.f.signal:  # a step hit under a signal filter is a step that carries the signal
            holding = [v for v in holding if self.f.carries(tree, v, sid)]
        vid = self.f.pick(tree, holding)
        return [] if vid is None else [(tree.id, vid, tree.steps[sid][1])]

    def _version(self, vid: int | None, owner: dict[int, list[int]]) -> list[tuple[int, int, int | None]]:
        if vid is None or not owner.get(vid):
            return []
        tree = self.trees[owner[vid][0]]
        return [(tree.id, vid, self._at(tree, vid))] if self.f.pick(tree, [vid]) is not None else []

    def _at(self, tree: EpisodeTree, vid: int) -> int | None:
        """Where a task/version hit points: with a signal filter, the first step carrying it."""
        return self.f.first_step(tree, vid) if self.f.signal else None

    def _task(self, episodes: list[int]) -> list[tuple[int, int, int | None]]:
        out = []
        for eid in episodes:
            tree = self.trees[eid]
            vid = self.f.pick(tree, tree.preferred(tree.versions))
            if vid is not None:
                out.append((eid, vid, self._at(tree, vid)))
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
    """Hits for a query, best first. FTS5 syntax (words, "phrases", prefix*, AND/OR/NOT,
    column: filters) where the query parses; text that does not parse (copied from a
    trajectory: `Search[Tomas Rell]`, `hp-001`, `can't`) is searched as a phrase of its
    words. A query too long, with too many words, or running past the time budget is a
    one-line SearchError."""
    try:
        check_query(query)
    except QueryError as exc:
        raise SearchError(str(exc)) from None
    if outcome is not None and outcome not in OUTCOMES:
        raise SearchError(f"unknown outcome {outcome!r} (one of: {', '.join(OUTCOMES)})")
    check_signal(signal)
    if limit < 1:
        raise SearchError("--limit must be at least 1")
    deadline = time.monotonic() + TIME_BUDGET_S
    try:
        with _time_budget(store.db.conn, deadline):
            return _search(store, query, _Filters(env, outcome, signal), limit)
    except (sqlite3.DatabaseError, StoreError, ValueError):
        if time.monotonic() <= deadline:  # not stopped by the budget (interrupted SQL fails in several ways)
            raise
        raise SearchError(
            f"the search ran past its {TIME_BUDGET_S:g} s budget and was stopped; use fewer or rarer words, or a filter"
        ) from None


@contextmanager
def _time_budget(conn: sqlite3.Connection, deadline: float) -> Iterator[None]:
    """Interrupt this thread's statements once `deadline` (time.monotonic) has passed (other
    threads sharing the connection are never interrupted)."""
    me = threading.get_ident()
    conn.set_progress_handler(lambda: threading.get_ident() == me and time.monotonic() > deadline, PROGRESS_EVERY)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)


def _ranked(store: Store, query: str) -> tuple[str, list[tuple[float, str, int]]]:
    """(the query as run, ranked rows): FTS5 syntax where it parses in some table (a
    column filter names columns of some tables only), else the literal phrase."""
    ranked: list[tuple[float, str, int]] = []
    failed = 0
    for table in search_index.SOURCES:
        try:
            ranked += [(rank, table, rowid) for rank, rowid in search_index.matches(store.db, table, query, CANDIDATES)]
        except search_index.SearchSyntaxError:
            failed += 1
    if failed < len(search_index.SOURCES):
        return query, ranked
    try:
        phrase = literal(query)
    except QueryError as exc:
        raise SearchError(str(exc)) from None
    return phrase, [
        (rank, table, rowid)
        for table in search_index.SOURCES
        for rank, rowid in search_index.matches(store.db, table, phrase, CANDIDATES)
    ]


def _search(store: Store, query: str, filters: _Filters, limit: int) -> list[Hit]:
    query, ranked = _ranked(store, query)
    ranked.sort()
    resolver = _Resolver(store, query, filters)
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
    for eid, tree in search_reads.trees(store, search_reads.flagged(store, signal)).items():
        versions = tree.versions if all_versions else [tree.current] if tree.current in tree.versions else []
        if any(signal in tree.signals(v) for v in versions):
            out.append(eid)
    return sorted(out)


def signal_counts(store: Store, episode_ids: Iterable[int]) -> SignalCounts:
    """Per task type and signal, the episodes (of `episode_ids`) whose current version
    carries it - for the experiment page: a count per (type, signal) that opens its episodes."""
    ids = list(episode_ids)
    trees = search_reads.trees(store, ids)
    counts = SignalCounts()
    for eid in ids:
        tree = trees.get(eid)
        if tree is not None and tree.current in tree.versions:
            counts.add(tree.type, eid, sorted(tree.signals(tree.current)))
    return counts
