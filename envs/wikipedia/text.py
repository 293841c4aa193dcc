"""Pure text functions shared by every backend: page HTML -> page text, sentence split,
first-5-sentence observation, lookup lists, title variants, observation strings.

They reproduce the original ReAct `WikiEnv` (wikienv.py) exactly where it is observable:
page text = all `<p>` texts, then all `<ul>` texts, each kept only with more than two
words, one per line; sentences = split on ". " with "." appended (so a paragraph's last
sentence ends ".." as in the paper's prompts). Its bugs are not kept: no unicode-escape
round trip, queries are encoded by the HTTP layer, and titles are resolved properly.
"""

from __future__ import annotations

import re
import unicodedata

import lxml.html

DISAMBIGUATION_MARK = "may refer to:"
# Characters MediaWiki never allows in a title (a `#` starts a section; `|[]{}<>` are markup).
_ILLEGAL_TITLE = re.compile(r"[#<>\[\]|{}\x00-\x1f\x7f]")
MAX_TITLE_BYTES = 255
MAX_ECHO = 300  # longest entity echoed back in a miss observation


def html_blocks(html: str | bytes) -> list[str]:
    """The original's `[p.get_text().strip() for p in soup.find_all("p") + soup.find_all("ul")]`
    with lxml: every paragraph's text, then every list's items one per line."""
    if isinstance(html, bytes):
        html = html.decode("utf-8", errors="replace")
    if not html.strip():
        return []
    try:
        root = lxml.html.document_fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return []
    for bad in root.xpath("//script|//style"):
        bad.drop_tree()
    paragraphs = ["".join(p.itertext()).strip() for p in root.iter("p")]
    lists = []
    for ul in root.iter("ul"):
        items = ["".join(li.itertext()).strip() for li in ul if li.tag == "li"]
        lists.append("\n".join(i for i in items if i).strip())
    return paragraphs + lists


def is_disambiguation(blocks: list[str]) -> bool:
    return any(DISAMBIGUATION_MARK in b for b in blocks)


def page_text(blocks: list[str]) -> str:
    """Keep blocks of more than two words, one per line (as the original builds `self.page`)."""
    out = []
    for b in blocks:
        if len(b.split(" ")) > 2:
            out.append(b if b.endswith("\n") else b + "\n")
    return "".join(out)


def sentences(page: str) -> list[str]:
    paragraphs = [p.strip() for p in page.split("\n") if p.strip()]
    parts: list[str] = []
    for p in paragraphs:
        parts += p.split(". ")
    return [s.strip() + "." for s in parts if s.strip()]


def page_observation(page: str) -> str:
    return " ".join(sentences(page)[:5])


def lookup_list(sents: list[str], keyword: str) -> list[str]:
    k = keyword.lower()
    return [s for s in sents if k in s.lower()]


def clean_observation(obs: str) -> str:
    """The notebook's `obs.replace('\\\\n', '')`: drop literal backslash-n sequences."""
    return obs.replace("\\n", "")


def _ucfirst(s: str) -> str:
    return s[:1].upper() + s[1:]


def normalize_title(entity: str) -> str:
    """MediaWiki title normalisation: underscores are spaces, runs of space collapse,
    the first letter is upper case; NFC like MediaWiki stores titles."""
    t = unicodedata.normalize("NFC", entity).replace("_", " ")
    t = " ".join(t.split())
    return _ucfirst(t)


def title_variants(entity: str, mediawiki: bool = True) -> list[str]:
    """Titles tried for an exact match, in order - MediaWiki's "Go" near-match rules
    (as typed, first letter up, all lower then first up, each word capitalised, upper).
    Empty when the entity cannot be a title (too long; with `mediawiki`, characters a
    MediaWiki title never holds - a ZIM's titles may hold them, e.g. "C# Quartet")."""
    t = " ".join(unicodedata.normalize("NFC", entity).replace("_", " ").split())
    if not t or len(t.encode("utf-8")) > MAX_TITLE_BYTES or (mediawiki and _ILLEGAL_TITLE.search(t)):
        return []
    cands = [t, _ucfirst(t), _ucfirst(t.lower()), " ".join(_ucfirst(w) for w in t.lower().split(" ")), t.upper()]
    seen: list[str] = []
    for c in cands:
        c = _ucfirst(c)  # the first letter of a title is always upper case on Wikipedia
        if c not in seen:
            seen.append(c)
    return seen


def search_query(entity: str) -> str:
    """What goes to a full-text engine: whitespace collapsed, at most 300 characters
    (CirrusSearch rejects longer queries)."""
    return " ".join(entity.split())[:300]


def echo(entity: str) -> str:
    return entity if len(entity) <= MAX_ECHO else entity[:MAX_ECHO] + "..."


def miss_observation(entity: str, similar: list[str], disambiguation: bool = False) -> str:
    """`Could not find X. Similar: [...]`. For a disambiguation page the original
    re-searched `[X]`, so its observation reads `Could not find [X]. ...` - kept."""
    shown = echo(entity)
    if disambiguation:
        shown = f"[{shown}]"
    return f"Could not find {shown}. Similar: {list(similar[:5])}."
