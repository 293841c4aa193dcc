"""Pure view models for the pages: step lines in the paper's layout, provenance, the version
tree as DOT, token sums, and the Compare table. No Streamlit here, so all of it is unit-tested.

Nothing in this module renders markdown: text comes back as plain strings (for st.text /
st.code) or as escaped HTML (the Compare table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from app_pages.textdiff import diff_html, esc

EDIT_NAMES = {
    "rewrite_thought": "thought rewritten",
    "delete_thought": "thought deleted",
    "insert_thought": "thought inserted",
    "rewrite_action": "action rewritten",
    "branch": "branched",
}


# ---------------------------------------------------------------------- steps


def step_lines(env: str, step: Any) -> list[tuple[str, str]]:
    """(label, text) lines of one step as the paper prints it.

    ALFWorld: `Act i: think: ...` or `Act i: <command>`, then `Obs i: ...`.
    Wikipedia: `Thought i`, `Action i`, `Observation i`."""
    i = step.index
    out: list[tuple[str, str]] = []
    if env == "alfworld":
        if step.action is None:
            out.append((f"Act {i}", f"think: {step.thought or ''}"))
        else:
            out.append((f"Act {i}", step.action))
        if step.observation is not None:
            out.append((f"Obs {i}", step.observation))
        return out
    if step.thought is not None:
        out.append((f"Thought {i}", step.thought))
    if step.action is not None:
        out.append((f"Action {i}", step.action))
    if step.observation is not None:
        out.append((f"Observation {i}", step.observation))
    return out


def provenance(step: Any) -> str:
    """A short, fixed-vocabulary label (safe to show anywhere): who wrote the step."""
    if step.source == "imported":
        return "imported"
    if step.source == "model":
        return "carried over" if step.info.get("carried_from") else "model"
    if step.edit is not None:
        return f"edited by a person ({EDIT_NAMES.get(step.edit.kind, step.edit.kind)})"
    return "written by a person"


def replaced_text(step: Any) -> str | None:
    """What a person's edit replaced (untrusted text: show it as text), or None."""
    e = step.edit
    if e is None:
        return None
    parts = []
    if e.kind in ("rewrite_thought", "delete_thought") and e.old_thought is not None:
        parts.append(f"was thought: {e.old_thought}")
    if e.kind == "rewrite_action" and e.old_action is not None:
        parts.append(f"was action: {e.old_action}")
    if e.kind == "insert_thought":
        parts.append("inserted (nothing replaced)")
    return "; ".join(parts) or None


def outcome_text(outcome: Any, status: str | None = None) -> str:
    if not outcome.done:
        return status if status in ("stopped", "error") else "open"
    return "success" if outcome.success else "failure"


# ---------------------------------------------------------------------- tokens / cost


def usage_totals(call_ids: Iterable[int], calls_by_id: dict[int, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens of the given calls (cached calls cost no tokens)."""
    p = c = 0
    for cid in call_ids:
        call = calls_by_id.get(cid)
        if call is None or call.cached:
            continue
        p += call.usage.prompt_tokens or 0
        c += call.usage.completion_tokens or 0
    return p, c


def cost(prompt_tokens: int, completion_tokens: int, price: dict | None) -> float | None:
    """Dollars, from a price entry {"prompt": $/1M tokens, "completion": $/1M tokens}."""
    if not price:
        return None
    return (prompt_tokens * float(price.get("prompt", 0)) + completion_tokens * float(price.get("completion", 0))) / 1e6


# ---------------------------------------------------------------------- version tree


def dot_quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as \\n."""
    t = str(text).replace("\\", "\\\\").replace('"', '\\"')
    t = t.replace("\r", "").replace("\n", "\\n")
    return f'"{t}"'


def version_tree_dot(rows: Sequence[dict], current: int | None, selected: int | None = None,
                     groups: dict[int, str] | None = None, expand: bool = False) -> str:
    """The version tree (parent -> child) as DOT. `rows` are `agent.summary.version_summary` dicts;
    a row with a `group` (a rollout group id, labelled in `groups`) is drawn inside one node
    for its group, or - with `expand` - in a box around the group's versions."""
    lines = ["digraph versions {", "  rankdir=LR;", '  node [shape=box, style="rounded,filled", fontname="Helvetica"];']
    groups = groups or {}
    group_of = {r["version"]: r.get("group") for r in rows}
    members: dict[int, list[dict]] = {}
    for r in rows:
        if r.get("group") in groups:
            members.setdefault(r["group"], []).append(r)
    for r in rows:
        if r.get("group") in groups and not expand:
            continue
        state = "success" if r["success"] else ("failure" if r["done"] else "open")
        label = f"v{r['version']}"
        if r.get("name"):
            name = r["name"] if len(r["name"]) <= 40 else r["name"][:39] + "…"
            label += f" {name}"
        label += f"\n{r['steps']} steps, {state}"
        if r.get("human_edits"):
            label += f"\n{r['human_edits']} edit{'s' if r['human_edits'] != 1 else ''}"
        if r["version"] == current:
            label += "\n(current)"
        fill = {"success": "#d4f4dd", "failure": "#fde2e1", "open": "#eef0f4"}[state]
        attrs = [f"label={dot_quote(label)}", f'fillcolor="{fill}"']
        if r["version"] == current:
            attrs.append("penwidth=3")
        if selected is not None and r["version"] == selected:
            attrs.append('color="#1f6feb"')
        lines.append(f"  v{int(r['version'])} [{', '.join(attrs)}];")
    for g, rs in members.items():
        if expand:
            lines.append(f"  subgraph cluster_g{int(g)} {{ label={dot_quote(groups[g])}; style=dashed; "
                         + " ".join(f"v{int(r['version'])};" for r in rs) + " }")
        else:
            lines.append(f'  g{int(g)} [label={dot_quote(groups[g])}, shape=box3d, fillcolor="#fff4d6"];')
    for r in rows:
        p = r.get("parent_version")
        if p is None or p not in group_of:
            continue
        pg = group_of[p]
        src = f"g{int(pg)}" if pg in groups and not expand else f"v{int(p)}"
        g = r.get("group")
        if g in groups and not expand:
            if r is members[g][0]:
                lines.append(f"  {src} -> g{int(g)};")
            continue
        lines.append(f"  {src} -> v{int(r['version'])};")
    lines.append("}")
    return "\n".join(lines)


# ---------------------------------------------------------------------- compare


@dataclass
class CompareRow:
    index: int
    left: Any | None
    right: Any | None
    shared: bool  # the very same stored step on both sides
    changed: bool  # content differs (or one side has no step here)
    edited: bool  # a person's edit sits at this step on either side


def _content(s: Any) -> tuple:
    return (s.thought, s.action, s.observation)


def align(left: Sequence[Any], right: Sequence[Any]) -> list[CompareRow]:
    """Both versions' steps side by side, aligned by step index."""
    rows = []
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else None
        b = right[i] if i < len(right) else None
        shared = a is not None and b is not None and a.id is not None and a.id == b.id
        changed = not shared and (a is None or b is None or _content(a) != _content(b))
        edited = any(s is not None and s.edit is not None for s in (a, b))
        rows.append(CompareRow(i + 1, a, b, shared, changed, edited))
    return rows


def _fields(env: str, s: Any | None) -> list[tuple[str, str]]:
    return [] if s is None else step_lines(env, s)


def _side_pairs(env: str, a: Any | None, b: Any | None) -> list[tuple[str, str | None, str | None]]:
    """Lines of both sides paired by label kind (Act/Thought/Action/Obs...)."""
    la, lb = _fields(env, a), _fields(env, b)
    kinds = []
    for label, _ in la + lb:
        k = label.split(" ")[0]
        if k not in kinds:
            kinds.append(k)
    da = {label.split(" ")[0]: t for label, t in la}
    db = {label.split(" ")[0]: t for label, t in lb}
    return [(k, da.get(k), db.get(k)) for k in kinds]


def compare_html(env: str, rows: Sequence[CompareRow], left_title: str, right_title: str,
                 left_outcome: str, right_outcome: str) -> str:
    """The Compare table as one block of HTML. Every text piece goes through html.escape
    (in `diff_html`/`esc`) before any markup is added."""
    out = [
        '<table class="rd-cmp"><thead><tr><th>#</th>',
        f"<th>{esc(left_title)} — <span class=\"rd-oc rd-{esc(left_outcome)}\">{esc(left_outcome)}</span></th>",
        f"<th>{esc(right_title)} — <span class=\"rd-oc rd-{esc(right_outcome)}\">{esc(right_outcome)}</span></th>",
        "</tr></thead><tbody>",
    ]
    for r in rows:
        cls = "rd-edited" if r.edited else ("rd-changed" if r.changed else "rd-same")
        left_cell, right_cell = [], []
        for kind, ta, tb in _side_pairs(env, r.left, r.right):
            label = f"{esc(kind)} {r.index}: "
            if r.changed and ta is not None and tb is not None:
                ha, hb = diff_html(ta, tb)
            else:
                ha, hb = esc(ta), esc(tb)
            if ta is not None:
                left_cell.append(f'<div class="rd-line"><b>{label}</b>{ha}</div>')
            elif r.left is not None and tb is not None:
                left_cell.append(f'<div class="rd-line rd-none"><b>{label}</b>—</div>')
            if tb is not None:
                right_cell.append(f'<div class="rd-line"><b>{label}</b>{hb}</div>')
            elif r.right is not None and ta is not None:
                right_cell.append(f'<div class="rd-line rd-none"><b>{label}</b>—</div>')
        for s, cell in ((r.left, left_cell), (r.right, right_cell)):
            if s is None:
                cell.append('<div class="rd-none">(no step)</div>')
            elif s.edit is not None or s.source != "model":
                cell.append(f'<div class="rd-prov">{esc(provenance(s))}</div>')
        out.append(
            f'<tr class="{cls}"><td>{r.index}</td><td>{"".join(left_cell)}</td><td>{"".join(right_cell)}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


COMPARE_CSS = """
<style>
table.rd-cmp { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
table.rd-cmp th, table.rd-cmp td { border: 1px solid #d0d7de; padding: 4px 6px; vertical-align: top; text-align: left; }
table.rd-cmp td:first-child { width: 2.5em; color: #57606a; }
tr.rd-edited td { background: #fff8c5; }
tr.rd-changed td { background: #f6f8fa; }
.rd-line { white-space: pre-wrap; word-break: break-word; }
del.rd-del { background: #ffd7d5; text-decoration: line-through; }
ins.rd-ins { background: #ccffd8; text-decoration: none; }
.rd-prov { color: #8250df; font-size: 0.8rem; }
.rd-none { color: #8c959f; }
.rd-success { color: #1a7f37; font-weight: bold; }
.rd-failure { color: #cf222e; font-weight: bold; }
</style>
"""
