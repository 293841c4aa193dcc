"""textworld's PDDL engine without `import textworld`.

textworld's package `__init__` imports everything it has: the game generator (networkx, numpy
random state, inform7, the parse of its generator knowledge base), the gym wrappers, the human
agent (prompt_toolkit). An ALFWorld game needs none of that: only `textworld.logic`, the PDDL
logic and its text grammar (`textworld.envs.pddl.logic`, `.textgen`) and alfworld's
`Demangler`; importing the package cost about two thirds of a new process's first game.

`load_engine()` imports just those modules. While they load, their parent packages
(`textworld`, `textworld.envs`, `textworld.envs.pddl`) are stood in by module objects made from
their real specs whose `__init__` has not run; right after, the stand-ins leave `sys.modules`
again, so a later `import textworld` (the stock stack, the generator, a plugin) runs textworld's
own `__init__` as always. It reuses the modules already loaded, which `_Adopt` hangs on the
fresh packages as attributes first (as the import system does for a submodule it loads).

textworld parses with one TatSu parser per module (`_PARSER`), which keeps the parse under way
on the parser object: two threads parsing at once fail ("pop from empty list", "infinite left
recursion") or misparse. `one_parse_at_a_time` makes them take turns (one lock for the three):
a game's grammar parses in the worker's thread while another thread imports textworld (its
knowledge base is parsed at import) or derives text in another game.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading
from typing import Any

PACKAGES = ("textworld", "textworld.envs", "textworld.envs.pddl")  # parents first
MODULES = ("textworld.logic", "textworld.envs.pddl.textgen", "textworld.envs.pddl.logic", "alfworld.agents.utils.misc")
PARSERS = ("textworld.logic", "textworld.envs.pddl.textgen", "textworld.envs.pddl.logic")  # each has a `_PARSER`
_LOCK = threading.Lock()
_LOADING: list[int] = []  # the thread whose stand-ins are in sys.modules (while load_engine runs)
PARSE_LOCK = threading.RLock()  # one TatSu parse at a time in the process (`one_parse_at_a_time`)
_parsers_locked = False  # every module of PARSERS is loaded and its parser takes PARSE_LOCK


def one_parse_at_a_time(module: Any) -> None:
    """Make the module's TatSu parser (`module._PARSER`) take PARSE_LOCK for each parse, so
    threads take turns on it (its parse state lives on the parser object). Idempotent."""
    parser = getattr(module, "_PARSER", None)
    parse = getattr(parser, "parse", None)
    if parse is None or getattr(parse, "one_at_a_time", False):
        return

    def locked_parse(*args: Any, **kwargs: Any) -> Any:
        with PARSE_LOCK:
            return parse(*args, **kwargs)

    locked_parse.one_at_a_time = True  # type: ignore[attr-defined]
    parser.parse = locked_parse  # (the instance's own attribute: the class is textworld's)


def _lock_parsers() -> None:
    global _parsers_locked
    for m in PARSERS:
        one_parse_at_a_time(importlib.import_module(m))
    _parsers_locked = True


def load_engine() -> None:
    """Import the modules a game needs (and not the rest of textworld, if not imported yet);
    textworld's parsers then parse one at a time (`one_parse_at_a_time`)."""
    if _parsers_locked and all(m in sys.modules for m in MODULES):
        return
    with _LOCK:
        if "textworld" in sys.modules:  # the whole package is (being) imported anyway
            for m in MODULES:
                importlib.import_module(m)
            _lock_parsers()
            return
        _install_adopt()
        stand_ins = []
        _LOADING.append(threading.get_ident())
        try:
            for name in PACKAGES:
                stand_ins.append(_stand_in(name))
            for m in MODULES:
                importlib.import_module(m)
            _lock_parsers()  # (while the stand-ins hold off other threads: before any of them parses)
        finally:
            for mod in reversed(stand_ins):
                if sys.modules.get(mod.__name__) is mod:
                    del sys.modules[mod.__name__]
            _LOADING.clear()


def _find_spec(name: str):
    """`name`'s spec from the finders on `sys.meta_path` (without importing its parent:
    `importlib.util.find_spec` would run the parent's `__init__`)."""
    parent = name.rpartition(".")[0]
    path = sys.modules[parent].__path__ if parent else None
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path) if find is not None and not isinstance(finder, _Adopt) else None
        if spec is not None:
            return spec
    raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _stand_in(name: str):
    """The package `name` as a module object whose `__init__` has not run, in `sys.modules`.
    Another thread that got it from `sys.modules` meanwhile (`import textworld` at the same
    moment) finds its other attributes on the real package once the stand-ins are gone."""
    mod = importlib.util.module_from_spec(_find_spec(name))

    def __getattr__(attr: str):
        if attr.startswith("__") or threading.get_ident() in _LOADING:  # (ours, mid-import)
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        with _LOCK:  # the stand-ins' thread is done
            pass
        real = importlib.import_module(name)
        if real is mod:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        return getattr(real, attr)

    mod.__getattr__ = __getattr__  # type: ignore[attr-defined]  (PEP 562)
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, mod)
    return mod


def adopt_loaded(module) -> None:
    """Hang the already-loaded direct submodules of a package on it (they are not loaded
    again, so the import system would not)."""
    prefix = module.__name__ + "."
    for name, sub in list(sys.modules.items()):
        if name.startswith(prefix) and "." not in name[len(prefix) :] and sub is not None:
            setattr(module, name[len(prefix) :], sub)


class _Adopt(importlib.abc.MetaPathFinder):
    """Finds the real `textworld` packages as the import system would, and runs
    `adopt_loaded` on each before its `__init__`."""

    def find_spec(self, name, path, target=None):
        if name not in PACKAGES or name in sys.modules:
            return None
        spec = _find_spec(name)
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            adopt_loaded(module)
            run(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]  (this spec's own loader)
        return spec


def _install_adopt() -> None:
    if not any(isinstance(f, _Adopt) for f in sys.meta_path):
        sys.meta_path.insert(0, _Adopt())


class EntityInfo:
    """`textworld.generator.game.EntityInfo` (same slots, equality, hash and text; that
    module imports the whole generator)."""

    __slots__ = ["id", "type", "name", "noun", "adj", "desc", "room_type", "definite", "indefinite", "synonyms"]

    def __init__(self, id: str, type: str) -> None:  # noqa: A002  (textworld's names)
        self.id, self.type = id, type
        self.name = self.noun = self.adj = self.desc = self.room_type = None
        self.definite = self.indefinite = self.synonyms = None

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, EntityInfo) and all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, s) for s in self.__slots__))

    def __repr__(self) -> str:
        return "Info({}: {} | {})".format(self.name, self.adj, self.noun)

    def __str__(self) -> str:
        return self.name


def module(name: str):
    """A module of `MODULES` (or one they imported) by its full name, loaded by `load_engine`:
    `from textworld.envs.pddl import logic` would import the package, i.e. all of textworld."""
    load_engine()
    return importlib.import_module(name)
