"""The built-in sample wiki: the project's own corpus (envs/wikipedia/corpus/), built
into a ZIM on first use in a cache dir and rebuilt whenever the corpus changes."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from envs.base import EnvError

CORPUS_DIR = Path(__file__).parent / "corpus"
_LOCK = threading.Lock()


def cache_dir() -> Path:
    return Path(os.environ.get("REACT_EDITOR_CACHE") or Path.home() / ".cache" / "react-editor").expanduser()


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise EnvError(f"missing data file: {path}")
    out = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                raise EnvError(f"{path}:{n}: not valid JSON") from None
    return out


def load_articles(corpus_dir: Path | None = None) -> list[dict]:
    return read_jsonl(Path(corpus_dir or CORPUS_DIR) / "articles.jsonl")


_HASHES: dict[tuple, str] = {}  # (file, size, mtime) of the corpus and of zim.py -> their hash


def corpus_hash(corpus_dir: Path | None = None) -> str:
    """What the built-in ZIM is built from (the corpus and the HTML layout), hashed once
    per process while neither file changes: every episode opens its backend."""
    path = Path(corpus_dir or CORPUS_DIR) / "articles.jsonl"
    if not path.is_file():
        raise EnvError(f"missing data file: {path}")
    from envs.wikipedia import zim  # the HTML layout is part of what the ZIM holds

    layout = Path(zim.__file__)
    key = tuple((str(p), st.st_size, st.st_mtime_ns) for p in (path, layout) for st in [p.stat()])
    found = _HASHES.get(key)
    if found is None:
        h = hashlib.sha256(path.read_bytes())
        h.update(layout.read_bytes())
        found = _HASHES[key] = h.hexdigest()[:16]
    return found


def builtin_zim(corpus_dir: Path | None = None, cache: Path | None = None) -> Path:
    """Path of the built-in ZIM for this corpus, building it if needed (~0.1 s)."""
    from envs.wikipedia.zim import build_zim

    out = Path(cache or cache_dir()) / f"builtin-wiki-{corpus_hash(corpus_dir)}.zim"
    if out.is_file():
        return out
    with _LOCK:
        if not out.is_file():
            build_zim(load_articles(corpus_dir), out)
    return out
