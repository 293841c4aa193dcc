"""The judgments part of the Store (`store.judgments`): a person's pairwise preference between
two versions of one episode (A better, B better, or a tie, with an optional reason), one per
annotator and pair; and the migration that makes its table."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any, get_args

from sessions.connection import FROZEN_MARK, StoreError, sqlite_utils
from sessions.database import Database
from trajectory.records import Better, Judgment, now

BETTER: tuple[str, ...] = get_args(Better)
MAX_REASON = 20_000  # characters, as a note (sessions.annotations.MAX_NOTE)
MAX_ANNOTATOR = 200
_FLIP = {"A": "B", "B": "A", "tie": "tie"}
_COLS = "id, episode_id, version_a, version_b, better, reason, annotator, created_at"


class JudgmentError(StoreError, ValueError):
    """Bad judgment input (one line)."""


def install(db: sqlite_utils.Database) -> None:
    """Migration 20: the judgments table (one row per annotator and pair, `version_a < version_b`),
    and a judged version is frozen as an annotated one is (what a judgment compared never
    changes: the versions_frozen trigger also looks here)."""
    for sql in (
        (
            "create table judgments (id integer primary key, episode_id integer not null references episodes(id), "
            "version_a integer not null references versions(id), version_b integer not null references versions(id), "
            "better text not null check (better in ('A', 'B', 'tie')), reason text, annotator text not null, "
            "created_at text not null, check (version_a < version_b), unique (version_a, version_b, annotator))"
        ),
        "create index judgments_episode on judgments(episode_id)",
        "create index judgments_version_b on judgments(version_b)",
        "drop trigger if exists versions_frozen",
        (
            "create trigger versions_frozen before update of leaf_step_id, status, outcome, error, edits, parent_version, "
            "exemplar_rev on versions when exists (select 1 from versions c where c.parent_version = old.id) "
            "or exists (select 1 from version_annotations a where a.version_id = old.id) "
            "or exists (select 1 from exemplar_set_entries e where e.version_id = old.id) "
            "or exists (select 1 from judgments j where j.version_a = old.id or j.version_b = old.id) "
            f"begin select raise(abort, '{FROZEN_MARK}'); end"
        ),
    ):  # one at a time: executescript would commit the migration's transaction
        db.execute(sql)


def _from_row(r: Any) -> Judgment:  # a judgments row (SQL values)
    return Judgment(
        id=r[0],
        episode_id=r[1],
        version_a=r[2],
        version_b=r[3],
        better=r[4],
        reason=r[5],
        annotator=r[6],
        created_at=r[7],
    )


def oriented(j: Judgment, first: int) -> Judgment:
    """The judgment as seen with `first` on the A side (flipped when it is stored as B)."""
    if j.version_a == first:
        return j
    return j.model_copy(update={"version_a": j.version_b, "version_b": j.version_a, "better": _FLIP[j.better]})


def _annotator(name: str) -> str:
    name = (name or "").strip() if isinstance(name, str) else ""
    if not name:
        raise JudgmentError("the annotator is empty")
    if "\n" in name or "\r" in name:
        raise JudgmentError("the annotator must be one line")
    if len(name) > MAX_ANNOTATOR:
        raise JudgmentError(f"the annotator is too long ({len(name)} characters; limit {MAX_ANNOTATOR})")
    return name


def _reason(text: str | None) -> str | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise JudgmentError("a reason must be text")
    if len(text) > MAX_REASON:
        raise JudgmentError(f"the reason is too long ({len(text):,} characters; limit {MAX_REASON:,})")
    return text.strip() or None


class Judgments:
    """The judgments table. Reads the versions table to check a pair (one episode, two versions)."""

    def __init__(self, database: Database):
        self._database = database

    def _episode_of(self, version_id: int) -> int:
        r = self._database.db.execute("select episode_id from versions where id = ?", [int(version_id)]).fetchone()
        if r is None:
            raise JudgmentError(f"unknown version {version_id}")
        return int(r[0])

    def _pair(self, va: int, vb: int) -> int:
        """The pair's episode; one line when it is no pair (unknown version, the same one twice,
        versions of two episodes)."""
        if isinstance(va, bool) or isinstance(vb, bool) or not isinstance(va, int) or not isinstance(vb, int):
            raise JudgmentError("versions are given by their ids")
        ea, eb = self._episode_of(va), self._episode_of(vb)
        if va == vb:
            raise JudgmentError(f"version {va} cannot be judged against itself: give two versions")
        if ea != eb:
            raise JudgmentError(
                f"versions {va} and {vb} belong to different episodes ({ea} and {eb}): "
                "a judgment compares two versions of one episode"
            )
        return ea

    def add(self, version_a: int, version_b: int, better: str, annotator: str, reason: str | None = None) -> Judgment:
        """Record that `annotator` finds A (`version_a`), B (`version_b`) or neither ("tie")
        better; the same annotator judging the pair again (either way round) replaces their
        judgment. Returned oriented as asked; stored with the lower version id as A."""
        if better not in BETTER:
            raise JudgmentError(f"unknown judgment {better!r} (one of: {', '.join(BETTER)})")
        name, why = _annotator(annotator), _reason(reason)
        with self._database.transaction():
            episode = self._pair(version_a, version_b)
            lo, hi = sorted((version_a, version_b))
            stored = better if lo == version_a else _FLIP[better]
            db = self._database.db
            db.execute(
                "insert into judgments (episode_id, version_a, version_b, better, reason, annotator, created_at) "
                "values (?,?,?,?,?,?,?) on conflict (version_a, version_b, annotator) do update set "
                "better = excluded.better, reason = excluded.reason, created_at = excluded.created_at",
                [episode, lo, hi, stored, why, name, now()],
            )
            r = db.execute(
                f"select {_COLS} from judgments where version_a = ? and version_b = ? and annotator = ?", [lo, hi, name]
            ).fetchone()
        return oriented(_from_row(r), version_a)

    def of_pair(self, version_a: int, version_b: int) -> list[Judgment]:
        """Every annotator's judgment of the pair, oriented as asked (A = `version_a`), oldest first."""
        lo, hi = sorted((int(version_a), int(version_b)))
        rows = self._database.db.execute(
            f"select {_COLS} from judgments where version_a = ? and version_b = ? order by created_at, id", [lo, hi]
        ).fetchall()
        return [oriented(_from_row(r), int(version_a)) for r in rows]

    def of_versions(self, version_ids: Iterable[int]) -> list[Judgment]:
        """The judgments that name any of these versions (an export reads a whole episode)."""
        ids = [int(i) for i in version_ids]
        out: dict[int, Judgment] = {}
        for i in range(0, len(ids), 400):
            chunk = ids[i : i + 400]
            marks = ",".join("?" * len(chunk))
            rows = self._database.db.execute(
                f"select {_COLS} from judgments where version_a in ({marks}) or version_b in ({marks})", chunk + chunk
            ).fetchall()
            out.update((r[0], _from_row(r)) for r in rows)
        return [out[k] for k in sorted(out)]

    def judged(self, version_id: int) -> bool:
        """Whether a person has judged the version against another (then it never changes again)."""
        return (
            self._database.db.execute(
                "select 1 from judgments where version_a = ? or version_b = ? limit 1",
                [int(version_id), int(version_id)],
            ).fetchone()
            is not None
        )

    def list(self, episode_id: int | None = None) -> builtins.list[Judgment]:
        """Every judgment (of one episode), as stored (A = the lower version id), by episode, pair
        and time."""
        where, params = ("where episode_id = ?", [int(episode_id)]) if episode_id is not None else ("", [])
        rows = self._database.db.execute(
            f"select {_COLS} from judgments {where} order by episode_id, version_a, version_b, created_at, id", params
        ).fetchall()
        return [_from_row(r) for r in rows]
