"""Offline backend: Kiwix ZIM files through libzim (title index incl. redirects, title
suggestions and Xapian full-text search), plus the writer that builds a ZIM from
articles in the corpus format (used for the built-in sample and by tests)."""

from __future__ import annotations

import contextlib
import dataclasses
import html
import os
import sys
from pathlib import Path
from typing import Iterable

from envs.base import EnvError
from envs.wikipedia import text
from envs.wikipedia.backend import SearchOutcome, outcome_from_html

SEARCH_CACHE = 256  # searches a ZIM backend remembers


def article_path(title: str) -> str:
    return title.replace(" ", "_")


def article_html(article: dict) -> str:
    """Kiwix-like HTML for one corpus article (title as <h1>, blocks as <p> / <ul>)."""
    title = html.escape(article["title"])
    parts = [
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">',
        f'<title>{title}</title></head>\n<body class="mediawiki">',
        f'<h1 class="firstHeading">{title}</h1>\n<div id="mw-content-text">',
    ]
    for block in article["body"]:
        if isinstance(block, str):
            parts.append(f"<p>{html.escape(block)}</p>")
        else:
            items = "".join(f"<li>{html.escape(i)}</li>" for i in block)
            parts.append(f"<ul>{items}</ul>")
    parts.append("</div></body></html>\n")
    return "\n".join(parts)


@contextlib.contextmanager
def _quiet_stdout():
    """libzim's writer prints progress lines on the C stdout; keep CLI output clean."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def build_zim(articles: Iterable[dict], out: Path, name: str = "react_editor_sample") -> Path:
    """Write `articles` (corpus format) to a ZIM at `out`: HTML pages, redirects, title
    index and full-text index. Written to a temporary name, then renamed."""
    from libzim.writer import Creator, Hint, Item, StringProvider

    class _Page(Item):
        def __init__(self, path: str, title: str, body: str):
            super().__init__()
            self._p, self._t, self._b = path, title, body

        def get_path(self):
            return self._p

        def get_title(self):
            return self._t

        def get_mimetype(self):
            return "text/html"

        def get_contentprovider(self):
            return StringProvider(self._b)

        def get_hints(self):
            return {Hint.FRONT_ARTICLE: True}

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    articles = list(articles)
    paths = {article_path(a["title"]) for a in articles}
    try:
        with _quiet_stdout():
            creator = Creator(str(tmp)).config_indexing(True, "eng").config_nbworkers(1)
            with creator as c:
                if articles:
                    c.set_mainpath(article_path(articles[0]["title"]))
                for a in articles:
                    c.add_item(_Page(article_path(a["title"]), a["title"], article_html(a)))
                for a in articles:
                    for r in a.get("redirects", []):
                        rp = article_path(r)
                        if rp in paths:
                            continue
                        paths.add(rp)
                        c.add_redirection(rp, r, article_path(a["title"]), {Hint.FRONT_ARTICLE: True})
                for key, value in (
                    ("Name", name),
                    ("Title", "ReAct Editor sample wiki"),
                    ("Language", "eng"),
                    ("Creator", "react-editor"),
                    ("Publisher", "react-editor"),
                    ("Description", "Built-in sample articles"),
                ):
                    c.add_metadata(key, value)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def open_archive(path: str | Path):
    from libzim.reader import Archive

    p = Path(path).expanduser()
    if not p.is_file():
        raise EnvError(f"ZIM file not found: {p}")
    try:
        archive = Archive(p)
        _ = archive.entry_count
    except Exception as exc:  # libzim raises RuntimeError on corrupt files
        raise EnvError(
            f"cannot open ZIM file {p}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    return archive


def _resolve(entry, limit: int = 20):
    while entry.is_redirect and limit:
        entry = entry.get_redirect_entry()
        limit -= 1
    return entry


def similar_titles(archive, query: str, n: int = 5) -> list[str]:
    """Up to `n` titles for a query: title suggestions first, then full-text hits;
    redirects shown as their target, duplicates dropped."""
    from libzim.search import Query, Searcher
    from libzim.suggestion import SuggestionSearcher

    q = text.search_query(query)
    if not q:
        return []
    titles: list[str] = []

    def add(paths):
        for path in paths:
            try:
                entry = _resolve(archive.get_entry_by_path(path))
            except KeyError:
                continue
            if entry.title not in titles:
                titles.append(entry.title)
            if len(titles) >= n:
                return True
        return False

    try:
        if archive.has_title_index and add(SuggestionSearcher(archive).suggest(q).getResults(0, n * 2)):
            return titles
        if archive.has_fulltext_index:
            add(Searcher(archive).search(Query().set_query(q)).getResults(0, n * 2))
    except RuntimeError:  # Xapian rejects some query strings; treat as no results
        pass
    return titles[:n]


class ZimBackend:
    """Exact title (MediaWiki near-match variants, redirects followed), else similar."""

    def __init__(self, path: str | Path, name: str | None = None):
        self.path = Path(path)
        self.archive = open_archive(self.path)
        self.name = name or f"zim:{self.path}"
        self._new_scheme = self.archive.has_new_namespace_scheme
        self._found: dict[str, SearchOutcome] = {}  # entity -> its outcome (the archive never changes)

    def _entry(self, title: str):
        a = self.archive
        try:
            return a.get_entry_by_title(title)
        except KeyError:
            pass
        path = article_path(title)
        for p in (path,) if self._new_scheme else (f"A/{path}", path):
            try:
                return a.get_entry_by_path(p)
            except KeyError:
                continue
        return None

    def search(self, entity: str) -> SearchOutcome:
        """The outcome for `entity`, worked out once per entity while it is among the last
        SEARCH_CACHE searched (an archive never changes: parsing its page is the cost of a
        search); each caller gets its own copy."""
        found = self._found.get(entity)
        if found is None:
            found = self._search(entity)
            if len(self._found) >= SEARCH_CACHE:  # (bounded: pages are large)
                self._found.clear()
            self._found[entity] = found
        return dataclasses.replace(found, similar=list(found.similar))

    def _search(self, entity: str) -> SearchOutcome:
        for variant in text.title_variants(entity, mediawiki=False):
            entry = self._entry(variant)
            if entry is None:
                continue
            entry = _resolve(entry)
            try:
                item = entry.get_item()
            except RuntimeError:
                continue
            if not item.mimetype.startswith("text/html"):
                continue
            return outcome_from_html(entry.title, bytes(item.content), lambda: self.similar(entity))
        return SearchOutcome("miss", similar=self.similar(entity))

    def similar(self, entity: str) -> list[str]:
        return similar_titles(self.archive, entity, 5)

    def close(self) -> None:
        self.archive = None
