"""Which environment families exist: the built-in ones, plus any a package declares under the
`react_editor.envs` entry-point group (a callable or object giving an `EnvFamily`).

The registry sits above the families, so `envs.base` never imports them back. Adding an
environment: write a package with an `EnvFamily` named `FAMILY` (see envs/alfworld/__init__.py)
and list it in BUILTIN below, or declare an entry point in your own package.
"""

from __future__ import annotations

import importlib
import os
import site
import sys
import threading
from functools import lru_cache
from importlib import import_module
from importlib.metadata import entry_points

import trajectory.kinds
from envs.base import EnvError, EnvFamily

BUILTIN = {"alfworld": "envs.alfworld", "hotpotqa": "envs.wikipedia", "fever": "envs.wikipedia"}
ENTRY_POINT_GROUP = "react_editor.envs"
_FAMILIES: dict[str, EnvFamily] = {}
_FROM_PLUGINS: set[str] = set()  # kinds in _FAMILIES loaded through an entry point


def register(fam: EnvFamily) -> None:
    """Add or replace a family (tests and plugins use this)."""
    _FAMILIES[fam.kind] = fam


def _load(kind: str) -> EnvFamily | None:
    if kind in BUILTIN:
        module = import_module(BUILTIN[kind])
        return module.FAMILIES[kind] if hasattr(module, "FAMILIES") else module.FAMILY
    for ep in _plugins():
        if ep.name == kind:
            obj = ep.load()
            fam = obj() if callable(obj) and not isinstance(obj, EnvFamily) else obj
            if not isinstance(fam, EnvFamily):
                raise EnvError(f"entry point {ep.value!r} did not give an EnvFamily")
            _FROM_PLUGINS.add(kind)
            return fam
    return None


def family(kind: str) -> EnvFamily:
    """The family for `kind`, loading its package on first use."""
    if kind not in _FAMILIES:
        fam = _load(kind)
        if fam is not None:
            _FAMILIES[kind] = fam
    try:
        return _FAMILIES[kind]
    except KeyError:
        raise EnvError(f"unknown environment {kind!r}; known: {', '.join(kinds())}") from None


def kinds() -> tuple[str, ...]:
    """Every kind that can be loaded: built-in, plugins, and registered ones."""
    names = dict.fromkeys([*BUILTIN, *(ep.name for ep in _plugins()), *_FAMILIES])
    return tuple(names)


@lru_cache(maxsize=1)
def _plugins() -> tuple:
    """The installed plugins' entry points, read once per process, and again after refresh()
    saw an install (scanning every installed distribution costs milliseconds, and kinds() is
    asked per record of an import)."""
    return tuple(entry_points(group=ENTRY_POINT_GROUP))


# -- plugins installed while a process runs (the app: `pip install -e plugins/...`) ----------


def _site_dirs() -> list[str]:
    """The folders `pip install` writes to whose .pth files the interpreter read at its start."""
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if d in sys.path and os.path.isdir(d)]


def _stamp() -> tuple:
    """What changes when a package is installed or removed: each site folder's mtime."""
    out = []
    for d in _site_dirs():
        try:
            out.append((d, os.stat(d).st_mtime_ns))
        except OSError:
            continue
    return tuple(out)


def _pth_files(d: str) -> frozenset[str]:
    try:
        return frozenset(n for n in os.listdir(d) if n.endswith(".pth"))
    except OSError:
        return frozenset()


_STAMP = _stamp()
_PTH_READ = {d: _pth_files(d) for d in _site_dirs()}  # read by the interpreter at its start
_REFRESHING = threading.Lock()


def refresh() -> bool:
    """Find plugins installed (or removed) since this process started or last looked: a site
    folder's new .pth files are read as the interpreter reads them at its start (an editable
    install's path or import hook: `pip install -e` adds one), and the entry points are read
    again; families of plugins no longer installed are forgotten. A stat per site folder when
    nothing changed (the app asks once per page load). True when something changed."""
    global _STAMP
    stamp = _stamp()
    if stamp == _STAMP:
        return False
    with _REFRESHING:  # the app's sessions ask at once: one reads a new .pth, once
        if stamp == _STAMP:
            return False
        _STAMP = stamp
        _look_again()
        _STAMP = _stamp()  # (reading a .pth can write into its folder: an import hook's __pycache__)
    return True


def _look_again() -> None:
    """The site folders' new .pth files read, the entry points read again, and the families
    of plugins no longer installed forgotten."""
    for d in _site_dirs():
        names = _pth_files(d)
        new = names - _PTH_READ.get(d, names)  # a folder first seen now: its files were read at start
        _PTH_READ[d] = names
        for name in sorted(new):
            _read_pth(d, name)
    importlib.invalidate_caches()  # the import system's folder listings, for the new package
    _plugins.cache_clear()
    installed = {ep.name for ep in _plugins()}
    for kind in sorted(_FROM_PLUGINS - installed):
        _FAMILIES.pop(kind, None)
        _FROM_PLUGINS.discard(kind)


def _read_pth(d: str, name: str) -> None:
    """One .pth file, as `site` reads it at start: its paths join sys.path, its `import` lines run."""
    try:
        site.addpackage(d, name, None)
    except Exception as exc:  # noqa: BLE001 - one broken file must not stop the page; `site` would say so too
        print(f"react-editor: cannot read {os.path.join(d, name)}: {exc}", file=sys.stderr)


def transcript(kind: str):
    """The kind's transcript (what `trajectory.kinds.transcript` resolves to)."""
    return family(kind).transcript


def loaded() -> list[EnvFamily]:
    """Every family that can be loaded, in `kinds()` order (skipping a plugin that fails to load)."""
    out = []
    for kind in kinds():
        try:
            out.append(family(kind))
        except Exception:  # noqa: BLE001 - one broken plugin must not hide the others
            continue
    return out


trajectory.kinds.install(transcript, kinds)
