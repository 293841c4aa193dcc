"""Export page: choose versions (filters or explicit EPISODE:VERSION refs) or an exemplar
set, a format, and download; the training formats (chat-sft, dpo, kto, steps) with their
options, counts and a preview of their first records (`export_training.py`); import a file;
build exemplar sets from chosen versions. UI only - every action is a library call in
sessions.exchange / exemplar_sets."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import streamlit as st

from agent import exemplars
from app_pages import alerts, app_engine, export_training
from app_pages.annotate_widgets import BUILTIN_BASE, EMPTY_BASE
from app_pages.page_text import plural
from envs.registry import kinds
from sessions import exemplar_sets, numbering
from sessions.exchange import FORMATS, Filters, export, import_file, parse_ref, select
from sessions.store import Store, StoreError

MIME = {
    "prompt": "text/plain",
    "react-json": "application/json",
    "jsonl": "application/jsonl",
    **{f: "application/jsonl" for f in export_training.TRAINING_FORMATS},
}
EXT = {
    "prompt": "txt",
    "react-json": "json",
    "jsonl": "jsonl",
    **{f: "jsonl" for f in export_training.TRAINING_FORMATS},
}
# The page opens on a format any selection can be written in: a prompt or react-json file holds
# one environment, so with "(any)" environment and episodes of two it could only fail.
DEFAULT_FORMAT = "jsonl"
ONE_ENV_FORMATS = ("prompt", "react-json")
PREVIEW_LINES = 20


def _filters() -> tuple[list, Filters]:
    c1, c2, c3 = st.columns(3)
    env = c1.selectbox("Environment", ["(any)", *kinds()], key="exp-env")
    task_type = c2.text_input("Task type (prefix)", key="exp-type")
    outcome = c3.selectbox("Outcome", ["(any)", "success", "failure", "unfinished"], key="exp-outcome")
    c4, c5, c6 = st.columns(3)
    verdict = c4.selectbox("Verdict", ["(any)", "success", "failure", "unsure"], key="exp-verdict")
    annotator = c5.text_input("Annotator", key="exp-annotator")
    refs_text = c6.text_input("Versions (EPISODE[:VERSION] ...)", key="exp-refs")
    c7, c8, c9 = st.columns(3)
    edited = c7.checkbox("Edited only", key="exp-edited")
    ready = c8.checkbox("Exemplar-ready only", key="exp-ready")
    all_versions = c9.checkbox("All versions (not only current)", key="exp-all")
    refs = [parse_ref(s) for s in refs_text.replace(",", " ").split()]
    f = Filters(
        env=None if env == "(any)" else env,
        task_type=task_type.strip() or None,
        outcome=None if outcome == "(any)" else outcome,
        verdict=None if verdict == "(any)" else verdict,
        edited=edited,
        exemplar_ready=ready,
        annotator=annotator.strip() or None,
        all_versions=all_versions,
    )
    return refs, f.check()


def _run_export(store: Store, fmt: str, **kw) -> tuple[bytes, dict]:
    fd, tmp = tempfile.mkstemp(suffix="." + EXT[fmt])
    os.close(fd)
    try:
        rep = export(store, fmt, tmp, **kw)
        return Path(tmp).read_bytes(), rep.as_json()
    finally:
        os.unlink(tmp)


def download_name(
    fmt: str,
    *,
    exemplar_set: str | None = None,
    rows: list[tuple[int, int]] | None = None,
    labels: dict[int, str] | None = None,
) -> str:
    """A file name that says what is inside: `episode-3-v2.prompt.txt`, `exemplars-my-fixes.react-json.json`,
    `4-versions-2-episodes.jsonl` (names cleaned to letters, digits, dot, dash, underscore)."""
    if exemplar_set is not None:
        stem = "exemplars-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", exemplar_set).strip("-.") or "set")
    elif rows and len(rows) == 1:
        ep, vid = rows[0]
        stem = f"episode-{ep}-{(labels or {}).get(vid, f'v{vid}')}"
    else:
        rows = rows or []
        stem = f"{plural(len(rows), 'version')}-{plural(len({e for e, _ in rows}), 'episode')}".replace(" ", "-")
    return f"{stem}.{fmt}" if fmt == EXT[fmt] else f"{stem}.{fmt}.{EXT[fmt]}"  # never .jsonl.jsonl


def page_words(msg: str) -> str:
    """The library's message with the page's control instead of the command line's flag."""
    return msg.replace("filter by --env", "pick one in Environment above")


def preview(data: bytes, lines: int = PREVIEW_LINES) -> tuple[str, bool]:
    """The first lines of an export as text, and whether there is more."""
    text = data.decode("utf-8", errors="replace")
    parts = text.splitlines()
    return "\n".join(parts[:lines]), len(parts) > lines


def _export_section(store: Store) -> None:
    st.subheader("Export versions or an exemplar set")
    source = st.radio("What to export", ["Versions", "Exemplar set"], horizontal=True, key="exp-source")
    fmt = st.selectbox("Format", FORMATS, index=FORMATS.index(DEFAULT_FORMAT), key="exp-format")
    kw: dict = {}
    training = fmt in export_training.TRAINING_FORMATS and source == "Versions"
    if source == "Exemplar set":
        names = [s.name for s in exemplar_sets.list_sets(store)]
        if not names:
            st.info("No exemplar sets yet: import a ReAct prompt file or add versions below.")
            return
        kw["exemplar_set"] = st.selectbox("Exemplar set", names, key="exp-set")
    else:
        refs, f = _filters()
        kw.update(refs=refs or None, filters=f)
        batches = list(select(store, refs or None, f))
        rows = [(b.episode.id, v.id) for b in batches for v in b.versions]
        nums = numbering.labels(store, rows[0][0]) if len(rows) == 1 else {}
        kw["_name"] = download_name(fmt, rows=rows, labels=nums)
        st.caption(f"{plural(len(rows), 'version')} match{'es' if len(rows) == 1 else ''}.")
        envs = sorted({b.episode.task.env for b in batches})
        if fmt in ONE_ENV_FORMATS and len(envs) > 1:  # said before the button, not after it fails
            st.caption(
                f"A {fmt} file holds one environment and these versions are of {len(envs)}: "
                "pick one in Environment above, or choose jsonl."
            )
        if training and fmt != "chat-sft" and not refs:
            st.caption(f"{fmt} reads every version of the matching episodes (pairs and values live across versions).")
    name = kw.pop("_name", None) or download_name(fmt, exemplar_set=kw.get("exemplar_set"))
    if training:
        kw["options"] = export_training.options_form(store, fmt)
        kind = export_training.output_choice()
        name = export_training.file_name(name, kind)
    if st.button("Prepare export", key="exp-go"):
        try:
            if training:
                data, rep = export_training.prepare(store, fmt, kind, kw.pop("options"), **kw)
            else:
                data, rep = _run_export(store, fmt, **kw)
            st.session_state["exp-data"] = (data, rep, fmt, name)
        except (StoreError, ValueError) as exc:
            st.session_state.pop("exp-data", None)
            alerts.alert(page_words(str(exc).splitlines()[0]))
    if "exp-data" in st.session_state:
        data, rep, f_, fname = st.session_state["exp-data"]
        if f_ in export_training.TRAINING_FORMATS:
            export_training.show(data, rep, f_, fname)
            return
        st.text(
            f"{plural(rep['records'], 'record')} - {plural(rep['versions'], 'version')}, "
            f"{plural(rep['episodes'], 'episode')}, {plural(rep['steps'], 'step')}, {rep['bytes']:,} bytes"
        )
        head, more = preview(data)
        st.caption(f"The first {PREVIEW_LINES} lines of {fname}:" if more else f"All of {fname}:")
        st.code(head, language=None, wrap_lines=True)
        st.download_button("Download", data, file_name=fname, mime=MIME[f_], key="exp-download")


def _import_section(store: Store) -> None:
    st.subheader("Import")
    up = st.file_uploader(
        "ReAct prompt file (.json), transcript (.txt) or jsonl export (.jsonl)",
        type=["json", "jsonl", "txt"],
        key="imp-file",
    )
    env = st.selectbox("Environment (transcripts)", ["(detect)", *kinds()], key="imp-env")
    if up is not None and st.button("Import", key="imp-go"):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / Path(up.name).name
            p.write_bytes(up.getvalue())
            try:
                rep = import_file(store, p, env=None if env == "(detect)" else env)
                msg = f"Imported {len(rep.episodes)} episodes ({rep.versions} versions)."
                if rep.exemplar_set:
                    msg += f" Exemplar set: {rep.exemplar_set}."
                alerts.alert(msg, "success")
            except (StoreError, ValueError) as exc:
                alerts.alert(str(exc).splitlines()[0])


def _sets_section(store: Store) -> None:
    st.subheader("Exemplar sets")
    all_sets = exemplar_sets.list_sets(store)
    if all_sets:
        st.dataframe(
            [
                {
                    "name": s.name,
                    "env": s.env,
                    "entries": s.entries,
                    "from": s.base_note or "",
                    "description": s.description or "",
                }
                for s in all_sets
            ],
            hide_index=True,
        )
    with st.form("set-add"):
        name = st.text_input("Set name", key="set-name")
        env = st.selectbox("Environment (new set)", list(kinds()), key="set-env")
        start = st.selectbox(
            "Start from (new set)",
            [BUILTIN_BASE, EMPTY_BASE, *(s.name for s in all_sets)],
            key="set-base",
            help="the built-in exemplars of its environment, nothing, or a copy of a set",
        )
        refs_text = st.text_input("Versions to add (EPISODE[:VERSION] ...)", key="set-refs")
        if st.form_submit_button("Add to set"):
            try:
                refs = [parse_ref(s) for s in refs_text.replace(",", " ").split()]
                if not refs:
                    raise ValueError("give at least one version")
                with store.transaction():
                    if name not in {s.name for s in all_sets}:
                        base = {BUILTIN_BASE: exemplars.BUILTIN, EMPTY_BASE: None}.get(start, start)
                        exemplars.create_set(store, name, env, base)
                    for b in select(store, refs):
                        for v in b.versions:
                            exemplar_sets.add_version(store, name, v.id)
                st.session_state["set-flash"] = f"Exemplar set {name!r} updated."
                st.rerun()  # the table above shows the new entries at once
            except (StoreError, ValueError) as exc:
                alerts.alert(str(exc).splitlines()[0])
    flash = st.session_state.pop("set-flash", None)
    if flash:
        alerts.alert(flash, "success")


def page() -> None:
    st.title("Export and import")
    try:
        store = app_engine.store()
    except StoreError as exc:
        alerts.alert(str(exc).splitlines()[0])
        return
    try:
        _export_section(store)
    except (StoreError, ValueError) as exc:
        alerts.alert(str(exc).splitlines()[0])
    _import_section(store)
    _sets_section(store)


if __name__ == "__main__":  # pragma: no cover - `streamlit run app_pages/export.py`
    page()
