"""The versions part of the Store (`store.versions`): versions (pointers to a leaf step, with
the config and exemplar revision they run with), steps (never updated; a row points at its
parent), appends compare-and-set on the leaf, branches and paths."""

from __future__ import annotations

import json
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Iterable, Iterator, cast

from sessions.connection import DatabaseFailure, Fence, StoreError, _changed, _frozen, compact_json, from_json, to_json
from sessions.database import Database, insert_row
from sessions.row_records import SCOLS, VCOLS, replaced, step_from_row, version_from_row, version_row
from trajectory.records import AgentConfig, ModelCall, Outcome, Step, Version, now
from trajectory.signals import PathState

_WITH_OPTIONS_SQL = (
    f"select {', '.join('v.' + c.strip() for c in VCOLS.split(','))}, e.env_options from versions v "
    "join episodes e on e.id = v.episode_id where v.id = ?"
)
_PATH_SQL = (
    "with recursive p(id, depth) as (select ?, 0 union all "
    "select s.parent_id, p.depth + 1 from steps s join p on s.id = p.id where s.parent_id is not null) "
    f"select {', '.join('s.' + c.strip() for c in SCOLS.split(','))} "
    "from p join steps s on s.id = p.id order by p.depth desc"
)

if TYPE_CHECKING:
    from sessions.calls import Calls
    from sessions.episodes import Episodes


class Versions:
    """Versions and steps. Writes only those tables (and the episode's current version and
    default config through `episodes`, the calls of a step through `calls`)."""

    def __init__(self, database: Database, episodes: Episodes, calls: Calls):
        self._database, self._episodes, self._calls = database, episodes, calls

    # ------------------------------------------------------------------ versions
    def insert(
        self, v: Version, *, config_id: int | None = None, exemplar_rev: int | None = None, pin_from: int | None = None
    ) -> Version:
        """A version pins the config (and exemplar-set revision) it runs with: given ones,
        else those of `pin_from` (the version it continues), else the episode's config."""
        if config_id is None and pin_from is not None:
            row = self._database.db.execute(
                "select config_id, exemplar_rev from versions where id = ?", [pin_from]
            ).fetchone()
            config_id, exemplar_rev = row or (None, None)
        if config_id is None:
            config_id = self._episodes.config_id(v.episode_id)
        vid = insert_row(self._database.db, "versions", version_row(v, config_id, exemplar_rev))
        return v.model_copy(update={"id": vid})

    def create(self, v: Version, *, make_current: bool = True) -> Version:
        """Insert the version (pinning what its parent pins) and, with `make_current`, make it the
        episode's current one; the version with its id."""
        with self._database.transaction():
            out = self.insert(v, pin_from=v.parent_version)
            if make_current:
                self._episodes.point_current(v.episode_id, cast(int, out.id))  # (a version just written)
        return out

    def config(self, version_id: int) -> AgentConfig:
        """The agent config a version runs with (pinned when it was created).
        Raises StoreError for an unknown version."""
        r = self._database.db.execute(
            "select c.json from versions v join configs c on c.id = coalesce(v.config_id, "
            "(select e.config_id from episodes e where e.id = v.episode_id)) where v.id = ?",
            [version_id],
        ).fetchone()
        if r is None:
            raise StoreError(f"unknown version {version_id}")
        return AgentConfig.model_validate_json(r[0])

    def exemplar_revision(self, version_id: int) -> int | None:
        """The exemplar-set revision a version's prompts use (None: not pinned yet / built-in).
        Raises StoreError for an unknown version."""
        r = self._database.db.execute("select exemplar_rev from versions where id = ?", [version_id]).fetchone()
        if r is None:
            raise StoreError(f"unknown version {version_id}")
        revision: int | None = r[0]
        return revision

    def pin_exemplar_revision(self, version_id: int, revision_id: int, *, fence: Fence | None = None) -> None:
        """Pin a version's exemplars the first time they are used (never changed after).
        `fence`: as for `append`, checked in the same statement.
        Raises VersionFrozen for a frozen version; the fence's error when it no longer holds."""
        try:
            with self._database.transaction():
                cur = self._database.db.execute(
                    "update versions set exemplar_rev = ? where id = ? and exemplar_rev is null"
                    + (f" and {fence.sql}" if fence is not None else ""),
                    [revision_id, version_id] + (fence.params if fence is not None else []),
                )
                if fence is not None and cur.rowcount != 1:
                    fence.check(self._database.db)
        except DatabaseFailure as exc:  # frozen (the store's trigger): its prompt never changes
            raise _frozen(self.ref(self.get(version_id)), exc) from None

    def ref(self, v: Version) -> str:
        """`EP:N` of a version, for a message people read (its per-episode number)."""
        ids = self.ids(v.episode_id)
        return f"{v.episode_id}:{ids.index(v.id) + 1}" if v.id in ids else str(v.id)

    def ids(self, episode_id: int) -> list[int]:
        """An episode's version ids in the order they were made (per-episode numbering)."""
        return [
            int(r[0])
            for r in self._database.db.execute("select id from versions where episode_id = ? order by id", [episode_id])
        ]

    def recorded_edits(self, episode_ids: Iterable[int]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        """(episode id, a version's edit records) for every version with edits, of many
        episodes in few queries."""
        ids = [int(i) for i in episode_ids]
        for i in range(0, len(ids), 900):
            chunk = ids[i : i + 900]
            rows = self._database.db.execute(
                "select episode_id, edits from versions where edits is not null and edits not in ('', '[]') "
                f"and episode_id in ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            for ep, edits in rows:
                yield int(ep), json.loads(edits) or []

    def has_child(self, version_id: int) -> bool:
        """Has any version been branched from this one?"""
        return (
            self._database.db.execute(
                "select 1 from versions where parent_version = ? limit 1", [version_id]
            ).fetchone()
            is not None
        )

    def get(self, version_id: int, episode_id: int | None = None) -> Version:
        """The version. Raises StoreError for an unknown id (or one of another episode than `episode_id`)."""
        r = self._database.db.execute(f"select {VCOLS} from versions where id = ?", [version_id]).fetchone()
        if r is None or (episode_id is not None and r[1] != episode_id):
            where = f" of episode {episode_id}" if episode_id is not None else ""
            raise StoreError(f"unknown version {version_id}{where}")
        return version_from_row(r)

    def with_env_options(self, version_id: int) -> tuple[Version, dict[str, Any]]:
        """The version and its episode's environment options (what a confirm changes) in
        one read: what a step reads fresh.
        Raises StoreError for an unknown version."""
        r = self._database.db.conn.execute(_WITH_OPTIONS_SQL, (version_id,)).fetchone()
        if r is None:
            raise StoreError(f"unknown version {version_id}")
        return version_from_row(r), from_json(r[-1], {})

    def of_episode(self, episode_id: int) -> list[Version]:
        """The episode's versions, oldest first. Raises StoreError for an unknown episode."""
        self._episodes.get(episode_id)
        return [
            version_from_row(r)
            for r in self._database.db.execute(
                f"select {VCOLS} from versions where episode_id = ? order by id", [episode_id]
            )
        ]

    def update(self, version_id: int, **fields: Any) -> Version:
        """Move a version's pointer or record its status/outcome/name (a version is a
        pointer; the steps it points at never change). An import may also set its lineage
        and timestamps; otherwise `updated_at` becomes now.
        Raises ValueError for a field it does not set, VersionFrozen when a frozen version's
        path or outcome would change."""
        allowed = {
            "leaf_step_id",
            "draft_thought",
            "draft_edit",
            "name",
            "status",
            "error",
            "outcome",
            "parent_version",
            "edits",
            "created_at",
            "updated_at",
        }
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update {sorted(bad)}")
        self.get(version_id)
        fields.setdefault("updated_at", now())
        sets, params = [], []
        for k, v in fields.items():
            sets.append(f"{k} = ?")
            if k in ("draft_edit", "outcome"):
                v = to_json(v)
            elif k == "edits":
                v = to_json([e.model_dump(exclude_defaults=True) for e in v]) if v else None
            params.append(v)
        try:
            with self._database.transaction():
                self._database.db.execute(f"update versions set {', '.join(sets)} where id = ?", params + [version_id])
        except DatabaseFailure as exc:  # a frozen version's path and outcome never change
            raise _frozen(self.ref(self.get(version_id)), exc) from None
        return self.get(version_id)

    def set_current(self, episode_id: int, version_id: int) -> None:
        """Make the version the episode's current one. Raises StoreError for a version not of the
        episode."""
        self.get(version_id, episode_id)
        with self._database.transaction():
            self._episodes.point_current(episode_id, version_id)

    # ------------------------------------------------------------------ steps
    def _insert_step(
        self, s: Step, episode_id: int, parent_id: int | None, call_ids: list[int] | None = None, conn: Any = None
    ) -> Step:
        """Insert the step as a row of `episode_id` after `parent_id` (None: a first step) with
        these `call_ids` (None: the step's own); the stored step (one copy of `s`). `conn`:
        this thread's connection when the caller has it at hand."""
        # steps and calls are the hot path of every step: plain statements (sqlite-utils'
        # insert costs ~50 us a row) with their values taken from the step as it is (a
        # validated record: no dump of its own); the rarer rows go through its table API
        call_ids = s.call_ids if call_ids is None else call_ids
        sid = (
            (conn or self._database.db.conn)
            .execute(
                "insert into steps (episode_id, parent_id, idx, thought, action, observation, done, reward, info, "
                "source, edit, call_ids, snapshot, created_at, signals, reasoning, tool_call, message) "
                "values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    episode_id,
                    parent_id,
                    s.index,
                    s.thought,
                    s.action,
                    s.observation,
                    int(s.done),
                    s.reward or None,
                    compact_json(s.info) if s.info else None,
                    s.source,
                    to_json(s.edit) if s.edit is not None else None,
                    compact_json(call_ids) if call_ids else None,
                    compact_json(s.snapshot) if s.snapshot is not None else None,
                    s.created_at,
                    compact_json(s.signals) if s.signals else None,
                    s.reasoning,
                    to_json(s.tool_call) if s.tool_call is not None else None,
                    compact_json(s.message) if s.message is not None else None,
                ),
            )
            .lastrowid
        )
        upd = {"id": sid, "episode_id": episode_id, "parent_id": parent_id}
        if call_ids is not s.call_ids:
            upd["call_ids"] = call_ids
        return replaced(s, upd)

    def step(self, step_id: int) -> Step:
        """The stored step. Raises StoreError for an unknown id."""
        r = self._database.db.execute(f"select {SCOLS} from steps where id = ?", [step_id]).fetchone()
        if r is None:
            raise StoreError(f"unknown step {step_id}")
        return step_from_row(r)

    def path(self, leaf_step_id: int | None) -> list[Step]:
        """Root -> leaf, following parent pointers (one recursive query)."""
        if leaf_step_id is None:
            return []
        rows = self._database.db.conn.execute(_PATH_SQL, (leaf_step_id,)).fetchall()
        return [step_from_row(r) for r in rows]

    def steps(self, version_id: int) -> list[Step]:
        """The version's steps, first to last. Raises StoreError for an unknown version."""
        return self.path(self.get(version_id).leaf_step_id)

    def children(self, step_id: int | None, episode_id: int) -> list[Step]:
        """The steps stored right after `step_id` (None: the episode's first steps), oldest first."""
        if step_id is None:
            rows = self._database.db.execute(
                f"select {SCOLS} from steps where episode_id = ? and parent_id is null order by id", [episode_id]
            )
        else:
            rows = self._database.db.execute(f"select {SCOLS} from steps where parent_id = ? order by id", [step_id])
        return [step_from_row(r) for r in rows]

    def append(
        self,
        version_id: int,
        steps: Iterable[Step],
        calls: Iterable[ModelCall] = (),
        *,
        status: str | None = None,
        outcome: Outcome | None = None,
        error: str | None | EllipsisType = ...,
        clear_draft: bool = False,
        expected_leaf: int | None | EllipsisType = ...,
        known: Version | None = None,
        fence: Fence | None = None,
    ) -> tuple[list[Step], Version]:
        """Record new steps at the end of a version, with the model calls that produced
        them, and move the version's leaf - all in one transaction. Steps' `call_ids` may
        hold negative placeholders -1, -2, ... meaning "the 1st, 2nd call in `calls`".

        A frozen version refuses (VersionFrozen: the store's trigger, whoever writes).
        Compare-and-set: with `expected_leaf` (the leaf the steps were computed from), a
        version whose leaf moved meanwhile raises VersionChanged and nothing is written.
        `known`: the caller's copy of the version row (a step has just read it), used with
        `expected_leaf` instead of reading it again: the update is compare-and-set anyway.
        The version returned then carries the caller's copy of the fields this does not
        write (its name, edits), which a reader of those reads from the store.
        `fence` (an experiment item's claim): checked in the statement that moves the leaf,
        so a claim taken over while the step was computed lands nothing (`fence.lost()`)."""
        out: list[Step] = []
        with self._database.transaction():
            v = known if known is not None and _still(known, version_id, expected_leaf) else self.get(version_id)
            parent = v.leaf_step_id
            if expected_leaf is not ... and parent != expected_leaf:
                raise _changed(self.ref(v))
            steps = self._signed(v.episode_id, parent, steps)
            conn = self._database.db.conn
            call_ids = [self._calls.insert(c, v.episode_id, conn) for c in calls]
            for s in steps:
                ids = [call_ids[-c - 1] if c < 0 else c for c in s.call_ids]
                row = self._insert_step(s, v.episode_id, parent, ids, conn)
                out.append(row)
                parent = row.id
            sets, params = _leaf_update(parent, status, outcome, error, clear_draft)
            where = "where id = ? and leaf_step_id is ?" + (f" and {fence.sql}" if fence is not None else "")
            try:
                cur = conn.execute(
                    f"update versions set {', '.join(sets)} {where}",
                    params + [version_id, v.leaf_step_id] + (fence.params if fence is not None else []),
                )
            except DatabaseFailure as exc:  # frozen: nothing of this is written
                raise _frozen(self.ref(v), exc) from None
            if cur.rowcount != 1:
                if fence is not None:
                    fence.check(conn)  # (the fence first: a claim lost is why, whatever else moved)
                raise _changed(self.ref(v))
        return out, _written(v, parent, params, status, outcome, error, clear_draft)

    def branch(
        self,
        parent: Version,
        *,
        at_step: Step | None,
        steps: Iterable[Step] = (),
        config: AgentConfig | None = None,
        exemplar_rev: int | None = None,
        set_default: bool = True,
        make_current: bool = True,
        **fields: Any,
    ) -> tuple[Version, list[Step]]:
        """A new version whose path is root..`at_step` (shared, not copied) followed by
        `steps` (new rows). It becomes the episode's current version (unless
        `make_current` is False: rollouts never move the current version). It runs with the
        parent's config and exemplars unless `config` (and `exemplar_rev`) say otherwise;
        `set_default` makes that config the episode's default too (not for rollouts)."""
        steps = self._signed(parent.episode_id, at_step.id if at_step else None, steps)
        out: list[Step] = []
        with self._database.transaction():
            prev = at_step.id if at_step else None
            for s in steps:
                row = self._insert_step(s, parent.episode_id, prev)
                out.append(row)
                prev = row.id
            pin: dict[str, Any] = {"pin_from": parent.id}
            if config is not None:
                pin = {"config_id": self._episodes.config_row(config), "exemplar_rev": exemplar_rev}
                if set_default:
                    self._episodes.point_config(parent.episode_id, pin["config_id"])
            v = self.insert(
                Version(episode_id=parent.episode_id, parent_version=parent.id, leaf_step_id=prev, **fields), **pin
            )
            if make_current:
                self._episodes.point_current(parent.episode_id, cast(int, v.id))  # (a version just written)
        return v, out

    def _signed(self, episode_id: int, parent_id: int | None, steps: Iterable[Step]) -> list[Step]:
        """The steps with their signals: those the caller did not compute (imports, thought
        edits; the engine computes its own, it knows the admissible commands) are computed
        here from the path before them."""
        steps = list(steps)
        if all(s.signals is not None for s in steps):
            return steps
        task = self._episodes.get(episode_id).task
        state = PathState.start(task.env, task.text)
        for s in self.path(parent_id):
            state = state.then(s)
        out = []
        for s in steps:
            if s.signals is None:
                s = s.model_copy(update={"signals": state.signals(s)})
            out.append(s)
            state = state.then(s)
        return out


def _written(
    v: Version, leaf: int | None, params: list[Any], status: str | None, outcome: Any, error: Any, clear_draft: bool
) -> Version:
    """The version row `append_steps` just wrote, without reading it back: the same fields
    the update set (`params`: `_leaf_update`'s, the outcome's JSON among them)."""
    upd: dict[str, Any] = {"leaf_step_id": leaf, "updated_at": params[1]}
    if status is not None:
        upd["status"] = status
    if outcome is not None:  # as a reader of the row would get it (from the JSON just written)
        upd["outcome"] = Outcome.model_validate_json(params[3 if status is not None else 2])
    if error is not ...:
        upd["error"] = error
    if clear_draft:
        upd.update(draft_thought=None, draft_edit=None)
    return replaced(v, upd)


def _leaf_update(
    leaf: int | None, status: str | None, outcome: Outcome | None, error: Any, clear_draft: bool
) -> tuple[list[str], list[Any]]:
    """The SET clauses and parameters that move a version's leaf with the fields a step
    writes beside it (`error` is `...` when untouched)."""
    sets = ["leaf_step_id = ?", "updated_at = ?"]
    params: list[Any] = [leaf, now()]
    if status is not None:
        sets.append("status = ?")
        params.append(status)
    if outcome is not None:
        sets.append("outcome = ?")
        params.append(to_json(outcome))
    if error is not ...:
        sets.append("error = ?")
        params.append(error)
    if clear_draft:
        sets.append("draft_thought = null, draft_edit = null")
    return sets, params


def _still(known: Version, version_id: int, expected_leaf: int | None | EllipsisType) -> bool:
    """Whether the caller's copy of the version serves `append`: that version, at the leaf expected."""
    return known.id == version_id and expected_leaf is not ... and known.leaf_step_id == expected_leaf
