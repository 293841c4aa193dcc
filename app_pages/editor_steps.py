"""The trajectory in the Editor: the overview strip, every step's box (the newest LIVE_STEPS
interactive, earlier ones in windows), deletion markers and the panels of the step being
edited. Untrusted text only through st.text / st.code, or escaped HTML (the word diff)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app_pages import overview, selection, signal_badges, suggest_panel, whatif_panel
from app_pages.annotate_widgets import step_tag_panel
from app_pages.editor_context import LIVE_STEPS, EditorPage
from app_pages.editor_edit import edit_panel
from app_pages.editor_run import switcher
from app_pages.page_text import deleted_here, origin_text, provenance, replaced_text, step_lines, tool_call_text
from app_pages.textdiff import inline_diff_html
from sessions import annotations
from trajectory.records import MAX_TEXT
from trajectory.signals import version_step_signals

STEP_LINES = 3  # at most: thought, action, observation (views.step_lines)


class StepExtras:
    """What the steps of a version show besides their text, read once per draw: signals,
    model calls (timing, tokens), tags and notes."""

    def __init__(self, page: EditorPage, v, steps) -> None:
        store = page.store
        self.signals = dict(zip((s.id for s in steps), version_step_signals(steps, v.outcome)))
        ids = [cid for s in steps if s.source == "model" for cid in s.call_ids]
        self.calls = {c.id: c for c in store.calls.read(ids)} if ids else {}
        self.tags = annotations.step_annotations(store, [s.id for s in steps])
        self.cards = suggest_panel.by_step(page.eng, v.id, v)  # a failed version's suggested fixes, per step
        self.timing = bool(st.session_state.get("show_timing"))


def render_step(page: EditorPage, s, v, extras: StepExtras, markers: bool = True) -> None:
    """One step's box, always the same number of elements (an empty slot where a step has
    nothing): past LIVE_STEPS each new step moves every box up one place, and a box takes
    over the elements of the one that was there; an element it did not overwrite stayed,
    a ghost line of another step, until the page's run ended."""
    vid, env = page.vid, page.ep.task.env
    for pos, e in deleted_at(env, v, s.index) if markers else []:
        deleted_marker(page, pos, e)
    with st.container(border=True, key=f"step_{s.index}", gap="xxsmall"):
        head = st.columns([6, 1])
        head[0].caption(f"Step {s.index} · {provenance(s)}")
        sig = extras.signals.get(s.id)
        slot(sig, lambda: st.caption(signal_badges.badge_text(sig), help=signal_badges.HELP))
        head[1].button(
            "Edit",
            key=f"editbtn_{vid}_{s.index}",
            disabled=bool(st.session_state.get("run")),
            on_click=open_edit,
            args=(vid, s.index),
        )
        reasoning = getattr(s, "reasoning", None)  # the model's reasoning channel: its own part, folded
        slot(reasoning is not None, lambda: reasoning_part(vid, s.index, reasoning))
        lines = step_lines(env, s)
        for i in range(STEP_LINES):
            slot(i < len(lines), lambda: st.text(f"{lines[i][0]}: {lines[i][1]}"))
        call = tool_call_text(s)  # a tools-style step: the call as the model made it (plain text)
        slot(call, lambda: st.text(call))
        # the old text once, as a word diff (escaped words, diff markup only)
        slot(replaced_text(s), lambda: st.html(edit_diff_html(s)))
        origin = s.edit is not None and s.edit.origin  # a suggested fix: where it came from (plain text)
        slot(origin, lambda: st.text(origin_text(s.edit.origin)))
        calls = [c for c in (extras.calls.get(i) for i in s.call_ids) if c]
        cuts = (
            [
                f"(the model's completion was cut to {MAX_TEXT:,} of its {c.cut_from:,} characters)"
                for c in calls
                if c.cut_from
            ]
            if s.source == "model"
            else []
        )
        slot(cuts, lambda: st.text("\n".join(cuts)))
        timing = extras.timing and s.source == "model" and not s.info.get("carried_from")
        slot(timing, lambda: st.caption(overview.call_line(calls)))
        a = extras.tags.get(s.id)
        slot(
            a is not None and (a.tags or a.note),
            lambda: st.text("Tags: " + (", ".join(a.tags) or "-") + (f" · Note: {a.note}" if a.note else "")),
        )


def reasoning_part(vid: int, index: int, text: str) -> None:
    """A step's reasoning (`reasoning_content`) as its own collapsible part, plain text only
    (edited from the step's Edit panel: "Rewrite reasoning")."""
    with st.expander("Reasoning", expanded=False, key=f"reasoning_{vid}_{index}"):
        st.text(text)


def open_edit(version_id: int, index: int) -> None:
    """Edit's callback: it runs before the page, so the one run the click starts draws the
    panels under the step (a rerun from the button drew the whole page twice)."""
    st.session_state["edit_at"] = (version_id, index)
    selection.focus_step(version_id, index)  # the panels open under the step, in view


def slot(show: object, draw: Callable[[], object]) -> None:
    """One fixed place in a step's box: `draw()` when `show`, else an empty element."""
    if show:
        draw()
    else:
        st.empty()


def edit_diff_html(s) -> str:
    """A person's edit of the step as one line: what it replaced struck, what it wrote marked."""
    action = s.edit.kind == "rewrite_action"
    was, now = (s.edit.old_action, s.action) if action else (s.edit.old_thought, s.thought)
    return f'<div class="rd-was"><b>{"action" if action else "thought"} edited:</b> {inline_diff_html(was, now)}</div>'


def deleted_at(env: str, v, index: int) -> list[tuple[int, object]]:
    """(position in the version's edits, edit) of the thoughts deleted just before step `index`."""
    mine = deleted_here(env, v.edits, index)
    return [(pos, e) for pos, e in enumerate(v.edits) if any(e is m for m in mine)]


def deleted_marker(page: EditorPage, pos: int, e) -> None:
    """A deleted thought's marker, keyed by the edit's place in the version's edits: one
    version can hold two deletions at one step (and each marker is drawn once per page)."""
    with st.expander("Thought deleted here by a person (show it)", key=f"deleted_{page.vid}_{pos}"):
        st.text(e.old_thought or "")


def overview_strip(v, steps, extras: StepExtras) -> None:
    """The whole version at a glance; its marks link to the steps below."""
    if not steps:
        return
    edited = [s.index for s in steps if s.edit is not None]  # a person's edit (not every hand-written step)
    st.html(
        overview.strip_html(steps, [extras.signals.get(s.id, []) for s in steps], v.outcome)
        + overview.edited_css(edited)
    )
    t = st.columns([2, 5])
    t[0].toggle("Timing and tokens per step", key="show_timing")
    if extras.timing:
        t[1].caption(overview.version_timing(extras.calls.values()))


def windows(last: int, size: int = LIVE_STEPS) -> list[tuple[int, int]]:
    """Steps 1..last in windows of `size`: [(1, 30), (31, 60), ...]."""
    return [(a, min(a + size - 1, last)) for a in range(1, last + 1, size)]


def window_label(w: tuple[int, int]) -> str:
    return f"{w[0]}–{w[1]}"


def earlier_steps(page: EditorPage, v, steps, extras: StepExtras, edit_at: tuple | None, focus: tuple | None) -> None:
    """Steps before the newest LIVE_STEPS: one window of them at a time in full (Edit
    buttons, timing, panels at their step), the others as one fast block each. A focus
    on an earlier step (a search hit, an opened panel) shows its window."""
    vid, env = page.vid, page.ep.task.env
    older = steps[:-LIVE_STEPS]
    wins = windows(older[-1].index)
    key = f"older_win_{vid}"
    if focus and focus[0] == vid and focus[1] <= older[-1].index and st.session_state.get("older_for") != focus:
        st.session_state[key] = next(window_label(w) for w in wins if w[0] <= focus[1] <= w[1])
        st.session_state["older_for"] = focus
    pick = st.segmented_control("Earlier steps in full (Edit, timing)", [window_label(w) for w in wins], key=key)
    for w in wins:
        part = older[w[0] - 1 : w[1]]
        if window_label(w) != pick:  # its deletion markers here; a window in full draws them at their step
            for i in range(w[0], w[1] + 1):
                for pos, e in deleted_at(env, v, i):
                    deleted_marker(page, pos, e)
            st.html(overview.steps_html(env, part, extras.signals, extras.tags))
            for s in part:  # a suggested fix at a step drawn in this block: its card under the block
                suggest_panel.at_step(page.eng, vid, extras.cards, s.index, switcher(page))
            continue
        for s in part:
            step_and_panels(page, v, steps, s, extras, edit_at)


def step_panels(page: EditorPage, v, steps, s) -> None:
    """The edit, what-if and tag panels of a step, drawn under the step they belong to."""
    edit_panel(page, v, steps, s)
    whatif_panel.render(page.eng, page.ep, page.vid, s)
    with st.expander(f"Tags and note for step {s.index}"):
        step_tag_panel(page.store, s.id, "ed")


def step_and_panels(page: EditorPage, v, steps, s, extras: StepExtras, edit_at: tuple | None) -> None:
    """A step drawn in full, its suggested fixes, and its panels when it is being edited."""
    render_step(page, s, v, extras)
    suggest_panel.at_step(page.eng, page.vid, extras.cards, s.index, switcher(page))  # suggested fixes at their step
    if edit_at == (page.vid, s.index):
        step_panels(page, v, steps, s)


def focus_marker(page: EditorPage, focus: tuple | None, n_steps: int) -> None:
    """The page script scrolls the focused step into view when this marker first appears."""
    if focus and focus[0] == page.vid and 1 <= focus[1] <= n_steps:
        with st.container(key=f"focus_step_{focus[1]}_{focus[2]}", height=1, border=False):
            st.html("<span></span>")


def steps_view(page: EditorPage, v, steps, extras: StepExtras, edit_at: tuple | None, focus: tuple | None) -> None:
    """Every step; the panels of the step being edited open under it."""
    live = steps[-LIVE_STEPS:]
    if len(steps) > LIVE_STEPS:
        earlier_steps(page, v, steps, extras, edit_at, focus)
    for s in live:
        step_and_panels(page, v, steps, s, extras, edit_at)
    for pos, e in deleted_at(page.ep.task.env, v, len(steps) + 1):
        deleted_marker(page, pos, e)
    focus_marker(page, focus, len(steps))
