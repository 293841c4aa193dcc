"""The Compare page's pairwise judgment: "left is better / right is better / tie" with an
optional reason, recorded with the annotator's name (the signed-in person under OIDC login);
the pair's judgments by everyone, and how often annotators agree. Only UI code here; the
library is `store.judgments` and `trajectory.agreement`. Every name and reason is shown as
plain text (a dataframe cell, st.text or an escaped caption), never markdown or HTML."""

from __future__ import annotations

import streamlit as st

from app_pages import access
from app_pages.alerts import alert, plain_caption
from sessions.annotations import current_user
from sessions.store import Store, StoreError
from trajectory.agreement import agreement, agreement_lines
from trajectory.records import Version

CHOICES = {"left is better": "A", "right is better": "B", "tie": "tie"}  # the left version is A


def _annotator(key: str) -> str:
    """The signed-in person's name when there is one (OIDC login), else a name typed here."""
    signed = access.signed_in_name()
    if signed:
        plain_caption(f"Annotator: {signed} (signed in)")
        return signed
    return st.text_input("Annotator", value=current_user(), key=key)


def _said(better: str, left: str, right: str) -> str:
    return {"A": f"{left} (left) is better", "B": f"{right} (right) is better", "tie": "tie"}[better]


def judgment_panel(store: Store, lv: Version, rv: Version, nums: dict[int, str]) -> None:
    """Judge the pair on the page (left = A, right = B) and show its judgments."""
    st.subheader("Which is better?")
    a, b = lv.id, rv.id
    assert a is not None and b is not None  # stored versions
    left, right = nums.get(a, str(a)), nums.get(b, str(b))
    if a == b:
        st.caption("Pick two different versions to judge which is better.")
        return
    key = f"judge-{a}-{b}"
    flash = st.session_state.pop(f"{key}-saved", None)
    if flash:
        alert(flash, "success")
    with st.form(key=key):
        choice = st.radio("Your judgment", list(CHOICES), index=None, horizontal=True, key=f"{key}-better")
        reason = st.text_area("Reason (optional)", key=f"{key}-reason")
        by = _annotator(f"{key}-by")
        st.caption(
            "A judged version is frozen, as an annotated one is: stepping it goes on in a new version. "
            "Judging the pair again replaces your own judgment of it."
        )
        if st.form_submit_button("Save judgment"):
            if choice is None:
                alert("Choose left is better, right is better or tie.")
            else:
                try:
                    j = store.judgments.add(a, b, CHOICES[choice], by, reason=reason or None)
                    st.session_state[f"{key}-saved"] = (
                        f"Judgment saved: {_said(j.better, left, right)} ({j.annotator})."
                    )
                    st.rerun()
                except (StoreError, ValueError) as exc:
                    alert(str(exc).splitlines()[0])
    pair = store.judgments.of_pair(a, b)
    if pair:
        st.dataframe(
            [
                {
                    "by": j.annotator,
                    "judgment": _said(j.better, left, right),
                    "reason": j.reason or "",
                    "when": j.created_at,
                }
                for j in pair
            ],
            hide_index=True,
        )
    else:
        st.caption("Nobody has judged this pair yet.")
    with st.expander("Agreement between annotators (every judgment)"):
        st.text("\n".join(agreement_lines(agreement(store.judgments.list()))))
