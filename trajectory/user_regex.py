"""Regular expressions a person typed (stop conditions, whatif `--at first:REGEX`).

They run on RE2 (`google-re2`), a linear-time engine: Python's backtracking `re` spends
exponential time on a pattern like `(a+)+$` against 40 a's, a hang at 100% CPU. RE2 has
no backreferences or look-around; such a pattern is refused with one line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_PATTERN = 2000  # characters: a stop condition, not a program


class PatternError(ValueError):
    """A pattern RE2 refuses (bad or unsupported syntax, too large): one line."""


@dataclass(frozen=True)
class UserPattern:
    """A compiled user pattern; `search` like `re.Pattern.search` (a match or None)."""

    text: str
    ignore_case: bool
    compiled: Any

    def search(self, text: str) -> Any:
        if not text.isascii():  # RE2 works on UTF-8; a lone surrogate cannot be encoded
            text = text.encode("utf-8", "replace").decode("utf-8")
        return self.compiled.search(text)


def compile_pattern(pattern: str, ignore_case: bool = False) -> UserPattern:
    """`pattern` compiled by RE2, or PatternError (one line, says why)."""
    import re2

    if len(pattern) > MAX_PATTERN:
        raise PatternError(f"pattern of {len(pattern):,} characters (at most {MAX_PATTERN:,})")
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise PatternError("pattern is not valid UTF-8 text") from None
    options = re2.Options()
    options.log_errors = False  # RE2 would print the reason to stderr itself, a second line
    options.case_sensitive = not ignore_case
    try:
        return UserPattern(pattern, ignore_case, re2.compile(pattern, options))
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise PatternError(
            f"pattern not accepted ({' '.join(why.split())}; look-around and backreferences are not supported)"
        ) from None
