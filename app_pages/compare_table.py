"""The Compare table: two versions' aligned steps as escaped HTML rows (what happened at each
row: same, edited, deleted, inserted, regenerated) and its CSS. Pure, no Streamlit."""

from __future__ import annotations

from typing import Any, Sequence

from app_pages.page_text import provenance, step_lines
from app_pages.textdiff import diff_html, esc
from trajectory.alignment import AlignedRow


def _side_pairs(env: str, a: Any | None, b: Any | None) -> list[tuple[str, str | None, str | None]]:
    """Lines of both sides paired by label kind (Act/Thought/Action/Obs...)."""
    la = [] if a is None else step_lines(env, a)
    lb = [] if b is None else step_lines(env, b)
    kinds = list(dict.fromkeys(label.split(" ")[0] for label, _ in la + lb))
    da = {label.split(" ")[0]: t for label, t in la}
    db = {label.split(" ")[0]: t for label, t in lb}
    return [(k, da.get(k), db.get(k)) for k in kinds]


ROW_CLASS = {
    "same": "rd-same",
    "carried": "rd-same",
    "edited": "rd-edited",
    "deleted": "rd-edited rd-deleted",
    "inserted": "rd-edited rd-inserted",
    "regenerated": "rd-regen",
    "only": "rd-only",
}


def row_marker(row: AlignedRow, left_title: str, right_title: str) -> str | None:
    """The one fixed-vocabulary note a row carries (what happened there), or None."""
    if row.kind == "deleted":
        return "thought deleted by a person"
    if row.kind == "inserted":
        return "thought inserted by a person"
    if row.kind in ("regenerated", "only"):
        lead = (
            "regenerated"
            if row.kind == "regenerated"
            else f"only in {left_title if row.right is None else right_title}"
        )
        return f"{lead} after the edit at step {row.after_edit}" if row.after_edit else lead
    return None


def row_index(row: AlignedRow) -> str:
    """The step number(s) of a row: one when both sides agree, "3 / 4" when they moved."""
    a, b = (row.left.index if row.left else None), (row.right.index if row.right else None)
    if a is None or b is None or a == b:
        return str(a or b)
    return f"{a} / {b}"


def _cell(env: str, row: AlignedRow, side: str) -> str:
    s = row.left if side == "left" else row.right
    if s is None:
        if row.kind == "deleted":
            return '<div class="rd-none">— deleted by a person —</div>'
        return '<div class="rd-none">(no step)</div>'
    out = []
    diff = row.kind == "edited" and row.left is not None and row.right is not None
    for kind, ta, tb in _side_pairs(env, row.left, row.right):
        text = ta if side == "left" else tb
        other = tb if side == "left" else ta
        if text is None:
            if diff and other is not None:
                out.append(f'<div class="rd-line rd-none"><b>{esc(kind)} {s.index}: </b>—</div>')
            continue
        if diff and other is not None:
            h = diff_html(ta, tb)[0 if side == "left" else 1]
        else:
            h = esc(text)
        out.append(f'<div class="rd-line"><b>{esc(kind)} {s.index}: </b>{h}</div>')
    if s.edit is not None or s.source != "model":
        out.append(f'<div class="rd-prov">{esc(provenance(s))}</div>')
    return "".join(out)


def compare_html(
    env: str, rows: Sequence[AlignedRow], left_title: str, right_title: str, left_outcome: str, right_outcome: str
) -> str:
    """The Compare table as one block of HTML. Every text piece goes through html.escape
    (in `diff_html`/`esc`) before any markup is added."""
    out = [
        '<table class="rd-cmp"><colgroup><col style="width: 2.5em"><col style="width: 50%"><col style="width: 50%">'
        "</colgroup><thead><tr><th>#</th>",  # fixed layout: the two sides keep equal widths whatever the text
        f'<th>{esc(left_title)} — <span class="rd-oc rd-{esc(left_outcome)}">{esc(left_outcome)}</span></th>',
        f'<th>{esc(right_title)} — <span class="rd-oc rd-{esc(right_outcome)}">{esc(right_outcome)}</span></th>',
        "</tr></thead><tbody>",
    ]
    for r in rows:
        marker = row_marker(r, left_title, right_title)
        note = f'<div class="rd-mark">{esc(marker)}</div>' if marker and r.kind != "deleted" else ""
        out.append(
            f'<tr class="{ROW_CLASS[r.kind]}"><td>{esc(row_index(r))}</td>'
            f"<td>{_cell(env, r, 'left')}</td><td>{_cell(env, r, 'right')}{note}</td></tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


COMPARE_CSS = """
<style>
table.rd-cmp { border-collapse: collapse; width: 100%; font-size: 0.9rem; table-layout: fixed; }
table.rd-cmp th, table.rd-cmp td { border: 1px solid #d0d7de; padding: 4px 6px; vertical-align: top; text-align: left; }
table.rd-cmp td:first-child { width: 2.5em; color: #57606a; }
tr.rd-edited td { background: #fff8c5; }
tr.rd-regen td, tr.rd-only td { background: #f6f8fa; }
tr.rd-deleted td:nth-child(2) { text-decoration: line-through; text-decoration-color: #cf222e; }
.rd-mark { color: #9a6700; font-size: 0.8rem; font-style: italic; }
.rd-line { white-space: pre-wrap; word-break: break-word; }
del.rd-del { background: #ffd7d5; text-decoration: line-through; }
ins.rd-ins { background: #ccffd8; text-decoration: none; }
.rd-prov { color: #8250df; font-size: 0.8rem; }
.rd-none { color: #8c959f; }
.rd-success { color: #1a7f37; font-weight: bold; }
.rd-failure { color: #cf222e; font-weight: bold; }
</style>
"""
