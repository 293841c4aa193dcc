"""Two versions of one episode side by side, aligned by step identity (the paper's Figure 5).

Steps are matched by what they are, not by where they sit: the shared prefix is the very same
stored steps; a step carried over by a thought edit matches its original; a person's rewrite
matches the step it replaced. What has no partner is one-sided: a thought deleted by a person
(nothing on the side that deleted it), a thought a person inserted (nothing on the other side),
and the steps the model wrote anew after an edit, which are paired by position and marked
"regenerated" - never word-diffed against unrelated text. Pure: steps and edits in, rows out.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from trajectory.records import EditInfo, Step

RowKind = Literal["same", "carried", "edited", "deleted", "inserted", "regenerated", "only"]
HUMAN_KINDS = ("edited", "deleted", "inserted")
_MATCHED_EDITS = ("rewrite_thought", "rewrite_action", "delete_thought")


@dataclass(frozen=True)
class AlignedRow:
    """One row: the left and/or right step, what kind of pairing it is, and for
    regenerated rows the step of the edit they follow (`after_edit`)."""

    kind: RowKind
    left: Step | None
    right: Step | None
    after_edit: int | None = None
    deleted_text: str | None = None  # a deleted thought (ALFWorld: its step is gone)

    @property
    def differs(self) -> bool:
        return self.kind not in ("same", "carried")

    @property
    def by_person(self) -> bool:
        return self.kind in HUMAN_KINDS


def origin(step_id: int | None, carried: dict[int, int]) -> int | None:
    """The stored step a (possibly many times) carried-over step was first copied from."""
    seen = set()
    while step_id in carried and step_id not in seen:
        seen.add(step_id)
        step_id = carried[step_id]
    return step_id


def carried_map(steps: Sequence[Step]) -> dict[int, int]:
    """step id -> the step it was carried over from, for every carried step given."""
    return {s.id: s.info["carried_from"] for s in steps if s.id is not None and s.info.get("carried_from")}


def _key(s: Step, carried: dict[int, int]) -> tuple[Any, ...]:
    """What a step is: a person's rewrite is the step it replaced; any other step is the
    stored step it was first copied from (itself, unless carried over)."""
    e = s.edit
    if e is not None and e.kind in _MATCHED_EDITS and e.replaced_step is not None:
        return ("step", origin(e.replaced_step, carried))
    if s.id is None:
        return ("new", id(s))
    return ("step", origin(s.id, carried))


def _step_of(row: AlignedRow) -> Step:
    """The step of a one-sided row (a person's deletion or insertion: one side is set)."""
    step = row.right or row.left
    assert step is not None
    return step


def _deleted(edits: Sequence[EditInfo], carried: dict[int, int]) -> dict[int | None, EditInfo]:
    """Steps a person removed outright (ALFWorld thoughts), by their original id."""
    return {
        origin(e.replaced_step, carried): e for e in edits if e.kind == "delete_thought" and e.replaced_step is not None
    }


def align_versions(
    left: Sequence[Step],
    right: Sequence[Step],
    left_edits: Sequence[EditInfo] = (),
    right_edits: Sequence[EditInfo] = (),
    carried: dict[int, int] | None = None,
) -> list[AlignedRow]:
    """Rows of the two step lists aligned by identity. `*_edits` are the versions' edit
    lists (an ALFWorld deletion leaves no step behind); `carried` maps carried-over step
    ids to their sources for steps outside the two lists (chains of thought edits)."""
    carried = {**(carried or {}), **carried_map(left), **carried_map(right)}
    ka = [_key(s, carried) for s in left]
    kb = [_key(s, carried) for s in right]
    gone = {"left": _deleted(right_edits, carried), "right": _deleted(left_edits, carried)}
    rows: list[AlignedRow] = []
    sm = difflib.SequenceMatcher(a=ka, b=kb, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            last = next((r for r in reversed(rows) if r.by_person), None)
            after = None if last is None else _step_of(last).index
            rows += _unmatched(left[i1:i2], right[j1:j2], gone, carried, after)
            continue
        for a, b in zip(left[i1:i2], right[j1:j2]):
            if a.id is not None and a.id == b.id:
                rows.append(AlignedRow("same", a, b))
            elif origin(a.id, carried) == origin(b.id, carried):
                rows.append(AlignedRow("carried", a, b))
            else:
                rows.append(AlignedRow("edited", a, b))
    return rows


def _unmatched(
    a: Sequence[Step],
    b: Sequence[Step],
    gone: dict[str, dict[int | None, EditInfo]],
    carried: dict[int, int],
    after: int | None,
) -> list[AlignedRow]:
    """A stretch where the two sides share no step, walked in order: a person's deletions
    and insertions become one-sided rows; the other steps pair up by position as steps
    regenerated after the latest edit (or stand alone where one side is longer)."""

    def one_sided(s: Step | None, side: str) -> AlignedRow | None:
        if s is None:
            return None
        pair = (s, None) if side == "left" else (None, s)
        e = gone[side].get(origin(s.id, carried))
        if e is not None:
            return AlignedRow("deleted", pair[0], pair[1], deleted_text=e.old_thought)
        if s.edit is not None and s.edit.kind == "insert_thought":
            return AlignedRow("inserted", *pair)
        return None

    out: list[AlignedRow] = []
    i = j = 0
    while i < len(a) or j < len(b):
        x = a[i] if i < len(a) else None
        y = b[j] if j < len(b) else None
        row = one_sided(x, "left")
        if row is None:
            row = one_sided(y, "right")
            j += row is not None
        else:
            i += 1
        if row is not None:
            out.append(row)
            after = _step_of(row).index
            continue
        out.append(AlignedRow("regenerated" if x is not None and y is not None else "only", x, y, after_edit=after))
        i, j = i + (x is not None), j + (y is not None)
    return out


def person_edits(rows: Sequence[AlignedRow]) -> int:
    """Every kind of human edit that separates the two versions (rewrites, deletions, insertions)."""
    return sum(1 for r in rows if r.by_person)
