"""What the training exports (dpo, kto, steps) read from an episode's tree besides its paths:
the latest verdict of each version, the latest tags of each step, the rollout groups with their
finished counts and members, people's judgments and the version labels - read a chunk of
episodes at a time with a few set-based queries (`load`), never one per version."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from sessions import annotations as anno
from sessions import numbering
from sessions.rollouts import RolloutEdit
from sessions.store import Store
from trajectory.records import Judgment


@dataclass
class Group:
    """A rollout group as the exports use it: what it samples and its finished counts."""

    id: int
    source_version: int
    step: int
    kind: str  # resample | control | treatment
    edit: RolloutEdit | None
    config: str  # the config's JSON (control and treatment of one what-if share it)
    finished: int
    successes: int


@dataclass
class Facts:
    """One episode's annotations, groups, judgments and labels."""

    verdicts: dict[int, str | None] = field(default_factory=dict)  # version -> latest verdict
    tags: dict[int, set[str]] = field(default_factory=dict)  # step -> latest tags
    groups: list[Group] = field(default_factory=list)
    rollouts: set[int] = field(default_factory=set)  # versions that are group members
    judgments: list[Judgment] = field(default_factory=list)
    labels: dict[int, str] = field(default_factory=dict)  # version -> "v3" / "r2"

    def label(self, vid: int) -> str:
        return self.labels.get(vid, f"#{vid}")


def _marks(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def load(store: Store, episode_ids: Iterable[int]) -> dict[int, Facts]:
    """Facts of these episodes (a chunk: every query takes them all)."""
    ids = sorted(set(episode_ids))
    out = {e: Facts() for e in ids}
    if not ids:
        return out
    db, q = store.db, _marks(ids)
    vrows = db.execute(
        f"select id, episode_id, parent_version from versions where episode_id in ({q}) order by id", ids
    ).fetchall()
    parents: dict[int, dict[int, int | None]] = {}
    episode_of: dict[int, int] = {}
    for vid, ep, parent in vrows:
        parents.setdefault(ep, {})[vid] = parent
        episode_of[vid] = ep
    for vid, hist in anno.version_histories(store, list(episode_of)).items():
        if hist:
            out[episode_of[vid]].verdicts[vid] = hist[-1].verdict
    # step ids are unique across episodes: the chunk's tags are one dict every episode reads
    tags = {sid: set(hist[-1].tags) for sid, hist in anno.step_histories(store, ids).items() if hist and hist[-1].tags}
    for f in out.values():
        f.tags = tags
    grows = db.execute(
        f"select id, episode_id, source_version, step, kind, edit, config, finished, successes "
        f"from rollout_groups where episode_id in ({q}) order by id",
        ids,
    ).fetchall()
    for gid, ep, src, k, kind, edit, config, fin, succ in grows:
        out[ep].groups.append(
            Group(
                gid,
                src,
                k,
                kind,
                RolloutEdit.model_validate_json(edit) if edit else None,
                _canonical(config),
                int(fin or 0),
                int(succ or 0),
            )
        )
    mrows = db.execute(
        f"select g.episode_id, m.version_id from rollout_members m join rollout_groups g "
        f"on g.id = m.group_id where g.episode_id in ({q})",
        ids,
    ).fetchall()
    for ep, vid in mrows:
        out[ep].rollouts.add(vid)
    for j in store.judgments.of_versions(list(episode_of)):
        if j.episode_id in out:
            out[j.episode_id].judgments.append(j)
    for ep in ids:  # (an episode without rollouts asks numbering no query: its versions are v1, v2, ...)
        rollouts = out[ep].rollouts
        out[ep].labels = numbering.labels(store, ep) if rollouts else numbering.label_map(parents.get(ep, {}), set())
    return out


def _canonical(config: str | None) -> str:
    try:
        return json.dumps(json.loads(config or "{}"), sort_keys=True)
    except ValueError:  # pragma: no cover - the store wrote it
        return config or ""


def wilson_of(successes: int, n: int) -> tuple[float, float] | None:
    """The Wilson 95% interval of a rate (None without a finished rollout)."""
    from trajectory.stats import wilson

    return wilson(successes, n) if n else None


def value_json(successes: int, n: int) -> dict[str, Any]:
    ci = wilson_of(successes, n)
    return {"rate": successes / n if n else None, "n": n, "successes": successes, "ci95": list(ci) if ci else None}
