"""The version tree's part of the Store: versions (pointers to a leaf step, with the config
and exemplar revision they run with), steps (never updated; a row points at its parent),
appends compare-and-set on the leaf, branches, and the tree reads search and signals use."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from sessions.connection import DatabaseFailure, StoreError, _changed, _frozen, _ids, to_json, from_json
from sessions.rows import EpisodeTree, StepRow
from trajectory.records import AgentConfig, EditInfo, ModelCall, Outcome, Step, Version, now
from trajectory.signals import STEP_LIMIT, PathState


class Versions:
    """Part of `sessions.store.Store` (uses its database, transactions and episodes)."""

    # ------------------------------------------------------------------ versions
    def _insert_version(self, v: Version, *, config_id: int | None = None, exemplar_rev: int | None = None,
                        pin_from: int | None = None) -> Version:
        """A version pins the config (and exemplar-set revision) it runs with: given ones,
        else those of `pin_from` (the version it continues), else the episode's config."""
        if config_id is None and pin_from is not None:
            row = self.db.execute("select config_id, exemplar_rev from versions where id = ?", [pin_from]).fetchone()
            config_id, exemplar_rev = row or (None, None)
        if config_id is None:
            row = self.db.execute("select config_id from episodes where id = ?", [v.episode_id]).fetchone()
            if row is None:
                raise StoreError(f"unknown episode {v.episode_id}")
            config_id = row[0]
        row = {
            "episode_id": v.episode_id,
            "parent_version": v.parent_version,
            "leaf_step_id": v.leaf_step_id,
            "draft_thought": v.draft_thought,
            "draft_edit": to_json(v.draft_edit),
            "edits": to_json([e.model_dump(exclude_defaults=True) for e in v.edits]) if v.edits else None,
            "name": v.name,
            "status": v.status,
            "error": v.error,
            "outcome": to_json(v.outcome),
            "created_at": v.created_at,
            "updated_at": v.updated_at,
            "config_id": config_id,
            "exemplar_rev": exemplar_rev,
        }
        vid = self._insert("versions", row)
        return v.model_copy(update={"id": vid})

    def create_version(self, v: Version, *, make_current: bool = True) -> Version:
        with self.transaction():
            out = self._insert_version(v, pin_from=v.parent_version)
            if make_current:
                self.db.execute("update episodes set current_version = ? where id = ?", [out.id, v.episode_id])
        return out

    def version_config(self, version_id: int) -> AgentConfig:
        """The agent config a version runs with (pinned when it was created)."""
        r = self.db.execute(
            "select c.json from versions v join configs c on c.id = coalesce(v.config_id, "
            "(select e.config_id from episodes e where e.id = v.episode_id)) where v.id = ?",
            [version_id],
        ).fetchone()
        if r is None:
            raise StoreError(f"unknown version {version_id}")
        return AgentConfig.model_validate_json(r[0])

    def exemplar_revision(self, version_id: int) -> int | None:
        """The exemplar-set revision a version's prompts use (None: not pinned yet / built-in)."""
        r = self.db.execute("select exemplar_rev from versions where id = ?", [version_id]).fetchone()
        if r is None:
            raise StoreError(f"unknown version {version_id}")
        return r[0]

    def pin_exemplar_revision(self, version_id: int, revision_id: int) -> None:
        """Pin a version's exemplars the first time they are used (never changed after)."""
        with self.transaction():
            self.db.execute("update versions set exemplar_rev = ? where id = ? and exemplar_rev is null",
                            [revision_id, version_id])

    def _ep_ref(self, v: Version) -> str:
        """`EP:N` of a version, for a message people read (its per-episode number)."""
        ids = self.versions.ids(v.episode_id)
        return f"{v.episode_id}:{ids.index(v.id) + 1}" if v.id in ids else str(v.id)

    def version_ids(self, episode_id: int) -> list[int]:
        """An episode's version ids in the order they were made (per-episode numbering)."""
        return [int(r[0]) for r in self.db.execute("select id from versions where episode_id = ? order by id",
                                                   [episode_id])]

    def recorded_edits(self, episode_ids: Iterable[int]) -> Iterator[tuple[int, list[dict]]]:
        """(episode id, a version's edit records) for every version with edits, of many
        episodes in few queries."""
        ids = [int(i) for i in episode_ids]
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            rows = self.db.execute(
                "select episode_id, edits from versions where edits is not null and edits not in ('', '[]') "
                f"and episode_id in ({','.join('?' * len(chunk))})", chunk).fetchall()
            for ep, edits in rows:
                yield int(ep), json.loads(edits) or []

    def has_child_version(self, version_id: int) -> bool:
        return self.db.execute("select 1 from versions where parent_version = ? limit 1", [version_id]).fetchone() is not None

    _VCOLS = (
        "id, episode_id, parent_version, leaf_step_id, draft_thought, draft_edit, edits, name, status, "
        "error, outcome, created_at, updated_at"
    )

    def _version_from_row(self, r) -> Version:
        # A row this store wrote is trusted: construct without re-validating (hot: every step reads one).
        return Version.model_construct(
            id=r[0],
            episode_id=r[1],
            parent_version=r[2],
            leaf_step_id=r[3],
            draft_thought=r[4],
            draft_edit=EditInfo.model_validate_json(r[5]) if r[5] else None,
            edits=[EditInfo.model_validate(e) for e in from_json(r[6], [])],
            name=r[7],
            status=r[8],
            error=r[9],
            outcome=Outcome.model_validate_json(r[10]) if r[10] else Outcome(),
            created_at=r[11],
            updated_at=r[12],
        )

    def version(self, version_id: int, episode_id: int | None = None) -> Version:
        r = self.db.execute(f"select {self._VCOLS} from versions where id = ?", [version_id]).fetchone()
        if r is None or (episode_id is not None and r[1] != episode_id):
            where = f" of episode {episode_id}" if episode_id is not None else ""
            raise StoreError(f"unknown version {version_id}{where}")
        return self._version_from_row(r)

    def versions(self, episode_id: int) -> list[Version]:
        self.episode(episode_id)
        return [
            self._version_from_row(r)
            for r in self.db.execute(f"select {self._VCOLS} from versions where episode_id = ? order by id", [episode_id])
        ]

    def update_version(self, version_id: int, **fields: Any) -> Version:
        """Move a version's pointer or record its status/outcome/name (a version is a
        pointer; the steps it points at never change). An import may also set its lineage
        and timestamps; otherwise `updated_at` becomes now."""
        allowed = {"leaf_step_id", "draft_thought", "draft_edit", "name", "status", "error", "outcome",
                   "parent_version", "edits", "created_at", "updated_at"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update {sorted(bad)}")
        self.version(version_id)
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
            with self.transaction():
                self.db.execute(f"update versions set {', '.join(sets)} where id = ?", params + [version_id])
        except DatabaseFailure as exc:  # a frozen version's path and outcome never change
            raise _frozen(self._ep_ref(self.version(version_id)), exc) from None
        return self.version(version_id)

    def set_current_version(self, episode_id: int, version_id: int) -> None:
        self.version(version_id, episode_id)
        with self.transaction():
            self.db.execute("update episodes set current_version = ? where id = ?", [version_id, episode_id])

    # ------------------------------------------------------------------ steps
    _SCOLS = (
        "id, episode_id, parent_id, idx, thought, action, observation, done, reward, info, source, "
        "edit, call_ids, snapshot, created_at, signals"
    )

    @staticmethod
    def _step_fields(r, infos: dict[str, dict] | None = None) -> tuple:
        """A steps row (`_SCOLS`) as the values of `StepRow`'s fields, in order."""
        sid, eid, parent, idx, thought, action, obs, done, reward, info, source, edit, calls, snap, at, sig = r
        if infos is None or info is None:
            info = from_json(info, {})
        else:
            info = infos[info] if info in infos else infos.setdefault(info, json.loads(info))
        return (sid, eid, parent, idx, thought, action, obs, bool(done), reward or 0.0, info, source,
                EditInfo.model_validate_json(edit) if edit else None, _ids(calls),
                json.loads(snap) if snap else None, at, json.loads(sig) if sig else [])

    def _step_from_row(self, r) -> Step:
        return Step(**dict(zip(StepRow._fields, self._step_fields(r))))

    def _insert_step(self, s: Step) -> Step:
        # steps and calls are the hot path of every step: plain statements (sqlite-utils'
        # insert costs ~50 us a row); the rarer rows go through its table API
        sid = self.db.execute(
            "insert into steps (episode_id, parent_id, idx, thought, action, observation, done, reward, info, "
            "source, edit, call_ids, snapshot, created_at, signals) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                s.episode_id,
                s.parent_id,
                s.index,
                s.thought,
                s.action,
                s.observation,
                int(s.done),
                s.reward or None,
                to_json(s.info) if s.info else None,
                s.source,
                to_json(s.edit),
                to_json(s.call_ids) if s.call_ids else None,
                to_json(s.snapshot),
                s.created_at,
                to_json(s.signals) if s.signals else None,
            ],
        ).lastrowid
        return s.model_copy(update={"id": sid})

    def step(self, step_id: int) -> Step:
        r = self.db.execute(f"select {self._SCOLS} from steps where id = ?", [step_id]).fetchone()
        if r is None:
            raise StoreError(f"unknown step {step_id}")
        return self._step_from_row(r)

    def path(self, leaf_step_id: int | None) -> list[Step]:
        """Root -> leaf, following parent pointers (one recursive query)."""
        if leaf_step_id is None:
            return []
        rows = self.db.execute(
            "with recursive p(id, depth) as (select ?, 0 union all "
            "select s.parent_id, p.depth + 1 from steps s join p on s.id = p.id where s.parent_id is not null) "
            f"select {', '.join('s.' + c.strip() for c in self._SCOLS.split(','))} "
            "from p join steps s on s.id = p.id order by p.depth desc",
            [leaf_step_id],
        ).fetchall()
        return [self._step_from_row(r) for r in rows]

    def version_steps(self, version_id: int) -> list[Step]:
        return self.path(self.version(version_id).leaf_step_id)

    def children(self, step_id: int | None, episode_id: int) -> list[Step]:
        if step_id is None:
            rows = self.db.execute(
                f"select {self._SCOLS} from steps where episode_id = ? and parent_id is null order by id", [episode_id]
            )
        else:
            rows = self.db.execute(f"select {self._SCOLS} from steps where parent_id = ? order by id", [step_id])
        return [self._step_from_row(r) for r in rows]

    def append_steps(
        self,
        version_id: int,
        steps: Iterable[Step],
        calls: Iterable[ModelCall] = (),
        *,
        status: str | None = None,
        outcome: Outcome | None = None,
        error: str | None = ...,  # type: ignore[assignment]
        clear_draft: bool = False,
        expected_leaf: int | None = ...,  # type: ignore[assignment]
        known: Version | None = None,
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
        write (its name, edits), which a reader of those reads from the store."""
        out: list[Step] = []
        with self.transaction():
            usable = known is not None and known.id == version_id and expected_leaf is not ... \
                and known.leaf_step_id == expected_leaf
            v = known if usable else self.version(version_id)
            parent = v.leaf_step_id
            if expected_leaf is not ... and parent != expected_leaf:
                raise _changed(self._ep_ref(v))
            steps = self._signed(v.episode_id, parent, steps)
            call_ids = [self._insert_call(c, v.episode_id) for c in calls]
            for s in steps:
                ids = [call_ids[-c - 1] if c < 0 else c for c in s.call_ids]
                row = self._insert_step(
                    s.model_copy(update={"episode_id": v.episode_id, "parent_id": parent, "call_ids": ids})
                )
                out.append(row)
                parent = row.id
            sets, params = _leaf_update(parent, status, outcome, error, clear_draft)
            try:
                cur = self.db.execute(f"update versions set {', '.join(sets)} where id = ? and leaf_step_id is ?",
                                      params + [version_id, v.leaf_step_id])
            except DatabaseFailure as exc:  # frozen: nothing of this is written
                raise _frozen(self._ep_ref(v), exc) from None
            if cur.rowcount != 1:
                raise _changed(self._ep_ref(v))
        return out, _written(v, parent, params[1], status, outcome, error, clear_draft)

    def branch(self, parent: Version, *, at_step: Step | None, steps: Iterable[Step] = (),
               config: AgentConfig | None = None, exemplar_rev: int | None = None, set_default: bool = True,
               make_current: bool = True, **fields: Any) -> tuple[Version, list[Step]]:
        """A new version whose path is root..`at_step` (shared, not copied) followed by
        `steps` (new rows). It becomes the episode's current version (unless
        `make_current` is False: rollouts never move the current version). It runs with the
        parent's config and exemplars unless `config` (and `exemplar_rev`) say otherwise;
        `set_default` makes that config the episode's default too (not for rollouts)."""
        steps = self._signed(parent.episode_id, at_step.id if at_step else None, steps)
        out: list[Step] = []
        with self.transaction():
            prev = at_step.id if at_step else None
            for s in steps:
                row = self._insert_step(s.model_copy(update={"episode_id": parent.episode_id, "parent_id": prev}))
                out.append(row)
                prev = row.id
            pin: dict[str, Any] = {"pin_from": parent.id}
            if config is not None:
                pin = {"config_id": self._config_row(config), "exemplar_rev": exemplar_rev}
                if set_default:
                    self.db.execute("update episodes set config_id = ? where id = ?", [pin["config_id"], parent.episode_id])
            v = self._insert_version(
                Version(episode_id=parent.episode_id, parent_version=parent.id, leaf_step_id=prev, **fields), **pin
            )
            if make_current:
                self.db.execute("update episodes set current_version = ? where id = ?", [v.id, parent.episode_id])
        return v, out

    def _signed(self, episode_id: int, parent_id: int | None, steps: Iterable[Step]) -> list[Step]:
        """The steps with their signals: those the caller did not compute (imports, thought
        edits; the engine computes its own, it knows the admissible commands) are computed
        here from the path before them."""
        steps = list(steps)
        if all(s.signals is not None for s in steps):
            return steps
        task = self.episode(episode_id).task
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

    # ------------------------------------------------------------------ trees (search, signals)
    def episode_trees(self, episode_ids: Iterable[int]) -> dict[int, "EpisodeTree"]:
        """The version trees of many episodes in three queries: what maps a step hit to the
        versions holding it and a version to the signals it carries."""
        out: dict[int, EpisodeTree] = {}
        ids = sorted(set(episode_ids))
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = ",".join("?" * len(chunk))
            for eid, env, typ, cur in self.db.execute(
                f"select e.id, t.env, t.type, e.current_version from episodes e join tasks t on t.id = e.task_id "
                f"where e.id in ({q})", chunk):
                out[eid] = EpisodeTree(eid, env, typ, cur)
            for vid, eid, leaf, oc in self.db.execute(
                f"select id, episode_id, leaf_step_id, outcome from versions where episode_id in ({q})", chunk):
                out[eid].versions[vid] = (leaf, Outcome.model_validate_json(oc) if oc else Outcome())
            for sid, eid, parent, idx, sig in self.db.execute(
                f"select id, episode_id, parent_id, idx, signals from steps where episode_id in ({q})", chunk):
                out[eid].steps[sid] = (parent, idx, from_json(sig, []))
        return out

    _OWNERS = {
        "step": "select id, episode_id from steps where id in ({})",
        "version": "select id, episode_id from versions where id in ({})",
        "task": "select task_id, id from episodes where task_id in ({}) order by id desc",
    }

    def episodes_of(self, kind: str, ids: Iterable[int]) -> dict[int, list[int]]:
        """The episode(s) each step / version / task id belongs to (a task: newest first)."""
        out: dict[int, list[int]] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            for key, eid in self.db.execute(self._OWNERS[kind].format(",".join("?" * len(chunk))), chunk):
                out.setdefault(key, []).append(eid)
        return out

    _OUTCOME_SQL = {  # a version's automatic outcome, as search filters it
        "success": "coalesce(json_extract(outcome, '$.success'), 0) = 1",
        "failure": "coalesce(json_extract(outcome, '$.done'), 0) = 1 and coalesce(json_extract(outcome, '$.success'), 0) != 1",
        "unfinished": "coalesce(json_extract(outcome, '$.done'), 0) = 0",
    }

    def episodes_with_outcome(self, outcome: str) -> set[int]:
        """Episodes with at least one version of this outcome (success, failure, unfinished)."""
        return {r[0] for r in self.db.execute(f"select episode_id from versions where {self._OUTCOME_SQL[outcome]}")}

    def episodes_flagged(self, signal: str) -> set[int]:
        """Episodes that may carry `signal` (a superset: a flagged step, or a version ended
        at its limit); `EpisodeTree.signals` decides per version."""
        if signal == STEP_LIMIT:
            sql, params = "select episode_id from versions where json_extract(outcome, '$.metrics.limit')", []
        else:
            sql, params = "select episode_id from steps where signals is not null and signals like ?", [f'%"{signal}"%']
        return {r[0] for r in self.db.execute(sql, params)}


def _written(v: Version, leaf: int | None, updated_at: str, status: str | None, outcome: Any, error: Any,
             clear_draft: bool) -> Version:
    """The version row `append_steps` just wrote, without reading it back: the same fields
    the update set."""
    upd: dict[str, Any] = {"leaf_step_id": leaf, "updated_at": updated_at}
    if status is not None:
        upd["status"] = status
    if outcome is not None:
        upd["outcome"] = Outcome.model_validate_json(to_json(outcome))
    if error is not ...:
        upd["error"] = error
    if clear_draft:
        upd.update(draft_thought=None, draft_edit=None)
    return v.model_copy(update=upd)


def _leaf_update(leaf: int | None, status: str | None, outcome: Outcome | None, error: Any,
                 clear_draft: bool) -> tuple[list[str], list[Any]]:
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
