"""What a search query may be, as pure text rules: its bounds (length, words) and its
literal reading (a phrase of its words) for text that is not FTS5 syntax. Light to import,
so a command refuses a flood before it opens anything."""

from __future__ import annotations

import re

MAX_QUERY_CHARS = 1000  # a pasted paragraph fits; a flood does not
MAX_TERMS = 64  # words in a query: each one is a posting list to merge
_TOKEN = re.compile(r"[^\W_]+")  # a word as FTS5's unicode61 tokenizer sees it (letters, digits)


class QueryError(ValueError):
    """A query outside the bounds, or with no words (one line)."""


def check_query(query: str) -> None:
    if not query or not query.strip():
        raise QueryError("the search query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"the search query is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}")
    terms = len(_TOKEN.findall(query))
    if terms > MAX_TERMS:
        raise QueryError(f"the search query has {terms:,} words; the limit is {MAX_TERMS}")


def literal(query: str) -> str:
    """`query` as one FTS5 phrase of its words (what text copied from a trajectory means)."""
    words = _TOKEN.findall(query)
    if not words:
        raise QueryError(f"the search query {query[:60]!r} has no words to search for")
    return '"' + " ".join(words) + '"'
