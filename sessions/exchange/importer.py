"""Import: the original ReAct prompt files (`react-json`), plain-text transcripts
(`prompt`), our own `jsonl` (`import_jsonl.py`) and `chat-sft` files (`import_chat.py`) back
in. Validation first, then one transaction: a malformed file is rejected with its line number
and the reason, and nothing is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, cast

from sessions import exemplar_sets
from sessions.exchange import import_chat
from sessions.exchange.import_jsonl import _check_text, _episode_digests, _jsonl, _lines, parse_record
from sessions.exchange.import_report import MAX_FILE_BYTES, MAX_LINE_BYTES, TOO_DEEP, ImportFailed, ImportReport, _fail
from sessions.exchange.json_text import lone_surrogate
from sessions.row_records import stored_id
from sessions.store import Store
from trajectory import kinds
from trajectory.prompt_files import ParsedEntry, PromptFileError
from trajectory.records import IMPORT_DIGEST, AgentConfig, Outcome, PromptStyle, Step, Task

IMPORT_FORMATS = ("auto", "react-json", "jsonl", "prompt", "chat-sft")


# ---------------------------------------------------------------------- format detection


def detect_format(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(65536)
    suffix = path.suffix.lower()
    first = head.lstrip()[:1]
    if first == b"{" and _first_line_is_chat(head):
        return "chat-sft"
    if suffix == ".jsonl" or (first == b"{" and b"\n" in head.lstrip() and _first_line_is_record(head)):
        return "jsonl"
    if suffix == ".json" or first == b"{":
        return "react-json"
    if suffix == ".txt":
        return "prompt"
    raise ImportFailed(
        f"unknown format of {path.name}: expected a ReAct prompt file (.json), a jsonl export (.jsonl) "
        "or a transcript (.txt); pass --format"
    )


def _first_line_is_chat(head: bytes) -> bool:
    """A chat-sft line: `messages` and no `schema` (a first line longer than the head is not one)."""
    line = head.lstrip().split(b"\n", 1)[0]
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and "messages" in obj and "schema" not in obj


def _first_line_is_record(head: bytes) -> bool:
    line = head.lstrip().split(b"\n", 1)[0]
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and ("schema" in obj or "messages" in obj)


def import_file(
    store: Store,
    path: str | os.PathLike[str],
    *,
    fmt: str = "auto",
    env: str | None = None,
    set_name: str | None = None,
    by: str | None = None,
    find_task: Callable[[str, str], Task | None] | None = None,
    as_new: bool = False,
) -> ImportReport:
    """Validate the whole file, then write it in one transaction. `find_task(env, text)`
    names the dataset task a transcript's question or claim is (its gold answer is used);
    without it, or when the text is unknown, an imported task has no gold answer. A jsonl
    episode whose records are already here (imported before, same content) is not copied
    again unless `as_new`."""
    p = Path(path)
    if not p.exists():
        raise ImportFailed(f"no such file: {p}")
    if p.is_dir():
        raise ImportFailed(f"{p} is a directory")
    if not p.is_file():  # a FIFO or device: reading it would block or never end
        raise ImportFailed(f"{p} is not a regular file")
    if fmt not in IMPORT_FORMATS:
        raise ImportFailed(f"unknown import format {fmt!r} (one of: {', '.join(IMPORT_FORMATS)})")
    if env is not None and env not in kinds.known():
        raise ImportFailed(f"unknown environment {env!r} (one of: {', '.join(kinds.known())})")
    if fmt == "auto":
        fmt = detect_format(p)
    if set_name is not None:
        exemplar_sets._check_name(set_name)
        if exemplar_sets.exists(store, set_name):
            raise ImportFailed(f"an exemplar set named {set_name!r} exists already")
    if fmt in ("jsonl", "chat-sft") and set_name is not None:
        raise ImportFailed(f"--set is for prompt files; a {fmt} import makes episodes only")
    if fmt == "chat-sft":
        return _import_chat(store, p, env, by)
    if fmt == "jsonl":
        return _import_jsonl(store, p, as_new)
    env, parsed = _read_prompt_file(p, fmt, env)
    for entry in parsed:
        for t in entry.trajectories:
            for st in t.steps:
                _check_text(None, f"{entry.key} step {st.index}", st.thought, st.action)
    report = ImportReport(fmt, str(p))
    golds = _dataset_golds(env, parsed, find_task)  # before the write lock: may read a dataset
    with store.transaction():
        _write_prompt_entries(store, p, env, parsed, set_name, by, report, golds)
    return report


def _import_chat(store: Store, p: Path, env: str | None, by: str | None) -> ImportReport:
    chats = import_chat.read_chat(p, env)  # every line checked before the write transaction
    report = ImportReport("chat-sft", str(p))
    with store.transaction():
        import_chat.write_chat(store, chats, report, by)
    return report


def _import_jsonl(store: Store, p: Path, as_new: bool) -> ImportReport:
    """Read, parse and validate first; the write transaction (which blocks every other writer)
    only copies the prepared records in."""
    records = [(n, parse_record(n, line)) for n, line in _lines(p, MAX_LINE_BYTES)]
    _jsonl(p.name, records, None, ImportReport("jsonl", str(p)))  # validation pass: nothing written
    digests = _episode_digests(records)
    report = ImportReport("jsonl", str(p))
    with store.transaction():
        present = {} if as_new else store.episodes.by_option(IMPORT_DIGEST, sorted(set(digests.values())))
        report.already_present = sorted({present[d] for d in digests.values() if d in present})
        fresh = [(n, r) for n, r in records if digests[r.episode.ref] not in present]
        _jsonl(p.name, fresh, store, report, digests)
    return report


# ---------------------------------------------------------------------- prompt files


def _read_text(p: Path) -> str:
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ImportFailed(f"{p.name} is {size / 2**20:.0f} MB; a prompt file is at most {MAX_FILE_BYTES // 2**20} MB")
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _fail(line, "not UTF-8 text") from None


def _line_of(text: str, key: str) -> int:
    at = text.find(json.dumps(key) + ":")
    if at < 0:
        at = text.find(json.dumps(key))
    return text[: max(at, 0)].count("\n") + 1


def _read_prompt_file(p: Path, fmt: str, env: str | None) -> tuple[str, list[ParsedEntry]]:
    text = _read_text(p)
    if fmt == "prompt":
        try:
            env = env or kind_of(text)
            return env, kinds.transcript(env).parse_prompt_text(text, source=p.name)
        except PromptFileError as exc:
            raise _fail(1, str(exc)) from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(exc.lineno, f"bad JSON ({exc.msg}, column {exc.colno})") from None
    except RecursionError:
        raise _fail(None, TOO_DEEP) from None
    if not isinstance(d, dict) or not d:
        raise _fail(1, "a ReAct prompt file is a non-empty JSON object of strings (key -> prompt text)")
    if lone_surrogate(raw := text.encode("utf-8"), d):
        k, why = next((k, why) for k, v in d.items() if (why := lone_surrogate(raw, [k, v])))
        raise _fail(_line_of(text, k), f"entry {k[:60]!r}: {why}")
    for k, v in d.items():
        if not isinstance(v, str):
            raise _fail(_line_of(text, k), f"entry {k!r} is {type(v).__name__}, not a string")
    if {"schema", "episode", "version"} <= set(d):
        raise _fail(1, "this is a jsonl record, not a prompt file; use --format jsonl")
    try:
        env = env or kind_of(d)
        return env, kinds.transcript(env).parse_prompt_file(d, source=p.name)
    except PromptFileError as exc:
        raise _fail(1, str(exc)) from None


def kind_of(data: dict[str, str] | str) -> str:
    """The kind whose layout a prompt file (or a plain transcript) is in: the first kind
    (built-in first) whose transcript claims it; a dict in two layouts is refused."""
    claimants = [k for k in kinds.known() if _claims(k, data)]
    if not claimants:
        raise PromptFileError("no ReAct trajectory entries (react_*/act_* or webthink_*/webact_*) in this file")
    first = kinds.transcript(claimants[0])
    other = next((k for k in claimants if type(kinds.transcript(k)) is not type(first)), None)
    if isinstance(data, dict) and other is not None:
        raise PromptFileError(f"the file mixes {claimants[0]} and {other} entries; import them separately")
    return claimants[0]


def _claims(kind: str, data: dict[str, str] | str) -> bool:
    try:
        return kinds.transcript(kind).claims(data)
    except Exception:
        return False


def _dataset_golds(
    env: str, parsed: list[ParsedEntry], find_task: Callable[[str, str], Task | None] | None
) -> dict[str, Task]:
    """{task text: dataset task} for the transcripts whose question or claim is known."""
    if find_task is None:
        return {}
    out: dict[str, Task] = {}
    for entry in parsed:
        for t in entry.trajectories:
            if t.task_text not in out and (found := find_task(env, t.task_text)) is not None:
                out[t.task_text] = found
    return out


def _imported_outcome(steps: list[Step]) -> Outcome | None:
    """A transcript that ends in an accepted Finish is finished, scored by its observation."""
    if not steps or not steps[-1].done:
        return None
    last = steps[-1]
    scored = last.observation is not None
    return Outcome(done=True, reward=last.reward, success=(last.reward > 0) if scored else None)


def _write_prompt_entries(
    store: Store,
    p: Path,
    env: str,
    parsed: list[ParsedEntry],
    set_name: str | None,
    by: str | None,
    report: ImportReport,
    golds: dict[str, Task] | None = None,
) -> None:
    name = set_name or exemplar_sets.free_name(store, p.stem)
    exemplar_sets.create_set(store, name, env, description=f"imported from {p.name}", source=p.name, by=by)
    report.exemplar_set = name
    for entry in parsed:
        if not entry.trajectories:
            exemplar_sets.add_raw(store, name, entry.key, entry.raw or "", by=by)
            report.raw_entries += 1
            continue
        for t in entry.trajectories:
            known = (golds or {}).get(t.task_text)
            data = {**t.data, "dataset_task": known.key} if known else t.data
            task = Task(
                env=t.env,
                id=t.task_id,
                type=t.task_type or (known.type if known else None),
                text=t.task_text,
                gold=known.gold if known else t.gold,
                source="imported",
                data=data,
            )
            # (the parser gives react or act; AgentConfig checks it)
            ep, v = store.episodes.create(task, AgentConfig(style=cast(PromptStyle, t.style)), {}, name=t.name)
            vid = stored_id(v.id)
            if t.steps:
                store.versions.append(vid, t.steps, outcome=_imported_outcome(t.steps))
            exemplar_sets.add_version(store, name, vid, by=by)
            report.episodes.append(stored_id(ep.id))
            report.versions += 1
            report.steps += len(t.steps)


# ---------------------------------------------------------------------- jsonl
