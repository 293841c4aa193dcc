"""The parser a command gets: `LazyParser` adds the flags that ask every environment family
(`--env` choices, family options) only when that command is parsed or its help shown."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from react_editor.args import Parser


class _EnvKinds:
    """`--env` choices: every environment kind installed here (built-in, then plugins),
    asked of the registry only when an `--env` is checked or a help lists them."""

    quiet = False  # True while argparse checks a new argument's metavar (no need to ask then)

    def _all(self) -> tuple[str, ...]:
        if _EnvKinds.quiet:
            return ()
        from envs.registry import kinds

        return kinds()

    def __contains__(self, kind: object) -> bool:
        return kind in self._all()

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def env_kinds() -> _EnvKinds:
    """Every environment kind installed here (the built-in ones, then plugins), read lazily."""
    return _EnvKinds()


class LazyParser(Parser):
    """A command's parser whose costly arguments (those every environment family declares)
    are added only when that command is parsed or its help shown: a command that needs no
    family (`jobs`, `show`, `episodes`) starts without loading them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._later: list[Callable[[argparse.ArgumentParser], None]] = []
        self._adding = False

    def later(self, add: Callable[[argparse.ArgumentParser], None]) -> None:
        if self._adding:  # asked while the deferred arguments are being added: in their order
            add(self)
        else:
            self._later.append(add)

    def _ready(self) -> None:
        self._adding = True
        try:
            while self._later:
                self._later.pop(0)(self)
        finally:
            self._adding = False

    def add_argument(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        _EnvKinds.quiet = isinstance(kwargs.get("choices"), _EnvKinds)
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            _EnvKinds.quiet = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._ready()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._ready()
        return super().format_help()

    def format_usage(self) -> str:
        self._ready()
        return super().format_usage()


def later(p: argparse.ArgumentParser, add: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add arguments to `p` when it is used (at once when `p` is not a LazyParser)."""
    if isinstance(p, LazyParser):
        p.later(add)
    else:
        add(p)
