"""Which environment families exist: the built-in ones, plus any a package declares under the
`react_editor.envs` entry-point group (a callable or object giving an `EnvFamily`).

The registry sits above the families, so `envs.base` never imports them back. Adding an
environment: write a package with an `EnvFamily` named `FAMILY` (see envs/alfworld/__init__.py)
and list it in BUILTIN below, or declare an entry point in your own package.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import import_module
from importlib.metadata import entry_points

from envs.base import EnvError, EnvFamily
import trajectory.kinds

BUILTIN = {"alfworld": "envs.alfworld", "hotpotqa": "envs.wikipedia", "fever": "envs.wikipedia"}
ENTRY_POINT_GROUP = "react_editor.envs"
_FAMILIES: dict[str, EnvFamily] = {}


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
    """The installed plugins' entry points, read once per process (scanning every installed
    distribution costs milliseconds, and kinds() is asked per record of an import)."""
    return tuple(entry_points(group=ENTRY_POINT_GROUP))


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
