"""Shared CLI plumbing: the common flags, JSON/text output, one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
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
    from sessions.store import default_db_path  # (imported by the command: a light start-up)

    from react_editor.args import database_file  # a FIFO named --db would block the command

    return str(database_file(args.db or default_db_path()))


def version_refs(store: Any) -> Callable[..., str]:
    """`ref(version_id, episode=None) -> "EP:N"`: a version as people read and type it on the
    command line (N its per-episode number, docs/versions.md; the global id stays in --json),
    reading each episode's numbering once."""
    from sessions.numbering import labels, ref_part

    known: dict[int, dict[int, str]] = {}

    def ref(version_id: int, episode: int | None = None) -> str:
        ep = store.versions.get(version_id).episode_id if episode is None else episode
        if ep not in known:
            known[ep] = labels(store, ep)
        return f"{ep}:{ref_part(known[ep][version_id])}"

    return ref


def version_ref(store: Any, version_id: int) -> str:
    """One version as `EP:N` (see `version_refs`)."""
    return version_refs(store)(version_id)


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


def write_exact(text: str) -> None:
    """Text whose bytes matter (a prompt as it is sent): exact into a pipe or a file, as
    `export --out -` writes; escaped only on a terminal, which an escape sequence would drive."""
    if sys.stdout.isatty():
        out = visible(text)
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    else:
        sys.stdout.write(text)
    sys.stdout.flush()


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
_USER_ERRORS = (("react_editor.command_run", "CliError"), ("agent.run_settings", "ConfigError"), ("envs.base", "EnvError"),
                ("sessions.store", "StoreError"), ("agent.engine", "EngineError"), ("react_editor.args", "ArgError"))


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


def rollout_progress(handle=None) -> Callable[[int, int], None]:
    """Rollout progress for a job (`handle`) and, on a terminal only, as a line on stderr
    (when not watched, stderr stays one line: the error, if any)."""
    show = sys.stderr.isatty()

    def on_progress(done: int, total: int) -> None:
        if handle is not None:
            handle.progress(done=done, total=total)
        if show:
            progress(f"  {done}/{total} rollouts")

    return on_progress
