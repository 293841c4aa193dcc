"""The Export page's training formats - chat-sft, dpo, kto, steps (`sessions.exchange.training`,
the library call `react-editor export --format ...` makes too): their options, the file written
(JSONL or Parquet), the records written and left out (by reason), a preview of the first records
(st.json and st.dataframe: model text is never rendered as HTML or markdown) and a download."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from sessions import experiments
from sessions.exchange import export
from sessions.exchange.training import TRAINING_FORMATS
from sessions.exchange.training_options import CONTINUATIONS, UNITS, TrainingOptions
from sessions.store import Store

__all__ = ["TRAINING_FORMATS", "options_form", "output_choice", "prepare", "preview_records", "show"]

OUTPUTS = {
    "JSONL": ("jsonl", "application/jsonl"),
    "Parquet": ("parquet", "application/vnd.apache.parquet"),
    "datasets folder (zip)": ("hf", "application/zip"),  # `export --hf`: load_from_disk after unzipping
}
PREVIEW_RECORDS = 3
ABOUT = {
    "chat-sft": "one conversation per version (TRL's conversational form, with tools), negative step tags masked",
    "dpo": "preference pairs: the shared prefix as prompt, the two branches as chosen / rejected, chosen by a "
    "person's judgment, then a proven what-if, then the outcomes",
    "kto": "unpaired labels: a prompt, a completion and a true/false label from verdicts, outcomes and step tags",
    "steps": "step values: each step's measured success rate from its rollouts (TRL's stepwise supervision)",
}
CONTINUATION_WORDS = {"step": "the one step they differ at", "rest": "the rest of each branch"}


def options_form(store: Store, fmt: str) -> TrainingOptions:
    """The options of `fmt` (those TrainingOptions has for it), checked."""
    st.caption(ABOUT.get(fmt, ""))
    kw: dict[str, Any] = {}
    if fmt == "dpo":
        c = st.columns(4)
        kw["continuation"] = c[0].radio(
            "Chosen / rejected hold",
            CONTINUATIONS,
            index=CONTINUATIONS.index("rest"),
            format_func=CONTINUATION_WORDS.get,
            key="exp-continuation",
        )
        kw["implicit_prompt"] = c[1].checkbox(
            "Implicit prompt",
            key="exp-implicit",
            help="the prompt inside chosen and rejected (TRL's implicit-prompt form)",
        )
        kw["proven_only"] = c[2].checkbox(
            "Proven pairs only", key="exp-proven", help="only pairs whose edit a what-if proved"
        )
        effect = c[3].number_input(
            "Minimum what-if effect (0 = any)",
            min_value=0.0,
            max_value=1.0,
            value=0.0,
            step=0.05,
            key="exp-min-effect",
            help="a difference of success rates, 0 to 1",
        )
        kw["min_effect"] = float(effect) or None
    elif fmt == "kto":
        kw["unit"] = st.radio("A label per", UNITS, index=UNITS.index("trajectory"), horizontal=True, key="exp-unit")
    names = [x.name for x in experiments.list_all(store)]
    if names:
        kw["exclude_experiments"] = tuple(
            st.multiselect("Leave out every task of these experiments (their test sets)", names, key="exp-exclude")
        )
    return TrainingOptions(**kw).check()


def output_choice() -> str:
    """jsonl, parquet or hf (a `datasets` folder with its card, downloaded as a zip)."""
    label = st.radio("File", list(OUTPUTS), horizontal=True, key="exp-output")
    return OUTPUTS[label][0]


def file_name(stem_name: str, kind: str) -> str:
    """`4-versions-2-episodes.dpo.jsonl` -> `.dpo.parquet` for a Parquet file, `.dpo.zip` for a
    zipped `datasets` folder."""
    ext = {"parquet": ".parquet", "hf": ".zip"}.get(kind)
    return stem_name[: -len(".jsonl")] + ext if ext and stem_name.endswith(".jsonl") else stem_name


def prepare(store: Store, fmt: str, kind: str, options: TrainingOptions, **selection: Any) -> tuple[bytes, dict]:
    """The export written to a temporary file (JSONL or Parquet): its bytes and its report."""
    with tempfile.TemporaryDirectory(prefix="react-editor-export-") as folder:  # this process's own folder
        if kind == "hf":
            return _dataset_zip(store, fmt, Path(folder), options, **selection)
        target = Path(folder) / f"export.{kind}"
        rep = export(store, fmt, str(target), options=options, **selection)
        return target.read_bytes(), rep.as_json()


def _dataset_zip(
    store: Store, fmt: str, folder: Path, options: TrainingOptions, **selection: Any
) -> tuple[bytes, dict]:
    """`export --hf` into `folder/dataset` (the dataset and its card), zipped; the report carries
    the first records as `datasets.load_from_disk` reads them (the zip itself is not previewed)."""
    import datasets

    target = folder / "dataset"
    rep = export(store, fmt, str(target), options=options, hf=True, source=str(store.file), **selection).as_json()
    loaded = datasets.load_from_disk(str(target))
    rep["preview"] = loaded.select(range(min(PREVIEW_RECORDS, len(loaded)))).to_list()
    archive = shutil.make_archive(str(folder / "dataset"), "zip", root_dir=folder, base_dir="dataset")
    return Path(archive).read_bytes(), rep


def preview_records(data: bytes, kind: str, n: int = PREVIEW_RECORDS) -> list[dict[str, Any]]:
    """The first `n` records of a written file, read back as a reader of the file would."""
    if kind == "hf":  # a zip: `prepare` read its first records back
        return []
    if kind == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(data))
        return table.slice(0, n).to_pylist()
    out = []
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            out.append(json.loads(line))
            if len(out) == n:
                break
    return out


def _cell(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + " ..."


def show(data: bytes, rep: dict, fmt: str, name: str) -> None:
    """Counts (written, left out by reason), the first records, and the download."""
    kind = rep.get("output", "jsonl")
    left = rep.get("left_out") or {}
    st.text(
        f"{fmt}: wrote {rep['records']:,} record{'s' if rep['records'] != 1 else ''}, left out "
        f"{sum(left.values()):,}; {rep['bytes']:,} bytes ({kind})"
    )
    if left:
        st.dataframe(
            [{"left out": n, "why": why} for why, n in sorted(left.items(), key=lambda x: (-x[1], x[0]))],
            hide_index=True,
            key="exp-left-out",
        )
    first = rep.get("preview") or preview_records(data, kind)
    if first:
        st.caption(f"The first {len(first)} of {rep['records']:,} records of {name}:")
        st.dataframe([{k: _cell(v) for k, v in r.items()} for r in first], hide_index=True, key="exp-preview")
        for i, r in enumerate(first, 1):
            with st.expander(f"Record {i}"):
                st.json(r, expanded=2)
    else:
        st.caption("No record was written.")
    mime = next(m for k, m in OUTPUTS.values() if k == kind)
    st.download_button("Download", data, file_name=name, mime=mime, key="exp-download")
