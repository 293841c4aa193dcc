"""What a Wikipedia backend answers for `search[entity]`; the observation logic lives in
`env.py` and `text.py`, so every backend gives the same strings for the same pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from envs.wikipedia import text


@dataclass
class SearchOutcome:
    kind: Literal["page", "miss", "disambiguation", "error"]
    title: str | None = None
    page: str | None = None  # page text (text.page_text) when kind == "page"
    similar: list[str] = field(default_factory=list)
    error: str | None = None


class Backend(Protocol):
    name: str

    def search(self, entity: str) -> SearchOutcome: ...

    def close(self) -> None: ...


def outcome_from_html(title: str, html: str | bytes, similar_fn) -> SearchOutcome:
    """A found page: its text, or - for a disambiguation page - a miss with similar titles
    (`similar_fn()` is only called then, so hits cost no search)."""
    blocks = text.html_blocks(html)
    if text.is_disambiguation(blocks):
        return SearchOutcome("disambiguation", title=title, similar=similar_fn())
    return SearchOutcome("page", title=title, page=text.page_text(blocks))
