"""Shared CLI plumbing: the common flags, JSON/text output, one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from typing import Any, Callable



def env_kinds() -> tuple[str, ...]:
    """Every environment kind installed here: the built-in ones, then plugins."""
    from envs.registry import kinds

    return kinds()


def check_url(url: str, what: str) -> None:
    """A URL a person gave (credentials refused): the check a family's command group uses."""
    from agent.run_settings import check_base_url

    check_base_url(url, what)


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit code 2."""


def regular_file(path, what: str, *, may_be_missing: bool = False):
    """A path the user named, checked before it is opened (react_editor.args.regular_file):
    for the families' command groups, which get this module as their helpers."""
    from react_editor.args import regular_file as check

    return check(path, what, may_be_missing=may_be_missing)


def folder(path, what: str):
    """A folder the user named (or nothing yet): react_editor.args.folder, for the families."""
    from react_editor.args import folder as check

    return check(path, what)


def add_common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--db` and `--json`, which every command takes."""
    p.add_argument("--db", default=None, help="SQLite file (default: $REACT_EDITOR_DB or ./react_editor.db)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def db_path(args: argparse.Namespace) -> str:
    from sessions.store import default_db_path  # (imported by the command: a light start-up)

    from react_editor.args import regular_file  # a FIFO named --db would block the command

    return str(regular_file(args.db or default_db_path(), "database", may_be_missing=True))


# C0 controls but newline and tab, DEL and the C1 controls: what a terminal would act on;
# and the bidi controls, which reorder what a person reads (a right-to-left override)
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = {**{c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\n\t"},
             **{c: f"\\u{c:04x}" for c in _BIDI}}
_JSON_C1 = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), *_BIDI)}  # json.dumps escapes C0 itself


def visible(text: str) -> str:
    """`text` with control characters shown as `\\xNN`: stored text comes from models and
    imported files, and an escape sequence must not reach the terminal (title, colours, ...)."""
    return text.translate(_CONTROLS)


class VisibleStream:
    """A text stream that writes through `visible` (export to a terminal: an escape
    sequence in an exported thought must not drive it; a pipe or file stays byte-exact)."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(visible(text))

    def flush(self) -> None:
        self.stream.flush()


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str] | None = None) -> None:
    """Print `data` as JSON with --json, else `text` (or a JSON rendering of data)."""
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=None).translate(_JSON_C1) + "\n")
    else:
        out = text() if callable(text) else text
        if out is None:
            out = json.dumps(data, ensure_ascii=False, indent=2).translate(_JSON_C1)
        out = visible(out)
        sys.stdout.write(out if out.endswith("\n") else out + "\n")


def progress(msg: str) -> None:
    """Progress goes to stderr so stdout stays machine-readable."""
    sys.stderr.write(visible(msg) + "\n")
    sys.stderr.flush()


# the one-line errors of each layer, looked up only among modules already imported (an
# error can only come from a module that was): `react-editor` starts without loading them
_USER_ERRORS = (("react_editor.common", "CliError"), ("agent.run_settings", "ConfigError"), ("envs.base", "EnvError"),
                ("sessions.store", "StoreError"), ("agent.engine", "EngineError"), ("react_editor.args", "ArgError"))


def _user_error(exc: BaseException) -> bool:
    types = tuple(getattr(sys.modules[m], n) for m, n in _USER_ERRORS if m in sys.modules)
    return isinstance(exc, types)


def run_command(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as exc:
        if _user_error(exc):
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            sys.stderr.write(f"error: {visible(msg)}\n")
            return 2
        if isinstance(exc, sqlite3.DatabaseError):  # read-only, truncated, damaged: say which
            from sessions.store import describe_db_error

            sys.stderr.write(f"error: {visible(describe_db_error(db_path(args), exc))}\n")
            return 2
        if isinstance(exc, BrokenPipeError):  # `react-editor export --out - | head`: the reader left, fine
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
        raise
