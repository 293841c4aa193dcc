"""`import textworld` without re-parsing its knowledge base in every process.

Importing the textworld package (the stock stack, the game generator, the textworld plugin;
an ALFWorld game itself imports only the modules it needs, see twlite) loads textworld's
generator knowledge base at import time: ten `.twl` logic files parsed by TatSu, about half
of a cold process's first ALFWorld game when games imported the whole package. The parsed `GameLogic` is a plain value, so it is kept pickled in
the cache folder (`translation.cache_dir()`, keyed by textworld's version and the files' paths
and bytes) and read back in milliseconds. Only `GameLogic.load` is wrapped, while
`textworld.logic` is first imported; nothing else of textworld changes.
"""

from __future__ import annotations

import copyreg
import hashlib
import importlib.abc
import importlib.machinery
import io
import pickle
import sys
from typing import Any, Callable

from envs.alfworld import twlite

CACHE_VERSION = "1"
_MODULE = "textworld.logic"


# What reading a cache entry raises when it is cut short, damaged or written by another
# version of Python, textworld or this program (a class moved or changed): the entry is made
# again (translation.disk_memo) or parsed (below). Anything else is a bug and is raised.
UNREADABLE = (
    pickle.UnpicklingError,
    EOFError,
    ValueError,
    AttributeError,
    ImportError,
    IndexError,
    TypeError,
    KeyError,
    OSError,
)


def cached_load(load: Callable, disk_memo: Callable[[str, Callable], Any]) -> Callable:
    """`GameLogic.load` (the classmethod's function) answered from the disk cache."""

    def load_cached(cls, paths):
        paths = list(paths)
        if cls.__module__ != _MODULE or cls.__qualname__ != "GameLogic":  # a subclass: as textworld does it
            return load(cls, paths)
        h = hashlib.sha1(f"{CACHE_VERSION}\0{_textworld_version()}\0".encode())
        try:
            for p in paths:
                h.update(str(p).encode("utf-8", "surrogateescape") + b"\0")
                with open(p, "rb") as f:
                    h.update(f.read() + b"\0")
        except OSError:  # unreadable: textworld says why
            return load(cls, paths)
        fresh: list = []

        def build() -> bytes:
            fresh.append(load(cls, paths))
            try:
                return dumps(fresh[0])
            except Exception:  # not picklable (another textworld): kept empty, parsed every time
                return b""

        data = disk_memo(f"twlogic-{h.hexdigest()}", build)
        if fresh:
            return fresh[0]
        try:
            return pickle.loads(data)
        except UNREADABLE:  # an entry of another textworld: parse
            return load(cls, paths)

    load_cached.uncached = load  # type: ignore[attr-defined]
    return classmethod(load_cached)


def dumps(logic) -> bytes:
    """The pickled `GameLogic`, its variables, placeholders, signatures and propositions
    rebuilt by their constructors when read: they keep `hash()` of their fields, which
    differs in every process (str hashing is salted), so stored hashes would be stale."""
    from textworld import logic as tw

    rebuilt = {
        tw.Variable: lambda v: (tw.Variable, (v.name, v.type)),
        tw.Placeholder: lambda p: (tw.Placeholder, (p.name, p.type)),
        tw.Signature: lambda s: (tw.Signature, (s.name, s.types)),
        tw.Proposition: lambda p: (tw.Proposition, (p.name, p.arguments)),
    }
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, **rebuilt}
    pickler.dump(logic)
    return buf.getvalue()


def _textworld_version() -> str:
    mod = sys.modules.get("textworld.version")
    return str(getattr(mod, "__version__", "?"))


class _LogicHook(importlib.abc.MetaPathFinder):
    """Finds `textworld.logic` as the import system would, and wraps its `GameLogic.load`
    once the module has run (before textworld's generator loads the knowledge base); its
    parser then parses one at a time (`twlite.one_parse_at_a_time`)."""

    def __init__(self, disk_memo: Callable[[str, Callable], Any]):
        self.disk_memo = disk_memo

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        remove_hook()
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, memo = loader.exec_module, self.disk_memo

        def exec_module(module):
            run(module)
            twlite.one_parse_at_a_time(module)  # (before the knowledge base is parsed, in any thread)
            logic = getattr(module, "GameLogic", None)
            load = getattr(getattr(logic, "load", None), "__func__", None)
            if load is not None:
                logic.load = cached_load(load, memo)

        loader.exec_module = exec_module
        return spec


def install_hook(disk_memo: Callable[[str, Callable], Any]) -> bool:
    """Wrap textworld's knowledge-base parse if textworld is not imported yet (else it
    has been parsed already in this process and there is nothing to save)."""
    if _MODULE in sys.modules or any(isinstance(f, _LogicHook) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _LogicHook(disk_memo))
    return True


def remove_hook() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _LogicHook)]
