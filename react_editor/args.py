"""What the command line accepts: bounded numbers, UTF-8 text, regular files.

One layer between argv and the commands, so that a hostile or mistyped value ends as
one line on stderr (exit 2) instead of a traceback deep inside: a 20-digit id (SQLite's
integers stop at 2**63-1), `²` that `str.isdigit` accepts and `int` refuses, a lone
surrogate from invalid UTF-8 in argv (it cannot be stored or printed), NaN, a FIFO named
as a file (opening it blocks forever)."""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
import sys
from pathlib import Path

MAX_DIGITS = 18  # below 2**63 (SQLite's INTEGER), far above any id, count or seed
_INTEGER = re.compile(r"[+-]?[0-9]{1,%d}" % MAX_DIGITS)


class ArgError(Exception):
    """A value the command line refuses: one line, exit 2 (react_editor.command_run.run_command)."""


def _shown(text: str, n: int = 40) -> str:
    """`text` quoted for a message: short, surrogates and controls escaped."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return repr(safe[:n] + ("..." if len(safe) > n else ""))


def whole_number(text: str, what: str = "number") -> int:
    """An integer typed by a person: ASCII digits, at most MAX_DIGITS of them."""
    s = str(text).strip()
    if not _INTEGER.fullmatch(s):
        too_long = s.lstrip("+-").isascii() and s.lstrip("+-").isdigit()
        raise ArgError(f"{what} {_shown(s)} is too large" if too_long else f"{what} {_shown(s)} is not a whole number")
    return int(s)


def integer(text: str) -> int:
    """argparse type replacing `int` (see `Parser`)."""
    try:
        return whole_number(text)
    except ArgError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def finite(text: str) -> float:
    """argparse type replacing `float`: no NaN or infinity (they are not JSON)."""
    try:
        value = float(str(text).strip()) if str(text).strip().isascii() else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{_shown(str(text))} is not a finite number")
    return value


MAX_TIMEOUT_S = 3600.0  # one model answer may take up to an hour (agent.run_settings checks configs the same)
MAX_RETRIES = 100  # retries of one model call
MAX_TOKENS = 131_072  # the most tokens one answer may be asked for (a reasoning model's answer spends many)


def seconds(text: str, most: float = MAX_TIMEOUT_S) -> float:
    """argparse type of a duration: a finite number of seconds, more than 0 and at most `most`
    (a huge one passed the checks and ended in an OverflowError deep in a run)."""
    value = finite(text)
    if not 0 < value <= most:
        raise argparse.ArgumentTypeError(f"{_shown(str(text))} seconds: give more than 0 and at most {most:g}")
    return value


def retry_count(text: str) -> int:
    """argparse type of a retry count: a whole number from 0 to MAX_RETRIES."""
    value = integer(text)
    if not 0 <= value <= MAX_RETRIES:
        raise argparse.ArgumentTypeError(f"max retries {_shown(str(text))} is out of range: give 0 to {MAX_RETRIES}")
    return value


def token_count(text: str) -> int:
    """argparse type of `--max-tokens`: a whole number from 1 to MAX_TOKENS."""
    value = integer(text)
    if not 1 <= value <= MAX_TOKENS:
        raise argparse.ArgumentTypeError(f"max tokens {_shown(str(text))} is out of range: give 1 to {MAX_TOKENS:,}")
    return value


class Parser(argparse.ArgumentParser):
    """The CLI's parser: `type=int`/`float` mean the bounded `integer`/`finite` (argparse's
    type registry, shared by argument groups; subcommands get this class too), and an
    error is one line (what is wrong, where to read more), not the usage block."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.register("type", int, integer)
        self.register("type", float, finite)

    def error(self, message: str):  # type: ignore[override]
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(message.split()))  # no escapes
        self.exit(2, f"{self.prog}: error: {line} (see {self.prog} --help)\n")


def argv_problem(argv: list[str]) -> str | None:
    """One line if an argument is not valid UTF-8 text (Python hands invalid bytes over as
    lone surrogates, which no database, file or terminal takes), else None."""
    for i, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return f"argument {i} ({_shown(arg)}) is not valid UTF-8 text"
    return None


def regular_file(path: str | os.PathLike, what: str, *, may_be_missing: bool = False) -> Path:
    """`path` if it names a regular file (or nothing, when `may_be_missing`): a FIFO, device
    or socket would block the command or never end, a folder is not a file."""
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        if may_be_missing:
            return p
        raise ArgError(f"{what} {_shown(str(path), 200)}: no such file") from None
    except (OSError, ValueError) as exc:
        raise ArgError(f"{what} {_shown(str(path), 200)}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise ArgError(f"{what} {_shown(str(path), 200)} is {kind}")
    return p


def database_file(path: str | os.PathLike) -> Path:
    """`path` for a database: a regular file, or nothing yet in a folder that exists (a
    typo makes no tree of folders, as for export's --out)."""
    p = regular_file(path, "database", may_be_missing=True)
    if not os.path.lexists(p) and not p.parent.is_dir():
        raise ArgError(f"database {_shown(str(path), 200)}: no folder {_shown(str(p.parent), 200)}; create it first")
    return p


def folder(path: str | os.PathLike, what: str) -> Path:
    """`path` if it names a folder or nothing yet (it is made): a file, FIFO or device
    there is refused before anything is written under it."""
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return p
    except (OSError, ValueError) as exc:
        raise ArgError(f"{what} {_shown(str(path), 200)}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISDIR(mode):
        raise ArgError(f"{what} {_shown(str(path), 200)} is not a folder")
    return p


def fail(message: str) -> int:
    """Print one error line and return the exit code."""
    sys.stderr.write(f"error: {message}\n")
    return 2
