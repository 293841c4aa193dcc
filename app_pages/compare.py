"""Compare: two versions side by side aligned by step identity (`trajectory.alignment`):
the shared prefix, carried-over steps, a person's rewrites with a word-level diff, deleted
and inserted thoughts as one-sided rows, regenerated steps marked as such, and each side's
outcome - the paper's Figure 5 as a view; below it, which of the two is better, as people judge
it (`app_pages/judge_panel.py`).

The table is one block of HTML built by `views.compare_html`, which escapes every piece of
text before adding the highlight markup (and is unit-tested for it)."""

from __future__ import annotations

import streamlit as st

from app_pages import app_engine, selection, version_names
from app_pages.compare_table import COMPARE_CSS, compare_html
from app_pages.judge_panel import judgment_panel
from app_pages.page_text import outcome_text, plural
from sessions import numbering
from trajectory.alignment import align_versions, carried_map, person_edits

eng = app_engine.engine()
store = eng.store

st.title("Compare")
ep_id, vid, ep = selection.require_episode("No episode selected. Open one on the Episodes page.")

versions = store.versions.of_episode(ep_id)
by_id = {v.id: v for v in versions}
ids = list(by_id)


def pick(name: str, fallback: int, by_id: dict) -> int:
    """The version the URL or this session chose for a side, if it is one of `by_id`."""
    for raw in (st.query_params.get(name), st.session_state.get(f"cmp_{name}")):
        try:
            if raw is not None and int(raw) in by_id:
                return int(raw)
        except (TypeError, ValueError):
            pass
    return fallback


right_default = vid if vid in by_id else ids[-1]
left_default = by_id[right_default].parent_version or ids[0]
left, right = pick("left", left_default, by_id), pick("right", right_default, by_id)

version_names.episode_header(ep)
c = st.columns(2)
nums = numbering.labels(store, ep_id)  # people read per-episode numbers
statuses = version_names.version_statuses(versions)  # one jobs query for both selectors
labels = {i: version_names.version_label(by_id[i], nums.get(i), statuses[i]) for i in ids}
new_left = c[0].selectbox(
    "Left",
    ids,
    index=ids.index(left),
    format_func=labels.get,
    key=version_names.widget_key(f"cmp_l_{ep_id}_{left}", labels.values()),
)
new_right = c[1].selectbox(
    "Right",
    ids,
    index=ids.index(right),
    format_func=labels.get,
    key=version_names.widget_key(f"cmp_r_{ep_id}_{right}", labels.values()),
)
st.session_state["cmp_left"], st.session_state["cmp_right"] = new_left, new_right
params = {"episode": str(ep_id), "version": str(new_right), "left": str(new_left), "right": str(new_right)}
if dict(st.query_params) != params:
    st.query_params.from_dict(params)
    if (new_left, new_right) != (left, right):
        st.rerun()

lv, rv = by_id[new_left], by_id[new_right]
ls, rs = eng.steps(lv), eng.steps(rv)
# carried copies of carried copies: the other versions' steps link them to their originals
others = [s for v in versions if v.id not in (lv.id, rv.id) for s in eng.steps(v) if s.info.get("carried_from")]
rows = align_versions(ls, rs, lv.edits, rv.edits, carried_map(others))
changed = sum(1 for r in rows if r.differs)
edited = person_edits(rows)
lo, ro = outcome_text(lv.outcome, statuses[lv.id]), outcome_text(rv.outcome, statuses[rv.id])  # as the selectors say
m = st.columns(4)
m[0].metric(nums[lv.id], lo, plural(len(ls), "step"), delta_color="off", delta_arrow="off")
m[1].metric(nums[rv.id], ro, plural(len(rs), "step"), delta_color="off", delta_arrow="off")
m[2].metric("Steps that differ", changed)
m[3].metric("Steps edited by a person", edited)
only_changes = st.toggle("Only the steps that differ", key="cmp_only_changes")
shown = [r for r in rows if r.differs] if only_changes else rows
st.html(COMPARE_CSS + compare_html(ep.task.env, shown, nums[lv.id], nums[rv.id], lo, ro))
judgment_panel(store, lv, rv, nums)
