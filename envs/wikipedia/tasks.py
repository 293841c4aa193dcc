"""HotpotQA and FEVER task sets: the built-in corpus questions/claims, the ReAct release's
simplified files, and the official dev sets `react-editor data hotpotqa|fever` fetches.
Task text is exactly what ReAct's wrappers show: "Question: ..." / "Claim: ..."."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envs.base import EnvError
from envs.wikipedia.builtin import CORPUS_DIR, read_jsonl
from trajectory.records import Task

SOURCES = ("builtin", "react", "official")
REACT_FILES = {"hotpotqa": "hotpot_dev_v1_simplified.json", "fever": "paper_dev.jsonl"}
# official files, in order of preference, under <data dir>/<kind>/
OFFICIAL_FILES = {
    "hotpotqa": ("hotpot_dev_distractor_v1.json", "hotpot_dev_fullwiki_v1.json"),
    "fever": ("paper_dev.jsonl", "shared_task_dev.jsonl"),
}


def data_dir() -> Path:
    return Path(os.environ.get("REACT_EDITOR_DATA") or Path.home() / ".cache" / "react-editor" / "data").expanduser()


def hotpot_task(tid: str, question: str, answer: str | None, type_: str | None, source: str, **data) -> Task:
    return Task(
        env="hotpotqa",
        id=str(tid),
        type=type_,
        text=f"Question: {question}",
        gold=answer,
        source=source,
        data={"question": question, **data},
    )


def fever_task(tid: str, claim: str, label: str | None, source: str, **data) -> Task:
    return Task(
        env="fever",
        id=str(tid),
        type=label,
        text=f"Claim: {claim}",
        gold=label,
        source=source,
        data={"claim": claim, **data},
    )


# -- built-in ---------------------------------------------------------------------------
def _builtin(kind: str, corpus_dir: Path | None) -> list[Task]:
    d = Path(corpus_dir or CORPUS_DIR)
    if kind == "hotpotqa":
        return [
            hotpot_task(
                r["id"],
                r["question"],
                r["answer"],
                r.get("type"),
                "builtin",
                supporting=r.get("supporting", []),
                level=r.get("level"),
            )
            for r in read_jsonl(d / "hotpotqa.jsonl")
        ]
    return [
        fever_task(r["id"], r["claim"], r["label"], "builtin", supporting=r.get("supporting", []))
        for r in read_jsonl(d / "fever.jsonl")
    ]


# -- ReAct release ---------------------------------------------------------------------
def react_dir(path: str | Path | None = None) -> Path:
    """The ReAct release's data/ folder: `path`, $REACT_DATA_DIR, or where
    `react-editor data react` puts it (<data dir>/react/data)."""
    if path:
        return Path(path).expanduser()
    if os.environ.get("REACT_DATA_DIR"):
        return Path(os.environ["REACT_DATA_DIR"]).expanduser()
    return data_dir() / "react" / "data"


def _react_file(kind: str, path: str | Path | None) -> Path:
    p = Path(path).expanduser() if path else None
    if p is not None and p.is_file():
        return p
    f = (p if p is not None else react_dir()) / REACT_FILES[kind]
    if not f.is_file():
        raise EnvError(
            f"ReAct data file not found: {f} (fetch it with `react-editor data react`, "
            f"or set REACT_DATA_DIR to a checkout of github.com/ysymyth/ReAct/data)"
        )
    return f


def _load_react(kind: str, f: Path) -> tuple[Task, ...]:
    try:
        if kind == "hotpotqa":
            rows = json.loads(f.read_text(encoding="utf-8"))
            return tuple(
                hotpot_task(str(i), r["question"], r["answer"], r.get("type"), "react") for i, r in enumerate(rows)
            )
        return tuple(fever_task(str(r["id"]), r["claim"], r["label"], "react") for r in read_jsonl(f))
    except (ValueError, KeyError, TypeError) as exc:
        raise EnvError(f"{f}: not a ReAct {kind} file ({type(exc).__name__}: {exc})") from None


# -- official dev sets --------------------------------------------------------------------
def official_file(kind: str, path: str | Path | None = None) -> Path:
    if path:
        p = Path(path).expanduser()
        if p.is_file():
            return p
        base = p
    else:
        base = data_dir() / kind
    for name in OFFICIAL_FILES[kind]:
        if (base / name).is_file():
            return base / name
    raise EnvError(f"official {kind} dev set not found in {base}; fetch it with `react-editor data {kind}`")


def _load_official(kind: str, f: Path) -> tuple[Task, ...]:
    try:
        if kind == "hotpotqa":
            rows = json.loads(f.read_text(encoding="utf-8"))
            return tuple(
                hotpot_task(
                    r["_id"],
                    r["question"],
                    r.get("answer"),
                    r.get("type"),
                    "official",
                    level=r.get("level"),
                    supporting=sorted({t for t, _ in r.get("supporting_facts", [])}),
                )
                for r in rows
            )
        return tuple(fever_task(str(r["id"]), r["claim"], r.get("label"), "official") for r in read_jsonl(f))
    except (ValueError, KeyError, TypeError) as exc:
        raise EnvError(f"{f}: not an official {kind} dev file ({type(exc).__name__}: {exc})") from None


_LOADED: dict[tuple[str, str, str], tuple[tuple[int, int], tuple[Task, ...]]] = {}


def _cached(kind: str, f: Path, load) -> tuple[Task, ...]:
    """The tasks of `f`, parsed again only when the file changed (its size or mtime): a
    dev set of thousands of questions is read once per process, an edited file at once."""
    st = f.stat()
    stamp = (st.st_size, st.st_mtime_ns)
    key = (load.__name__, kind, str(f))
    hit = _LOADED.get(key)
    if hit is None or hit[0] != stamp:
        hit = _LOADED[key] = (stamp, load(kind, f))
    return hit[1]


# -- family entry points -------------------------------------------------------------------
def list_tasks(
    kind: str,
    source: str = "builtin",
    path: str | Path | None = None,
    corpus_dir: Path | None = None,
    limit: int | None = None,
    **_opts,
) -> list[Task]:
    if source == "builtin":
        tasks = _builtin(kind, corpus_dir)
    elif source == "react":
        f = _react_file(kind, path)
        tasks = list(_cached(kind, f, _load_react))
    elif source == "official":
        f = official_file(kind, path)
        tasks = list(_cached(kind, f, _load_official))
    else:
        raise EnvError(f"unknown task source {source!r}; use one of {', '.join(SOURCES)}")
    return tasks[:limit] if limit else tasks


def get_task(kind: str, task_id: str, source: str = "builtin", **opts) -> Task:
    for t in list_tasks(kind, source, **opts):
        if t.id == str(task_id):
            return t
    raise EnvError(f"no {kind} task {task_id!r} in the {source} set")


def custom_task(
    kind: str,
    question: str | None = None,
    answer: str | None = None,
    claim: str | None = None,
    label: str | None = None,
    **_ignored,
) -> Task:
    """A task from user input. The CLI passes question=/answer= for both kinds."""
    import hashlib

    text = (claim if kind == "fever" and claim else question) or ""
    text = " ".join(text.split())
    for prefix in ("Question:", "Claim:"):
        if text.startswith(prefix):
            text = text[len(prefix) :].strip()
    if not text:
        raise EnvError(f"a custom {kind} task needs {'a claim' if kind == 'fever' else 'a question'}")
    gold = label if kind == "fever" and label else answer
    gold = gold.strip() if gold and gold.strip() else None
    tid = "custom-" + hashlib.sha256(text.encode()).hexdigest()[:10]
    if kind == "fever":
        if gold is not None:
            from envs.wikipedia.scoring import FEVER_LABELS

            match = [lab for lab in FEVER_LABELS if lab.lower() == gold.lower()]
            if not match:
                raise EnvError(f"a FEVER label is one of {', '.join(FEVER_LABELS)}, not {gold!r}")
            gold = match[0]
        return fever_task(tid, text, gold, "custom")
    return hotpot_task(tid, text, gold, None, "custom")
