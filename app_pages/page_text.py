"""The plain text the pages show: a step's lines in the paper's layout, its provenance and
edits, outcomes, an endpoint's problem, the Episodes table's rows. No Streamlit here, so all
of it is unit-tested (the version tree's DOT, costs and the Compare table: version_tree_dot.py,
costs.py, compare_table.py).

Nothing in this module renders markdown: text comes back as plain strings (for st.text /
st.code) or as escaped HTML (the Compare table)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from agent.run_settings import ConfigError, check_base_url
from envs.registry import family
from trajectory.records import EDIT_WORDS

EDIT_NAMES = EDIT_WORDS
# The edits a person picks from, worded the same in the edit form and the what-if panel.
EDIT_CHOICES = {
    "rewrite_thought": "Rewrite thought",
    "delete_thought": "Delete thought",
    "insert_thought": "Insert a thought before this step",
    "insert_after": "Insert a thought after this step",
    "rewrite_action": "Rewrite action",
    "rewrite_reasoning": "Rewrite reasoning",
}


def applicable_edits(
    step: Any, *, can_insert_after: bool = True, allowed: Any = None, reasoning: bool = False
) -> list[str]:
    """The edit kinds that apply to this step: a step without a thought has none to rewrite
    or delete; a step without an action has none to rewrite; `allowed` (the family's
    edit kinds) drops the rest. `reasoning`: a step with a reasoning channel offers its
    rewrite too (any family's)."""
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
    if reasoning and getattr(step, "reasoning", None) is not None:
        kinds.append("rewrite_reasoning")
    return kinds


def tool_call_text(step: Any) -> str | None:
    """A tools-style step's call as plain text (`search({"entity": "Rell"})`), else None."""
    call = getattr(step, "tool_call", None)
    if call is None:
        return None
    return f"Tool call: {call.name}({json.dumps(call.arguments, ensure_ascii=False)})"


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
    return (
        f"suggested by critic {origin.get('critic_model')} (prompt {origin.get('critic_prompt')}, "
        f"sha256 {str(origin.get('critic_prompt_hash') or '')[:12]}); what-if groups {groups}: "
        f"{origin.get('verdict')}"
    )


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
    """ "1 step", "2 steps"."""
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


EPISODE_COLUMNS = {
    "episode": {"width": 70},
    "name": {"width": "medium"},
    "task": {"width": "large"},
    "type": {"width": "medium"},
    "outcome": {"width": 80},
    "versions": {"width": 75},
    "edits": {"width": 60},
    "env": {"width": 80},
    "model": {"width": "small"},
}
