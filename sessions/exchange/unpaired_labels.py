"""Unpaired labels (`export --format kto`): TRL's conversational unpaired-preference form,
`prompt` / `completion` / `label` (bool), per trajectory or per step.

A trajectory's label: a person's verdict (success -> true, failure -> false; unsure is left
out), else the environment's outcome (a success -> true, a finished failure -> false; a run
not finished is left out). A step's label: its latest tags first (a negative tag -> false, a
positive one -> true), else the label of every selected trajectory through it when they agree
(a step on both a successful and a failed path is left out). A step shared by several versions
is one record, and so are steps that say the same in the same context (rollouts that sampled
the same text).
"""

from __future__ import annotations

from typing import Any, Iterator

from sessions.annotations import NEGATIVE_TAGS, POSITIVE_TAGS
from sessions.exchange.jsonl_encoder import _dumps
from sessions.exchange.messages import Conversations, Message, ends_on_assistant, style_of
from sessions.exchange.selection import EpisodeBatch
from sessions.exchange.training_options import Counts, TrainingOptions
from sessions.exchange.tree_facts import Facts
from sessions.row_records import stored_id
from trajectory.records import Version


def trajectory_label(v: Version, verdict: str | None) -> tuple[bool | None, str]:
    """(label or None, where it comes from or why there is none)."""
    if verdict == "success":
        return True, "verdict"
    if verdict == "failure":
        return False, "verdict"
    if verdict == "unsure":
        return None, "the verdict is unsure"
    if v.outcome.done:
        return v.outcome.success is True, "outcome"
    return None, "not finished and no verdict"


def label_records(
    batch: EpisodeBatch, facts: Facts, conv: Conversations, opts: TrainingOptions, counts: Counts
) -> Iterator[dict[str, Any]]:
    ep = batch.episode
    style = style_of(ep.config.api_style)
    tools = conv.tools(ep.task.env) if style == "tools" else None
    labels: dict[int, tuple[bool | None, str]] = {}
    for v in batch.versions:
        labels[stored_id(v.id)] = trajectory_label(v, facts.verdicts.get(stored_id(v.id)))
    if opts.unit == "trajectory":
        yield from _trajectory_records(batch, facts, conv, labels, style, counts)
        return
    # per step: the labels of the trajectories through each step, then one record per step
    through: dict[int, set[bool]] = {}
    first: dict[int, tuple[Version, int]] = {}
    for v in batch.versions:
        label = labels[stored_id(v.id)][0]
        for i, s in enumerate(batch.paths[stored_id(v.id)]):
            first.setdefault(s.id, (v, i))
            if label is not None:
                through.setdefault(s.id, set()).add(label)
    cuts: dict[int, tuple[list[Message], list[list[Message]]]] = {}
    written: set[str] = set()
    for sid, (v, i) in first.items():
        tags = facts.tags.get(sid, set())
        if tags & NEGATIVE_TAGS:
            label, source = False, "tag"
        elif tags & POSITIVE_TAGS:
            label, source = True, "tag"
        elif len(through.get(sid, ())) == 1:
            (label,), source = through[sid], "trajectory"
        else:
            counts.leave_out(
                "step: on both a successful and a failed path"
                if through.get(sid)
                else "step: no tag and no labelled trajectory through it"
            )
            continue
        vid = stored_id(v.id)
        if vid not in cuts:  # a version's messages are made once, whichever of its steps need them
            cuts[vid] = conv.cut(ep.task.env, ep.task.text, batch.paths[vid], style)
        head, parts = cuts[vid]
        prompt, completion = head + [m for p in parts[:i] for m in p], [parts[i][0]]
        same = _dumps([prompt, completion, label])
        if same in written:  # rollouts that wrote the same step in the same context: one record
            counts.leave_out("step: the same step in the same context as another record")
            continue
        written.add(same)
        counts.wrote()
        yield {
            "prompt": prompt,
            "completion": completion,
            "label": label,
            "tools": tools,
            "metadata": _meta(ep, facts, v, i + 1, source, sorted(tags)),
        }


def _trajectory_records(
    batch: EpisodeBatch,
    facts: Facts,
    conv: Conversations,
    labels: dict[int, tuple[bool | None, str]],
    style: str,
    counts: Counts,
) -> Iterator[dict[str, Any]]:
    """One record per labelled version with steps (`--unit trajectory`)."""
    ep = batch.episode
    tools = conv.tools(ep.task.env) if style == "tools" else None
    for v in batch.versions:
        label, source = labels[stored_id(v.id)]
        steps = batch.paths[stored_id(v.id)]
        if label is None or not steps:
            counts.leave_out(f"trajectory: {source if label is None else 'no steps'}")
            continue
        head, parts = conv.cut(ep.task.env, ep.task.text, steps, style)
        counts.wrote()
        yield {
            "prompt": head,
            "completion": ends_on_assistant([m for p in parts for m in p]),
            "label": label,
            "tools": tools,
            "metadata": _meta(ep, facts, v, None, source),
        }


def _meta(
    ep: Any, facts: Facts, v: Version, step: int | None, source: str, tags: list[str] | None = None
) -> dict[str, Any]:
    return {
        "episode": ep.id,
        "task": f"{ep.task.env}:{ep.task.id}",
        "version": facts.label(stored_id(v.id)),
        "version_id": v.id,
        "step": step,
        "label_from": source,
        "tags": tags or [],
        "success": (v.outcome.success is True) if v.outcome.done else None,
    }
