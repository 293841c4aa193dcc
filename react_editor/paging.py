"""Paged listings: the `--limit` / `--offset` flags every listing command takes, and the
line that says how many more there are.

A listing never prints the whole store: a research group's database holds hundreds of
thousands of versions, and a command that prints all of them takes seconds and buries the
lines a person wanted. Each listing shows one page (its own default size), newest first,
and says where the next page starts. With `--json` the page is the JSON list, as before,
and the "more" line goes to stderr so stdout stays machine-readable."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from react_editor.args import ArgError, whole_number

MAX_LIMIT = 100_000  # a page larger than this is a dump: `export` is the command for that


def _limit(text: str) -> int:
    n = whole_number(text, "--limit")
    if not 1 <= n <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"--limit must be from 1 to {MAX_LIMIT:,}")
    return n


def _offset(text: str) -> int:
    n = whole_number(text, "--offset")
    if n < 0:
        raise argparse.ArgumentTypeError("--offset must be 0 or more")
    return n


def _checked(parse):
    def typed(text: str) -> int:
        try:
            return parse(text)
        except ArgError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = parse.__name__
    return typed


def add_page_flags(p: argparse.ArgumentParser, default: int, what: str) -> None:
    """`--limit N` (default `default`) and `--offset K` on a listing command of `what`."""
    p.add_argument(
        "--limit",
        type=_checked(_limit),
        default=default,
        help=f"at most this many {what} (default {default}; the output says how many more there are)",
    )
    p.add_argument(
        "--offset", type=_checked(_offset), default=0, help=f"skip the first K {what} (the next page: --offset K+limit)"
    )


@dataclass(frozen=True)
class Page:
    """Which part of a listing was shown: `shown` items from `offset`, of `total` in all
    (None when counting them would cost what the page saved) and whether more follow."""

    offset: int
    shown: int
    total: int | None
    more: bool

    def note(self, what: str) -> str | None:
        """The line that says what was left out, or None when the listing is complete."""
        if not self.more and self.offset == 0:
            return None
        first, last = self.offset + 1, self.offset + self.shown
        span = f"{what} {first:,}-{last:,}" if self.shown else f"no {what} from {first:,}"
        of = f" of {self.total:,}" if self.total is not None else ""
        nxt = f"; the next page: --offset {last:,}" if self.more else ""
        return f"({span}{of}{nxt})"


def page_of(rows: list, limit: int, offset: int, total: int | None = None) -> tuple[list, Page]:
    """The page of `rows` (all of them, or the page and one more: `more` is then read from
    the extra row) and its `Page`."""
    if total is None and len(rows) > limit:
        return rows[:limit], Page(offset, limit, None, True)
    shown = rows[:limit]
    more = total is not None and offset + len(shown) < total
    return shown, Page(offset, len(shown), total, more)


def say_page(json_mode: bool, page: Page, what: str) -> str | None:
    """The note for a text listing (returned, to print after its rows); with --json it goes to
    stderr at once and nothing is returned."""
    note = page.note(what)
    if note is not None and json_mode:
        sys.stderr.write(note + "\n")
        return None
    return note
