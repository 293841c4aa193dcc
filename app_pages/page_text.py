"""Pure view models for the pages: step lines in the paper's layout, provenance, the version
tree as DOT, token sums, and the Compare table. No Streamlit here, so all of it is unit-tested.

Nothing in this module renders markdown: text comes back as plain strings (for st.text /
st.code) or as escaped HTML (the Compare table)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from agent.run_settings import ConfigError, check_base_url
from app_pages.textdiff import diff_html, esc
from envs.registry import family
from trajectory.alignment import AlignedRow
from trajectory.records import EDIT_WORDS

EDIT_NAMES = EDIT_WORDS
# The edits a person picks from, worded the same in the edit form and the what-if panel.
EDIT_CHOICES = {
    "rewrite_thought": "Rewrite thought",
    "delete_thought": "Delete thought",
    "insert_thought": "Insert a thought before this step",
    "insert_after": "Insert a thought after this step",
    "rewrite_action": "Rewrite action",
}


def applicable_edits(step: Any, *, can_insert_after: bool = True, allowed: Any = None) -> list[str]:
    """The edit kinds that apply to this step: a step without a thought has none to rewrite
    or delete; a step without an action has none to rewrite; `allowed` (the family's
    edit kinds) drops the rest."""
    kinds = []
    if step.thought is not None:
        kinds += ["rewrite_thought", "delete_thought"]
    kinds.append("insert_thought")
    if can_insert_after:
        kinds.append("insert_after")
    if step.action is not None:
        kinds.append("rewrite_action")
    if allowed is not None:  # inserting after a step is the family's insert_thought
        kinds = [k for k in kinds if ("insert_thought" if k == "insert_after" else k) in allowed]
    return kinds


def answer_line(gold: str | None, metrics: dict) -> str | None:
    """A question task's failure: the gold answer next to the given one, with EM/F1."""
    gold = metrics.get("gold") or gold
    if "answer" not in metrics and metrics.get("em") is None:
        return None
    parts = [f"Gold answer: {gold or '(unknown)'}", f"given: {metrics.get('answer') or '(none)'}"]
    if metrics.get("em") is not None:
        parts.append(f"EM {float(metrics['em']):g}")
    if metrics.get("f1") is not None:
        parts.append(f"F1 {float(metrics['f1']):.2f}")
    return " · ".join(parts)


# ---------------------------------------------------------------------- steps


def step_lines(env: str, step: Any) -> list[tuple[str, str]]:
    """(label, text) lines of one step as the paper prints it.

    A command-line transcript (ALFWorld): `Act i: think: ...` or `Act i: <command>`, then
    `Obs i: ...`. A numbered one (Wikipedia): `Thought i`, `Action i`, `Observation i`."""
    i = step.index
    out: list[tuple[str, str]] = []
    if thoughts_are_turns(env):
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
    if step.edit is not None and step.edit.origin:  # `react-editor suggest`: a critic's edit a person accepted
        proven = "proven " if str(step.edit.origin.get("verdict") or "").startswith("proven") else ""
        return f"{proven}suggested fix accepted by a person ({EDIT_NAMES.get(step.edit.kind, step.edit.kind)})"
    if step.edit is not None and step.edit.kind == "insert_thought":
        return "inserted by a person"
    if step.edit is not None:
        return f"edited by a person ({EDIT_NAMES.get(step.edit.kind, step.edit.kind)})"
    return "written by a person"


def replaced_text(step: Any) -> str | None:
    """What a person's edit replaced (untrusted text: show it as text), or None."""
    e = step.edit
    if e is None:
        return None
    if e.kind in ("rewrite_thought", "delete_thought") and e.old_thought is not None:
        return f"was thought: {e.old_thought}"
    if e.kind == "rewrite_action" and e.old_action is not None:
        return f"was action: {e.old_action}"
    return None


def origin_text(origin: dict | None) -> str | None:
    """Where a suggested edit came from: critic, prompt hash, the what-if groups that proved it."""
    if not origin:
        return None
    groups = ", ".join(str(g) for g in origin.get("whatif_groups") or []) or "none"
    return (f"suggested by critic {origin.get('critic_model')} (prompt {origin.get('critic_prompt')}, "
            f"sha256 {str(origin.get('critic_prompt_hash') or '')[:12]}); what-if groups {groups}: "
            f"{origin.get('verdict')}")


def thoughts_are_turns(env: str) -> bool:
    """A thought is a turn of its own in this kind's transcript (ALFWorld's `think:`)."""
    try:
        return family(env).transcript.thoughts_are_turns
    except Exception:  # noqa: BLE001 - an episode of a plugin not installed here still shows
        return True


def deleted_here(env: str, edits: Sequence[Any], index: int) -> list[Any]:
    """The thoughts a person deleted just before step `index` of a version (a thought turn
    is gone, so the Editor shows a marker there; a numbered step keeps its place)."""
    if not thoughts_are_turns(env):
        return []
    return [e for e in edits if e.kind == "delete_thought" and e.index == index]


def one_line(text: str) -> str:
    """What a person typed in a multi-line box, as the one line a thought or action is."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def action_warning(env: str, action: str, admissible: Sequence[str] | None) -> str | None:
    """Why a person's action would likely waste a step (shown before it runs), or None:
    the family's check (ALFWorld: not admissible; Wikipedia: not Search/Lookup/Finish[...])."""
    if not action.strip():
        return None
    warn = family(env).action_warning
    return warn(action, admissible) if warn else None


def endpoint_problem(url: str) -> str | None:
    """Why a typed endpoint cannot be used (one line), or None when it can (blank = default)."""
    try:
        check_base_url(url.strip() or None)
    except ConfigError as exc:
        return str(exc)
    return None


def plural(n: int, word: str) -> str:
    """"1 step", "2 steps"."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def status_word(done: bool, success: bool | None, status: str | None) -> str:
    """The one word every page uses for a version: success, failure, running, stopped or
    open (sessions.jobs.status_word: the command line says the same)."""
    from sessions.jobs import status_word as word

    return word(done, success, status)


def outcome_text(outcome: Any, status: str | None = None) -> str:
    return status_word(outcome.done, outcome.success, status)


def own_edit(edits: Sequence[Any], parent_edits: Sequence[Any]) -> Any | None:
    """The edit that made a version (the last of its edits that its parent does not have)."""
    if edits and edits[-1] not in list(parent_edits):
        return edits[-1]
    return None


def edit_label(e: Any) -> str:
    """E.g. "thought rewritten @2"."""
    return f"{EDIT_NAMES.get(e.kind, e.kind)} @{e.index}"


def money(dollars: float | None) -> str:
    """A cost cell: "$0.0123", or nothing when no price is known."""
    return "" if dollars is None else f"${dollars:.4f}"


# ---------------------------------------------------------------------- episodes list


def episode_title(r: dict) -> str:
    """How the picker names an episode: its number and name, else the start of its task."""
    label = r["name"] or task_line(r["text"])[:90]
    return f"#{r['episode']} {label}"


def task_line(text: str | None) -> str:
    """The line that tells tasks apart: ALFWorld's "Your task is to: ..." (every game opens
    with the same room sentence), else the first line ("Question: ...", "Claim: ...")."""
    lines = [" ".join(line.split()) for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        if line.lower().startswith("your task is to"):
            return line
    return lines[0] if lines else ""


def episode_row(r: dict, edits: int) -> dict:
    """One row of the Episodes table: the useful columns first (they fit one screen width)."""
    return {
        "name": r["name"] or "",
        "task": task_line(r["text"])[:200],
        "type": r["type"] or "",
        "outcome": status_word(r["done"], r["success"], r["status"]),
        "versions": r["versions"],
        "edits": edits,
        "model": r["model"],
        "env": r["env"],
        "episode": r["episode"],
    }


EPISODE_COLUMNS = {"episode": {"width": 70}, "name": {"width": "medium"}, "task": {"width": "large"},
                   "type": {"width": "medium"}, "outcome": {"width": 80}, "versions": {"width": 75},
                   "edits": {"width": 60}, "env": {"width": 80}, "model": {"width": "small"}}


# ---------------------------------------------------------------------- tokens / cost


def usage_totals(call_ids: Iterable[int], calls_by_id: dict[int, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens of the given calls (cached calls cost no tokens; a call
    of steps carried over to another branch counts once)."""
    p = c = 0
    for cid in set(call_ids):
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


def calls_cost(call_ids: Iterable[int], calls_by_id: dict[int, Any], prices: dict[str, dict]) -> float | None:
    """Dollars of the given calls, each at the price of the model it was sent to (a
    version may mix models); None when a counted call's model has no price."""
    total = 0.0
    for cid in set(call_ids):
        call = calls_by_id.get(cid)
        if call is None or call.cached:
            continue
        usage = call.usage
        dollars = cost(usage.prompt_tokens or 0, usage.completion_tokens or 0, prices.get(call.model))
        if dollars is None:
            return None
        total += dollars
    return total


# ---------------------------------------------------------------------- version tree


def dot_quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as \\n."""
    t = str(text).replace("\\", "\\\\").replace('"', '\\"')
    t = t.replace("\r", "").replace("\n", "\\n")
    return f'"{t}"'


def version_tree_dot(rows: Sequence[dict], current: int | None, selected: int | None = None,
                     groups: dict[int, str] | None = None, expand: bool = False) -> str:
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
        fill = {"success": "#d4f4dd", "failure": "#fde2e1", "open": "#eef0f4", "stopped": "#fff1c2", "running": "#dbeafe"}[state]
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


def _side_pairs(env: str, a: Any | None, b: Any | None) -> list[tuple[str, str | None, str | None]]:
    """Lines of both sides paired by label kind (Act/Thought/Action/Obs...)."""
    la = [] if a is None else step_lines(env, a)
    lb = [] if b is None else step_lines(env, b)
    kinds = list(dict.fromkeys(label.split(" ")[0] for label, _ in la + lb))
    da = {label.split(" ")[0]: t for label, t in la}
    db = {label.split(" ")[0]: t for label, t in lb}
    return [(k, da.get(k), db.get(k)) for k in kinds]


ROW_CLASS = {"same": "rd-same", "carried": "rd-same", "edited": "rd-edited", "deleted": "rd-edited rd-deleted",
             "inserted": "rd-edited rd-inserted", "regenerated": "rd-regen", "only": "rd-only"}


def row_marker(row: AlignedRow, left_title: str, right_title: str) -> str | None:
    """The one fixed-vocabulary note a row carries (what happened there), or None."""
    if row.kind == "deleted":
        return "thought deleted by a person"
    if row.kind == "inserted":
        return "thought inserted by a person"
    if row.kind in ("regenerated", "only"):
        lead = "regenerated" if row.kind == "regenerated" else f"only in {left_title if row.right is None else right_title}"
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


def compare_html(env: str, rows: Sequence[AlignedRow], left_title: str, right_title: str,
                 left_outcome: str, right_outcome: str) -> str:
    """The Compare table as one block of HTML. Every text piece goes through html.escape
    (in `diff_html`/`esc`) before any markup is added."""
    out = [
        '<table class="rd-cmp"><colgroup><col style="width: 2.5em"><col style="width: 50%"><col style="width: 50%">'
        '</colgroup><thead><tr><th>#</th>',  # fixed layout: the two sides keep equal widths whatever the text
        f"<th>{esc(left_title)} — <span class=\"rd-oc rd-{esc(left_outcome)}\">{esc(left_outcome)}</span></th>",
        f"<th>{esc(right_title)} — <span class=\"rd-oc rd-{esc(right_outcome)}\">{esc(right_outcome)}</span></th>",
        "</tr></thead><tbody>",
    ]
    for r in rows:
        marker = row_marker(r, left_title, right_title)
        note = f'<div class="rd-mark">{esc(marker)}</div>' if marker and r.kind != "deleted" else ""
        out.append(f'<tr class="{ROW_CLASS[r.kind]}"><td>{esc(row_index(r))}</td>'
                   f'<td>{_cell(env, r, "left")}</td><td>{_cell(env, r, "right")}{note}</td></tr>')
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
