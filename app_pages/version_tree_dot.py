"""The version tree (parent -> child, rollout groups folded or boxed) as Graphviz DOT text.
Pure, no Streamlit; every label DOT-quoted."""

from __future__ import annotations

from typing import Sequence

from app_pages.page_text import plural, status_word


def dot_quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as \\n."""
    t = str(text).replace("\\", "\\\\").replace('"', '\\"')
    t = t.replace("\r", "").replace("\n", "\\n")
    return f'"{t}"'


def version_tree_dot(
    rows: Sequence[dict],
    current: int | None,
    selected: int | None = None,
    groups: dict[int, str] | None = None,
    expand: bool = False,
) -> str:
    """The version tree (parent -> child) as DOT. `rows` are `agent.summary.version_summary` dicts
    with `edit` (the version's own edit, as `edit_label` says it) and `edits` (a person's edits
    on its path); a row with a `group` (a rollout group id, labelled in `groups`) is drawn inside one node
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
        state = status_word(r["done"], r["success"], r.get("status"))
        label, fill = _node_label(r, state, current), _FILLS[state]
        attrs = [f"label={dot_quote(label)}", f'fillcolor="{fill}"']
        if r["version"] == current:
            attrs.append("penwidth=3")
        if selected is not None and r["version"] == selected:
            attrs.append('color="#1f6feb"')
        lines.append(f"  v{int(r['version'])} [{', '.join(attrs)}];")
    for g, rs in members.items():
        if expand:
            lines.append(
                f"  subgraph cluster_g{int(g)} {{ label={dot_quote(groups[g])}; style=dashed; "
                + " ".join(f"v{int(r['version'])};" for r in rs)
                + " }"
            )
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


_FILLS = {
    "success": "#d4f4dd",
    "failure": "#fde2e1",
    "open": "#eef0f4",
    "stopped": "#fff1c2",
    "running": "#dbeafe",
}  # a node's colour by its version's state


def _node_label(r: dict, state: str, current: int | None) -> str:
    """A version's node text: its label and name, steps and state, its edit(s), (current)."""
    label = r.get("label") or f"v{r['version']}"
    if r.get("name"):
        name = r["name"] if len(r["name"]) <= 40 else r["name"][:39] + "…"
        label += f" {name}"
    label += f"\n{plural(r['steps'], 'step')}, {state}"
    if r.get("edit"):
        label += f"\n{r['edit']}"
    if r.get("edits"):
        label += f" ({plural(r['edits'], 'edit')} in all)" if r.get("edit") else f"\n{plural(r['edits'], 'edit')}"
    if r["version"] == current:
        label += "\n(current)"
    return label
