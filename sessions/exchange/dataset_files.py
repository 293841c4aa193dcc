"""Writers of the training records: JSONL (streamed), Parquet (pyarrow, `--out X.parquet`) and a
`datasets` dataset saved to disk with its dataset card (`--out DIR --hf`: README.md naming the
source database, the filters, the counts and the schema). Each writes into a temporary file or
folder beside the target and renames it at the end: a failed export leaves nothing half made."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Iterable

from sessions.exchange.jsonl_encoder import _dumps
from sessions.exchange.sink import ExportError, _check_folder, _check_target, _shown, _Sink
from sessions.exchange.training_options import Counts

OUTPUTS = ("jsonl", "parquet", "hf")


def output_kind(out: str | os.PathLike[str] | IO[str], hf: bool) -> str:
    """jsonl, parquet (a path ending in .parquet) or hf (`hf`: a folder)."""
    if hf:
        if not isinstance(out, (str, os.PathLike)) or str(out) == "-":
            raise ExportError("--hf saves a dataset folder: give --out DIR")
        return "hf"
    if isinstance(out, (str, os.PathLike)) and str(out).lower().endswith(".parquet"):
        return "parquet"
    return "jsonl"


def write_jsonl(records: Iterable[dict[str, Any]], sink: _Sink) -> int:
    n = 0
    for rec in records:
        sink.write(_dumps(rec) + "\n")
        n += 1
    return n


BATCH = 1000  # records turned into an Arrow table at a time (columnar: far smaller than the dicts)


def _table(records: Iterable[dict[str, Any]]) -> Any:  # a pyarrow.Table (pyarrow ships no types)
    """The records as one Arrow table, made a batch at a time; the batches' schemas are unified
    (a message key or a tool property that appears only in a later batch becomes a column)."""
    import pyarrow as pa

    tables: list[Any] = []
    rows: list[dict[str, Any]] = []
    try:
        for rec in records:
            rows.append(rec)
            if len(rows) == BATCH:
                tables.append(pa.Table.from_pylist(rows))
                rows = []
        if rows or not tables:
            tables.append(pa.Table.from_pylist(rows))
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:  # pragma: no cover - the records have one shape
        raise ExportError(f"cannot make a table of the records: {str(exc).splitlines()[0]}") from None


def write_parquet(records: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> tuple[int, int]:
    """(records, bytes) written to `path` (a temp file renamed over it)."""
    import pyarrow.parquet as pq

    target = Path(path)
    _check_target(target)
    _check_folder(target)
    table = _table(records)
    fd, tmp = tempfile.mkstemp(prefix=".export-", suffix=".parquet", dir=str(target.parent))
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        _check_target(target)
        os.replace(tmp, target)
    except OSError as exc:
        raise ExportError(f"cannot write {_shown(target)}: {exc.strerror or exc}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return table.num_rows, target.stat().st_size


def write_hf(
    records: Iterable[dict[str, Any]], folder: str | os.PathLike[str], card: dict[str, Any]
) -> tuple[int, int]:
    """(records, bytes) of a `datasets.Dataset` saved to `folder` (new, or an empty folder)
    with README.md, its dataset card."""
    import datasets

    target = Path(folder)
    if target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        raise ExportError(f"{_shown(target)} exists and is not an empty folder; give a new folder for --hf")
    _check_folder(target)
    table = _table(records)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=str(target.parent)))
    try:
        ds = datasets.Dataset(table)
        shown = not datasets.are_progress_bars_disabled()
        datasets.disable_progress_bars()  # (its bar on stderr would break the command's one-line output)
        try:
            ds.save_to_disk(str(tmp))
        finally:
            if shown:
                datasets.enable_progress_bars()
        (tmp / "README.md").write_text(card_text(card, ds), encoding="utf-8")
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    except OSError as exc:
        raise ExportError(f"cannot write {_shown(target)}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    return table.num_rows, size


def card_text(card: dict[str, Any], ds: Any) -> str:
    """The dataset card: where the records come from, how they were chosen, how many and the schema."""
    counts: Counts = card["counts"]
    lines = [
        "---",
        "tags:",
        "- trl",
        f"- {card['format']}",
        "- react-editor",
        "---",
        "",
        f"# {card['format']} records exported by ReAct Editor",
        "",
        f"- format: `{card['format']}` (TRL: {card['trl_type']}; docs/training-data.md)",
        f"- source database: `{card['db']}`",
        f"- selection: {card['selection']}",
        f"- options: `{_dumps(card['options'])}`",
        f"- records: {counts.written}",
        f"- left out: {counts.total_left_out}",
    ]
    lines += [f"  - {n}: {why}" for why, n in sorted(counts.left_out.items(), key=lambda x: (-x[1], x[0]))]
    lines += ["", "## Schema", "", "```", str(ds.features), "```", ""]
    return "\n".join(lines)


TRL_TYPES = {
    "chat-sft": "conversational language modeling (with tools)",
    "dpo": "conversational preference",
    "kto": "conversational unpaired preference",
    "steps": "stepwise supervision",
}
