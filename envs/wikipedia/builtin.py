"""The built-in sample wiki: the project's own corpus (envs/wikipedia/corpus/), built
into a ZIM on first use in a cache dir and rebuilt whenever the corpus changes."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path

from envs.base import EnvError

CORPUS_DIR = Path(__file__).parent / "corpus"
_LOCK = threading.Lock()


def cache_dir() -> Path:
    return Path(_cache_dir())


_BUILT: dict[tuple, Path] = {}  # (cache folder, ZIM name) -> its path, once seen built
_CACHE_DIRS: dict[tuple, str] = {}  # ($REACT_EDITOR_CACHE, $HOME) -> the cache folder they name


def _cache_dir() -> str:
    """`cache_dir()` as a string, worked out once per environment setting (asked at every
    episode's first step)."""
    key = (os.environ.get("REACT_EDITOR_CACHE"), os.environ.get("HOME"))
    found = _CACHE_DIRS.get(key)
    if found is None:
        found = _CACHE_DIRS[key] = str(Path(key[0] or Path.home() / ".cache" / "react-editor").expanduser())
    return found


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
    path = os.path.join(corpus_dir or CORPUS_DIR, "articles.jsonl")  # (plain strings and one stat
    try:  # per file: this runs at every episode's first step)
        st = os.stat(path)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        raise EnvError(f"missing data file: {Path(path)}")
    from envs.wikipedia import zim  # the HTML layout is part of what the ZIM holds

    lt = os.stat(zim.__file__)
    key = (path, st.st_size, st.st_mtime_ns, zim.__file__, lt.st_size, lt.st_mtime_ns)
    found = _HASHES.get(key)
    if found is None:
        h = hashlib.sha256(Path(path).read_bytes())
        h.update(Path(zim.__file__).read_bytes())
        found = _HASHES[key] = h.hexdigest()[:16]
    return found


def builtin_zim(corpus_dir: Path | None = None, cache: Path | None = None) -> Path:
    """Path of the built-in ZIM for this corpus, building it if needed (~0.1 s)."""
    from envs.wikipedia.zim import build_zim

    name = f"builtin-wiki-{corpus_hash(corpus_dir)}.zim"
    folder = cache if cache is not None else _cache_dir()
    out = _BUILT.get((folder, name))
    if out is not None and os.path.isfile(out):  # (known: one stat, no path built)
        return out
    out = Path(folder) / name
    if out.is_file():
        _BUILT[(folder, name)] = out
        return out
    with _LOCK:
        if not out.is_file():
            build_zim(load_articles(corpus_dir), out)
    return out
