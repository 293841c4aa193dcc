"""How a command runs: the flags every command takes (`--db`, `--json`), its one-line errors
and exit codes (`run_command`), a job run to its end or its Stop (`run_job`); and the helpers
a family's own command group gets (`EnvFamily.cli(sub, helpers)`: this module)."""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from typing import Any, Callable

from react_editor.output import emit, progress, visible  # noqa: F401  (emit, progress: helpers of the families too)


def check_url(url: str, what: str) -> None:
    """A URL a person gave (credentials refused): the check a family's command group uses."""
    from agent.run_settings import check_base_url

    check_base_url(url, what)


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit code 2."""


STOPPED_EXIT = 130  # a stopped job ends every command with this code (as Ctrl-C does): see the README


class JobStopped(Exception):
    """The command's job was stopped (Stop, `jobs stop N`, Ctrl-C): one line, exit STOPPED_EXIT."""


def run_job(store: Any, kind: str, work: Callable[[Any], Any], stopped: Callable[[Any], str], **row: Any) -> Any:
    """`work(handle)` as a job run here (`agent.jobs.run_here`). A job that was stopped ends
    the command with JobStopped(`stopped(result)`) - result None when the work ended in an
    exception (a call cancelled in flight) - so every stopped command exits STOPPED_EXIT."""
    from agent import jobs

    held: list = []
    try:
        result = jobs.run_here(store, kind, lambda h: held.append(h) or work(h), **row)
    except Exception:
        if held and held[0].stop.is_set():
            raise JobStopped(stopped(None)) from None
        raise
    if held and held[0].stop.is_set():
        raise JobStopped(stopped(result))
    return result


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
    from react_editor.args import database_file  # a FIFO named --db would block the command
    from sessions.store import default_db_path  # (imported by the command: a light start-up)

    return str(database_file(args.db or default_db_path()))


# the one-line errors of each layer, looked up only among modules already imported (an
# error can only come from a module that was): `react-editor` starts without loading them
_USER_ERRORS = (
    ("react_editor.command_run", "CliError"),
    ("agent.run_settings", "ConfigError"),
    ("envs.base", "EnvError"),
    ("sessions.store", "StoreError"),
    ("agent.engine", "EngineError"),
    ("react_editor.args", "ArgError"),
)


def _user_error(exc: BaseException) -> bool:
    types = tuple(getattr(sys.modules[m], n) for m, n in _USER_ERRORS if m in sys.modules)
    return isinstance(exc, types)


def run_command(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return STOPPED_EXIT
    except JobStopped as exc:
        sys.stderr.write(f"stopped: {visible(str(exc))}\n")
        return STOPPED_EXIT
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
