"""Preference pairs (`export --format dpo`): one record per edit a person made (the version
before it against the version after it) and per pair of versions people judged, in TRL's
conversational preference form - `prompt` the shared prefix up to the step the two branches
differ at, `chosen` / `rejected` the two continuations - or its implicit-prompt form.

Which branch is chosen follows the evidence, in this order:
1. people's judgments of the pair (`store.judgments`): the side more of them prefer; a pair
   judged only "tie", or as often one way as the other, is left out (the reason says which);
2. a what-if proven either way: the treatment group (the same edit at the same step of the
   version before the edit) against its control, `proven` (interval above 0, one-sided
   p < 0.025: the edit is chosen) or `harmful` (interval below 0: the original is chosen) -
   the rule `agent.suggest_verdict` applies to suggestions, from the same counts;
3. the outcomes: a success against a failure.
A pair with none of these is left out and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from sessions.exchange.messages import Conversations, Message, ends_on_assistant, style_of
from sessions.exchange.selection import EpisodeBatch
from sessions.exchange.training_options import Counts, TrainingOptions
from sessions.exchange.tree_facts import Facts, Group
from sessions.row_records import StepRow, stored_id
from trajectory.exact2x2 import two_arm
from trajectory.records import Version

EDIT_KINDS = ("rewrite_thought", "delete_thought", "insert_thought", "rewrite_action")
ALPHA_ONE = 0.025  # one-sided: the level the lower end of a two-sided 95% interval inverts


@dataclass
class WhatIf:
    effect: float
    ci95: tuple[float, float]
    p_better: float | None
    p_worse: float | None
    treatment: tuple[int, int]  # (successes, n)
    control: tuple[int, int]
    groups: tuple[int, int]  # (control group id, treatment group id)

    @property
    def state(self) -> str:
        lo, hi = self.ci95
        if lo > 0 and self.p_better is not None and self.p_better < ALPHA_ONE:
            return "proven"
        if hi < 0 and self.p_worse is not None and self.p_worse < ALPHA_ONE:
            return "harmful"
        return "not shown"

    def as_json(self) -> dict[str, Any]:
        return {
            "effect": self.effect,
            "ci95": list(self.ci95),
            "state": self.state,
            "treatment": {"successes": self.treatment[0], "n": self.treatment[1]},
            "control": {"successes": self.control[0], "n": self.control[1]},
            "groups": list(self.groups),
        }


def _edit_text(kind: str, step: Any) -> str | None:
    if kind == "delete_thought":
        return None
    text: str | None = step.action if kind == "rewrite_action" else step.thought
    return text


def whatif_of(
    facts: Facts, original: int, k: int, kind: str, text: str | None, origin: dict[str, Any] | None
) -> WhatIf | None:
    """The what-if that measured this edit: a suggestion's own groups (its origin) first, else
    the latest treatment of the same edit at step k of `original` with its control."""
    by_id = {g.id: g for g in facts.groups}
    pairs: list[tuple[Group, Group]] = []
    named = [by_id[i] for i in (origin or {}).get("whatif_groups") or [] if i in by_id]
    c = next((g for g in named if g.kind == "control"), None)
    t = next((g for g in named if g.kind == "treatment"), None)
    if c is not None and t is not None:
        pairs.append((c, t))
    for t in reversed(facts.groups):
        if (
            t.kind == "treatment"
            and t.source_version == original
            and t.step == k
            and t.edit is not None
            and t.edit.kind == kind
            and (t.edit.text or None) == (text or None)
        ):
            c = next(
                (
                    g
                    for g in facts.groups
                    if g.kind == "control" and g.source_version == original and g.step == k and g.config == t.config
                ),
                None,
            )
            if c is not None:
                pairs.append((c, t))
    for c, t in pairs:
        if c.finished and t.finished:
            r = two_arm(t.successes, t.finished, c.successes, c.finished)
            if r.ci95 is None or r.diff is None:
                continue
            return WhatIf(
                r.diff,
                (r.ci95[0], r.ci95[1]),
                r.p_better,
                r.p_worse,
                (t.successes, t.finished),
                (c.successes, c.finished),
                (c.id, t.id),
            )
    return None


def _success(v: Version) -> bool | None:
    """True / False for a finished run, None for one not finished."""
    return (v.outcome.success is True) if v.outcome.done else None


def _first_difference(a: list[StepRow], b: list[StepRow]) -> int:
    """How many leading steps the two paths share (by step identity)."""
    n = 0
    for x, y in zip(a, b):
        if x.id != y.id:
            break
        n += 1
    return n


def _judged(facts: Facts, a: int, b: int) -> tuple[str | None, str | None, list[dict[str, Any]]]:
    """(the version id side people prefer "a"/"b" or None, why not, the judgments as JSON)."""
    js = [j for j in facts.judgments if {j.version_a, j.version_b} == {a, b}]
    if not js:
        return None, None, []
    votes = {"a": 0, "b": 0}
    shown = []
    for j in js:
        side = {"A": j.version_a, "B": j.version_b}.get(j.better)
        if side is not None:
            votes["a" if side == a else "b"] += 1
        shown.append(
            {
                "annotator": j.annotator,
                "better": "tie" if side is None else ("a" if side == a else "b"),
                "reason": j.reason,
            }
        )
    if votes["a"] == votes["b"]:
        return None, ("judged a tie" if votes["a"] == 0 else "people's judgments disagree"), shown
    return ("a" if votes["a"] > votes["b"] else "b"), None, shown


def candidates(batch: EpisodeBatch, facts: Facts, versions: dict[int, Version]) -> Iterator[tuple[int, int, str]]:
    """(original, other, "edit"|"judged") pairs of the episode: each selected version made by an
    edit of the four kinds against the version it was made from (rollouts are measurements,
    not edits), then each judged pair not already one."""
    seen: set[frozenset[int]] = set()
    for v in batch.versions:
        p = versions.get(v.parent_version) if v.parent_version else None
        if p is None or v.id in facts.rollouts or len(v.edits) <= len(p.edits) or v.edits[-1].kind not in EDIT_KINDS:
            continue
        pid, vid = stored_id(p.id), stored_id(v.id)
        seen.add(frozenset((pid, vid)))
        yield pid, vid, "edit"
    chosen = {v.id for v in batch.versions}
    for j in facts.judgments:
        key = frozenset((j.version_a, j.version_b))
        if key in seen or not key & chosen or not key <= versions.keys():
            continue
        seen.add(key)
        yield j.version_a, j.version_b, "judged"


def pair_records(
    batch: EpisodeBatch,
    facts: Facts,
    paths: dict[int, list[StepRow]],
    versions: dict[int, Version],
    conv: Conversations,
    opts: TrainingOptions,
    counts: Counts,
) -> Iterator[dict[str, Any]]:
    """The episode's dpo records; what is left out is counted in `counts`."""
    ep = batch.episode
    style = style_of(ep.config.api_style)
    for a_id, b_id, how in candidates(batch, facts, versions):
        a, b = versions[a_id], versions[b_id]
        pa, pb = paths[a_id], paths[b_id]
        k = _first_difference(pa, pb)  # steps 1..k shared; they differ at step k+1
        if k >= len(pa) or k >= len(pb):
            counts.leave_out("one version has no step where the two differ")
            continue
        edit = b.edits[-1] if how == "edit" else None
        whatif = (
            whatif_of(facts, a_id, edit.index or k + 1, edit.kind, _edit_text(edit.kind, pb[k]), edit.origin)
            if edit is not None
            else None
        )
        side, why, judged = _judged(facts, a_id, b_id)
        sa, sb = _success(a), _success(b)
        if side is not None:
            evidence = "judgment"
        elif why is not None:
            counts.leave_out(why)
            continue
        elif whatif is not None and whatif.state != "not shown":
            evidence, side = "whatif", ("b" if whatif.state == "proven" else "a")
        elif sa is not None and sb is not None and sa != sb:
            evidence, side = "outcome", ("a" if sa else "b")
        else:
            counts.leave_out("no evidence either way (no judgment, no proven what-if, the same outcome)")
            continue
        if opts.proven_only and (whatif is None or whatif.state == "not shown"):
            counts.leave_out("no what-if proved it (--proven-only)")
            continue
        if opts.min_effect is not None and (
            whatif is None or whatif.state == "not shown" or abs(whatif.effect) < opts.min_effect
        ):
            counts.leave_out(f"no proven what-if effect of at least {opts.min_effect:g} (--min-effect)")
            continue
        head, parts_a = conv.cut(ep.task.env, ep.task.text, pa, style)
        _, parts_b = conv.cut(ep.task.env, ep.task.text, pb, style)
        prompt = list(head) + [m for part in parts_a[:k] for m in part]
        cont_a, cont_b = _continuation(parts_a[k:], opts.continuation), _continuation(parts_b[k:], opts.continuation)
        (cw, cv), (rw, rv) = ((cont_a, a), (cont_b, b)) if side == "a" else ((cont_b, b), (cont_a, a))
        rec = _sides(prompt, cw, rw, opts.implicit_prompt)
        rec["tools"] = conv.tools(ep.task.env) if style == "tools" else None
        rec["metadata"] = _metadata(ep, style, facts, (cv, rv), k, how, edit, evidence, judged, whatif)
        counts.wrote()
        yield rec


def _metadata(
    ep: Any,
    style: str,
    facts: Facts,
    chosen_rejected: tuple[Version, Version],
    k: int,
    how: str,
    edit: Any,
    evidence: str,
    judged: Any,
    whatif: WhatIf | None,
) -> dict[str, Any]:
    """A dpo record's metadata: where the pair comes from and why one side is chosen."""
    cv, rv = chosen_rejected
    return {
        "episode": ep.id,
        "task": f"{ep.task.env}:{ep.task.id}",
        "api_style": style,
        "chosen_version": facts.label(stored_id(cv.id)),
        "rejected_version": facts.label(stored_id(rv.id)),
        "chosen_version_id": cv.id,
        "rejected_version_id": rv.id,
        "step": k + 1,
        "pair": how,
        "edit_kind": edit.kind if edit else None,
        "edited_by": (("suggestion" if edit.origin else "person") if edit else None),
        "critic_model": (edit.origin or {}).get("critic_model") if edit else None,
        "chosen_success": _success(cv),
        "rejected_success": _success(rv),
        "evidence": evidence,
        "judgments": judged,
        "whatif": whatif.as_json() if whatif else None,
    }


def _sides(prompt: list[Message], chosen: list[Message], rejected: list[Message], implicit: bool) -> dict[str, Any]:
    """The record's prompt, chosen and rejected; with an implicit prompt, inside both sides."""
    if implicit:
        return {"chosen": prompt + chosen, "rejected": prompt + rejected}
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected}


def _continuation(parts: list[list[dict[str, Any]]], how: str) -> list[dict[str, Any]]:
    """The one differing step's assistant message (`step`), or the rest of the branch (`rest`)."""
    if how == "step":
        return [parts[0][0]]
    return ends_on_assistant([m for part in parts for m in part])
