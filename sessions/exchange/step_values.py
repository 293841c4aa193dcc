"""Step values (`export --format steps`): TRL's stepwise-supervision form - `prompt` (the task),
`completions` (the steps, each in its family's text form) and `labels` (one bool per step) -
with the measured Monte-Carlo value of each step's prefix beside the labels (the Math-Shepherd
construction: the share of rollouts from that prefix that succeed).

A rollout group measures a prefix: a `resample` or a what-if's `control` group from step K of
a version keeps its steps 1..K-1, so it measures the prefix ending at step K-1; a `treatment`
group measures the prefix ending at the edited step K of the person's version that carries the
same edit (a version made by that edit at K from the group's source). Groups that measure the
same prefix are summed. The label of a measured step is Math-Shepherd's hard estimate, "some
rollout from here succeeded" (rate > 0); a step between measured ones takes the label of the
next measured step on its path (its `rates` entry is null and its `n` 0, so a trainer can
drop it). A record ends at its last measured step; a path with no measured step is left out,
and a prefix measured on several selected versions is one record.
"""

from __future__ import annotations

from typing import Any, Iterator

from sessions.exchange.selection import EpisodeBatch
from sessions.exchange.training_options import Counts
from sessions.exchange.tree_facts import Facts, wilson_of
from sessions.row_records import StepRow, stored_id
from trajectory import kinds
from trajectory.records import Version


def prefix_values(facts: Facts, paths: dict[int, list[StepRow]], versions: dict[int, Version]) -> dict[int, list[int]]:
    """{step id: [successes, finished]} of every prefix the episode's groups measure."""
    out: dict[int, list[int]] = {}

    def add(sid: int, g: Any) -> None:
        v = out.setdefault(sid, [0, 0])
        v[0] += g.successes
        v[1] += g.finished

    for g in facts.groups:
        if not g.finished or g.source_version not in paths:
            continue
        if g.kind in ("resample", "control"):
            path = paths[g.source_version]
            if 2 <= g.step <= len(path) + 1:
                add(path[g.step - 2].id, g)
            continue
        for v in versions.values():  # a treatment: the person's version that made the same edit
            e = v.edits[-1] if v.edits else None
            if (
                e is None
                or v.parent_version != g.source_version
                or e.index != g.step
                or g.edit is None
                or e.kind != g.edit.kind
                or v.id in facts.rollouts
            ):
                continue
            path = paths.get(stored_id(v.id), [])
            if len(path) >= g.step:
                s = path[g.step - 1]
                if (g.edit.text or None) == (
                    (s.action if e.kind == "rewrite_action" else s.thought) if e.kind != "delete_thought" else None
                ):
                    add(s.id, g)
                    break
    return out


def value_records(
    batch: EpisodeBatch, facts: Facts, paths: dict[int, list[StepRow]], versions: dict[int, Version], counts: Counts
) -> Iterator[dict[str, Any]]:
    ep = batch.episode
    values = prefix_values(facts, paths, versions)
    transcript = kinds.transcript(ep.task.env)
    todo: dict[tuple[int, ...], tuple[Version, list[StepRow], list[int]]] = {}
    for v in batch.versions:
        path = batch.paths[stored_id(v.id)]
        measured = [i for i, s in enumerate(path) if s.id in values]
        if not measured:
            counts.leave_out("version: no rollouts from any of its prefixes")
            continue
        key = tuple(s.id for s in path[: measured[-1] + 1])
        if key in todo:
            counts.leave_out("version: the same measured prefix as another version's record")
            continue
        todo[key] = (v, path, measured)
    longer = {key[:n] for key in todo for n in range(1, len(key))}
    for key, (v, path, measured) in todo.items():
        if key in longer:  # a rollout that kept this prefix: the longer path's record holds it
            counts.leave_out("version: its measured prefix is part of a longer record")
            continue
        end = len(key)
        rates: list[float | None] = []
        ns: list[int] = []
        lows: list[float | None] = []
        highs: list[float | None] = []
        for s in path[:end]:
            k, n = values.get(s.id, (0, 0))
            ci = wilson_of(k, n)
            rates.append(k / n if n else None)
            ns.append(n)
            lows.append(ci[0] if ci else None)
            highs.append(ci[1] if ci else None)
        labels: list[bool] = [False] * end
        nxt = False
        for i in range(end - 1, -1, -1):
            rate = rates[i]
            if rate is not None:  # measured: ns[i] > 0
                nxt = rate > 0
            labels[i] = nxt
        counts.wrote()
        yield {
            "prompt": ep.task.text,
            "completions": [transcript.step_text(s) for s in path[:end]],
            "labels": labels,
            "rates": rates,
            "n": ns,
            "ci95_low": lows,
            "ci95_high": highs,
            "metadata": {
                "episode": ep.id,
                "task": f"{ep.task.env}:{ep.task.id}",
                "version": facts.label(stored_id(v.id)),
                "version_id": v.id,
                "measured_steps": [i + 1 for i in measured],
            },
        }
