"""Versions: the episode's version tree, each version's outcome, its edit, steps, tokens
and cost; switch to, name, or mark a version current."""

from __future__ import annotations

from collections import Counter

import streamlit as st

from agent.rollouts import version_groups
from agent.summary import version_summary
from app_pages import alerts, app_engine, selection, version_names
from app_pages.annotate_widgets import version_annotation_panel
from app_pages.costs import calls_cost, money, usage_totals
from app_pages.page_text import edit_label, own_edit, status_word
from app_pages.version_tree_dot import version_tree_dot
from sessions import numbering

eng = app_engine.engine()
store = eng.store

st.title("Versions")
ep_id, vid, ep = selection.require_episode("No episode selected. Open one on the Episodes page.")
selection.select(ep_id, vid)

version_names.episode_header(ep)

versions = store.versions.of_episode(ep_id)
by_id = {v.id: v for v in versions}
nums = numbering.labels(store, ep_id)  # people read per-episode labels (v3, r2); ids stay internal
prices = store.settings.get(app_engine.PRICES_SETTING, {}) or {}
member, group_labels = version_groups(eng, ep_id)  # (each group's label from its counts: one query)
expand = bool(group_labels) and st.toggle("Expand rollout groups", key="ver_expand_groups")
# a closed rollout group is one node and one row: its members' steps and calls are read only when it is open
# (or for the one version selected), so a page of an episode with a thousand rollouts costs what a few versions do
shown = [v for v in versions if expand or v.id not in member or v.id == vid]
statuses = version_names.version_statuses(shown)  # one jobs query for the table and the selector
steps_of = {v.id: eng.steps(v) for v in shown}
calls = {c.id: c for c in store.calls.read({cid for st_ in steps_of.values() for s in st_ for cid in s.call_ids})}
rows = []
for v in shown:
    r = version_summary(eng, v)
    r["status"] = statuses[v.id]  # one status everywhere: from the version's jobs
    r["group"] = member.get(v.id)
    steps = steps_of[v.id]
    ids = [cid for s in steps for cid in s.call_ids]
    p, c = usage_totals(ids, calls)
    dollars = calls_cost(ids, calls, prices)
    parent = by_id.get(v.parent_version)
    e = own_edit(v.edits, parent.edits if parent else [])
    edit = edit_label(e) if e else (f"branched from {nums[parent.id]}" if parent else "")
    by_hand = sum(1 for s in steps if s.source == "human" and s.edit is None)
    r.update(
        label=nums[v.id],
        current=v.id == ep.current_version,
        prompt_tokens=p,
        completion_tokens=c,
        cost=dollars,
        edit=edit,
        edits=len(v.edits),
        by_hand=by_hand,
    )
    rows.append(r)
closed: dict[int, dict] = {}  # a closed group's node: drawn from the first of its members
if not expand:
    for v in versions:
        g = member.get(v.id)
        if g is not None and g not in closed:
            closed[g] = {"version": v.id, "parent_version": v.parent_version, "group": g}

st.graphviz_chart(
    version_tree_dot(
        rows + [r for r in closed.values() if r["version"] not in steps_of],
        ep.current_version,
        vid,
        group_labels,
        expand,
    ),
    width="content",
)


def version_row(r: dict, nums: dict[int, str], group_labels: dict[int, str]) -> dict:
    return {
        "version": r["label"],
        "id": r["version"],
        "current": "★" if r["current"] else "",
        "name": r["name"] or "",
        "from": nums[r["parent_version"]] if r["parent_version"] in nums else "",
        "rollout group": group_labels.get(r["group"], ""),
        "outcome": status_word(r["done"], r["success"], r["status"]),
        "edit": r["edit"],
        "steps": r["steps"],
        "edits": r["edits"],
        "steps by hand": r["by_hand"],
        "prompt tokens": r["prompt_tokens"],
        "completion tokens": r["completion_tokens"],
        "cost": money(r["cost"]),
    }


def group_row(size: int, first: dict, nums: dict[int, str], label: str) -> dict:
    """A closed rollout group's one row (`first`: its first member's node)."""
    return {
        "version": f"{size:,} rollouts",
        "id": None,
        "current": "",
        "name": "",
        "from": nums.get(first["parent_version"], ""),
        "rollout group": label,
        "outcome": "",
        "edit": "expand rollout groups to list them",
        "steps": None,
        "edits": None,
        "steps by hand": None,
        "prompt tokens": None,
        "completion tokens": None,
        "cost": "",
    }


row_of = {r["version"]: r for r in rows}
firsts = {r["version"]: g for g, r in closed.items()}
sizes = Counter(member.values())  # group -> its rollouts
table = [
    version_row(row_of[v.id], nums, group_labels)
    if v.id in row_of
    else group_row(sizes[firsts[v.id]], closed[firsts[v.id]], nums, group_labels[firsts[v.id]])
    for v in versions
    if v.id in row_of or v.id in firsts
]  # in the tree's order: a group where it starts
st.dataframe(table, hide_index=True, key="versions_table")

ids = [v.id for v in shown]
labels = {i: version_names.version_label(by_id[i], nums.get(i), statuses[i]) for i in ids}
pick = st.selectbox(
    "Version",
    ids,
    index=ids.index(vid) if vid in ids else 0,
    format_func=labels.get,
    key=version_names.widget_key(f"ver_pick_{ep_id}", labels.values()),
)
if pick != vid:  # picking a version selects it (as the Editor's selector does)
    selection.select(ep_id, pick)
    st.rerun()
c = st.columns([3, 1, 1, 1])
new_name = c[0].text_input("Name", value=by_id[pick].name or "", key=f"ver_name_{pick}")
alerts.show_error("versions")
if c[1].button("Save name", key="ver_rename"):
    try:
        store.versions.update(pick, name=new_name.strip() or None)
    except app_engine.USER_ERRORS as exc:
        alerts.set_error("versions", exc)
    st.rerun()
if c[2].button("Mark current", key="ver_current"):
    store.versions.set_current(ep_id, pick)
    selection.select(ep_id, pick)
    st.rerun()
if c[3].button("Open in Editor", key="ver_open", type="primary"):
    selection.open_in("editor", ep_id, pick)
if st.button("Compare with its parent", key="ver_compare", disabled=by_id[pick].parent_version is None):
    st.session_state["cmp_left"] = by_id[pick].parent_version
    st.session_state["cmp_right"] = pick
    selection.open_in("compare", ep_id, pick)
with st.expander(f"Annotate {nums[pick]}: verdict, failure modes, notes, exemplar-ready"):
    version_annotation_panel(store, pick, "ver")
