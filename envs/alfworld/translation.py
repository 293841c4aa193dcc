"""ALFWorld's PDDL -> SAS translation through fast-downward, made once per game and kept in memory
and on disk (`cache_dir()`, `disk_memo`: the parsed game logic is kept there too), with the
lock and the content keys the game's caches share.

Every load and every reset of the stock stack runs the Python translation twice (~0.7 s each);
here it runs once per (domain, problem) on this machine."""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envs.alfworld import twlogic

CACHE_VERSION = "1"
LOCK = threading.RLock()  # the caches of translation.py, grammar_cache.py and fastgame.py


def sha(*parts: str) -> str:
    """The content key of `parts` (sha1 of each, NUL-separated): what the caches are keyed by."""
    h = hashlib.sha1()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


@contextmanager
def preserved_argv():
    """Trap: `fast_downward.pddl2sas` overwrites `sys.argv` (for its option parser)."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


def cache_dir() -> Path | None:
    """Where translations and parsed game logic are kept across processes ($REACT_EDITOR_CACHE, else
    ~/.cache/react-editor); REACT_EDITOR_CACHE=off disables the disk cache."""
    root = os.environ.get("REACT_EDITOR_CACHE")
    if root == "off":
        return None
    base = Path(root) if root else Path.home() / ".cache" / "react-editor"
    return base / "alfworld-sas"


_TRANSLATIONS: dict[str, tuple[Any, str]] = {}


def by_name(module: str, qualname: str):
    """A class of an imported module (what `_Pickler` stores instead of the class)."""
    obj = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class _Pickler(pickle.Pickler):
    """pickle, except that a class whose top-level package is not imported (textworld's, see
    twlite) is stored by name: pickle's own check that it can find a class imports its
    top-level package, i.e. all of textworld and its knowledge base."""

    def reducer_override(self, obj):
        if isinstance(obj, type) and obj.__module__.partition(".")[0] not in sys.modules:
            return by_name, (obj.__module__, obj.__qualname__)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    """Classes of modules already imported are taken from them: pickle's own lookup imports
    the top-level package first (`import textworld`, all of it; see twlite)."""

    def find_class(self, module, name):
        obj = sys.modules.get(module)
        if obj is None:
            return super().find_class(module, name)
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj


def disk_memo(key: str, build):
    """`build()`'s result, pickled in the cache folder under `key` (an unreadable entry is
    said in one line on stderr and rebuilt; a cache that cannot be written is skipped)."""
    d = cache_dir()
    f = d / f"{key}.pkl" if d else None
    if f is not None and f.exists():
        try:
            with open(f, "rb") as fh:
                return _Unpickler(fh).load()
        except twlogic.UNREADABLE as exc:
            why = (str(exc).splitlines() or [""])[0] or type(exc).__name__
            print(
                f"ALFWorld cache entry {f} is unreadable ({type(exc).__name__}: {why}); making it again",
                file=sys.stderr,
                flush=True,
            )
    result = build()
    if f is not None:
        try:
            d.mkdir(parents=True, exist_ok=True)
            tmp = f.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                _Pickler(fh, protocol=pickle.HIGHEST_PROTOCOL).dump(result)
            os.replace(tmp, f)
        except Exception:
            pass
    return result


# textworld's knowledge base (parsed at `import textworld`) comes from the same cache
twlogic.install_hook(disk_memo)


def translate(domain: str, problem: str, optimize: bool = False) -> tuple[Any, str]:
    """fast_downward.pddl2sas, memoised in memory and on disk (pickled task + SAS text)."""
    import fast_downward

    def build():
        with preserved_argv():
            return fast_downward.pddl2sas(domain, problem, verbose=False, optimize=optimize)

    key = sha(CACHE_VERSION, domain, problem, str(optimize))
    with LOCK:
        if key not in _TRANSLATIONS:
            _TRANSLATIONS[key] = disk_memo(key, build)
        return _TRANSLATIONS[key]
