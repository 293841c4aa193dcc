"""Annotation controls the Editor and Versions pages embed: a version's verdict, failure
modes, notes and exemplar-ready flag; a step's tags and note. Every save appends a new
annotation row (history kept). Only UI code here; the library is sessions.annotations."""

from __future__ import annotations

from typing import Any

import streamlit as st

from agent import exemplars
from app_pages import access
from app_pages.alerts import alert, plain_caption
from sessions import annotations, exemplar_sets
from sessions.store import Store, StoreError
from trajectory.signals import suggest_failure_modes, version_signals

_VERDICTS = ["(none)", *annotations.VERDICTS]


def version_annotation_panel(
    store: Store, version_id: int, key_prefix: str, *, steps: list | None = None, env: str | None = None
) -> None:
    """Verdict / failure modes / notes / exemplar-ready for one version, with its history.
    `steps`, `env`: the version's steps and its episode's environment when the page has
    read them already (the Editor has), so they are not read again."""
    cur = annotations.version_annotation(store, version_id)
    version = store.versions.get(version_id)
    outcome = version.outcome
    auto = "unfinished" if not outcome.done else ("success" if outcome.success else "failure")
    st.caption(f"Environment outcome: {auto}")
    # before any annotation, the signals pre-fill a suggestion; it is saved only if the person saves it
    suggested = [] if cur else _suggested_modes(store, version_id, steps, outcome)
    with st.form(key=f"{key_prefix}-va-{version_id}"):
        verdict = st.selectbox(
            "Your verdict",
            _VERDICTS,
            index=_VERDICTS.index(cur.verdict) if cur and cur.verdict else 0,
            key=f"{key_prefix}-verdict-{version_id}",
        )
        modes = st.multiselect(
            "Failure modes",
            list(annotations.FAILURE_MODES),
            default=cur.failure_modes if cur else suggested,
            format_func=lambda m: m.replace("_", " "),
            key=f"{key_prefix}-modes-{version_id}",
        )
        notes = st.text_area("Notes", value=(cur.notes or "") if cur else "", key=f"{key_prefix}-notes-{version_id}")
        ready = st.checkbox(
            "Exemplar-ready", value=cur.exemplar_ready if cur else False, key=f"{key_prefix}-ready-{version_id}"
        )
        by = _annotator(f"{key_prefix}-by-{version_id}")
        if st.form_submit_button("Save annotation"):
            try:
                annotations.annotate_version(
                    store,
                    version_id,
                    by=by,
                    verdict=None if verdict == "(none)" else verdict,
                    failure_modes=modes,
                    notes=notes,
                    exemplar_ready=ready,
                )
                st.success("Annotation saved.")
            except (StoreError, ValueError) as exc:
                alert(str(exc).splitlines()[0])
    exemplar_set_adder(store, version_id, key_prefix, env=env or store.episodes.get(version.episode_id).task.env)
    _history(store, version_id)


def _suggested_modes(store: Store, version_id: int, steps: list | None, outcome: Any) -> list[str]:
    """Before any annotation, the failure modes the signals suggest (shown; saved only if the person saves them)."""
    suggested = suggest_failure_modes(
        version_signals([s.signals for s in (store.versions.steps(version_id) if steps is None else steps)], outcome),
        outcome,
    )
    if suggested:
        st.caption(
            "Failure modes suggested by the signals: "
            + ", ".join(m.replace("_", " ") for m in suggested)
            + ". Review them, then save to confirm, or clear them."
        )
    return suggested


def _history(store: Store, version_id: int) -> None:
    """The version's annotation history, newest first."""
    hist = annotations.version_history(store, version_id)
    if hist:
        with st.expander(f"Annotation history ({len(hist)})"):
            st.dataframe(
                [
                    {
                        "when": a.created_at,
                        "by": a.annotator,
                        "verdict": a.verdict or "",
                        "failure modes": ", ".join(a.failure_modes),
                        "exemplar-ready": a.exemplar_ready,
                        "notes": a.notes or "",
                    }
                    for a in reversed(hist)
                ],
                hide_index=True,
            )


NEW_SET = "(new set)"
BUILTIN_BASE, EMPTY_BASE = "the built-in exemplars", "nothing (an empty set)"


def base_options(env: str, names: list[str]) -> dict[str, str | None]:
    """What a new set can start from: label -> base (`agent.exemplars.create_set`)."""
    out: dict[str, str | None] = {}
    try:
        if exemplars.builtin_prompt_dict(env):
            out[BUILTIN_BASE] = exemplars.BUILTIN
    except exemplars.ExemplarError:
        pass
    out[EMPTY_BASE] = None
    return {**out, **{f"a copy of set {n}": n for n in names}}


def default_base(bases: dict[str, str | None], ran_with: str | None) -> str | None:
    """The set the version's episode ran with (an experiment's set), else the built-in exemplars."""
    if ran_with is not None and ran_with in bases.values():
        return ran_with
    return exemplars.BUILTIN if exemplars.BUILTIN in bases.values() else None


def exemplar_set_adder(store: Store, version_id: int, key_prefix: str, env: str | None = None) -> None:
    """ "Add to exemplar set" beside exemplar-ready: pick one of the environment's sets or
    name a new one (prefilled); the sets holding the version are listed at once.
    `env`: the version's environment when the caller knows it already."""
    env = env or store.episodes.get(store.versions.get(version_id).episode_id).task.env
    sets = exemplar_sets.list_sets(store, env)  # read once: the sets holding the version, and the selector
    held = [
        x.name
        for x in sets
        if x.entries and any(e.version_id == version_id for e in exemplar_sets.entries(store, x.name))
    ]
    if held:
        plain_caption("In exemplar set" + ("s " if len(held) > 1 else " ") + ", ".join(held))
    names = [x.name for x in sets]
    key = f"{key_prefix}-xset-{version_id}"
    if st.session_state.get(f"{key}-added") in names:  # the selector shows the set it went to
        st.session_state[key] = st.session_state.pop(f"{key}-added")
    c = st.columns([2, 2, 2, 1], vertical_alignment="bottom")
    pick = c[0].selectbox("Exemplar set", [*names, NEW_SET], key=key)
    new = c[1].text_input(
        "New set name",
        value=exemplar_sets.free_name(store, f"{env}-fixes"),
        key=f"{key_prefix}-xnew-{version_id}",
        disabled=pick != NEW_SET,
    )
    bases = base_options(env, names)
    ran_with = store.episodes.get(store.versions.get(version_id).episode_id).config.exemplar_set
    base = c[2].selectbox(
        "Start from",
        list(bases),
        index=list(bases.values()).index(default_base(bases, ran_with)),
        key=f"{key_prefix}-xbase-{version_id}",
        disabled=pick != NEW_SET,
        help="A new set built on the built-in exemplars (or a copy of another set) keeps every task "
        "type; the fix takes the place of the entry of its own type.",
    )
    if c[3].button("Add to exemplar set", key=f"{key_prefix}-xadd-{version_id}"):
        name = new.strip() if pick == NEW_SET else pick
        try:
            with store.transaction():
                if pick == NEW_SET:
                    exemplars.create_set(store, name, env, bases[base])
                exemplar_sets.add_version(store, name, version_id)
            st.session_state[f"{key}-added"] = name
            st.session_state["flash_exemplar_set"] = f"Added to exemplar set {name!r}."
            st.rerun()
        except (StoreError, ValueError) as exc:
            alert(str(exc).splitlines()[0])
    flash = st.session_state.pop("flash_exemplar_set", None)
    if flash:
        alert(flash, "success")


def step_tag_panel(store: Store, step_id: int, key_prefix: str) -> None:
    """Tags (suggested or free) and a note for one step."""
    cur = annotations.step_annotation(store, step_id)
    tags = list(cur.tags) if cur else []
    options = list(dict.fromkeys([*annotations.STEP_TAGS, *tags]))
    with st.form(key=f"{key_prefix}-st-{step_id}"):
        chosen = st.multiselect("Tags", options, default=tags, key=f"{key_prefix}-tags-{step_id}")
        extra = st.text_input("Other tag", value="", key=f"{key_prefix}-extra-{step_id}")
        note = st.text_input("Note", value=(cur.note or "") if cur else "", key=f"{key_prefix}-note-{step_id}")
        by = _annotator(f"{key_prefix}-sby-{step_id}")
        if st.form_submit_button("Save tags"):
            try:
                annotations.tag_step(
                    store, step_id, by=by, tags=[*chosen, *([extra] if extra.strip() else [])], note=note
                )
                st.success("Tags saved.")
            except (StoreError, ValueError) as exc:
                alert(str(exc).splitlines()[0])


def _annotator(key: str) -> str:
    """The signed-in person's name when there is one (OIDC login), else a name typed here."""
    signed = access.signed_in_name()
    if signed:
        plain_caption(f"Annotator: {signed} (signed in)")  # a name or e-mail from the sign-in: plain
        return signed
    return st.text_input("Annotator", value=annotations.current_user(), key=key)
