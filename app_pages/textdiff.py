"""Word-level diffs of old vs new text, and their safe HTML rendering (no Streamlit here).

The Compare page and the Editor's "what this edit replaced" both show diffs. Every piece of
text is `html.escape`d before any highlighting markup is added, so observations, model
output or imported text can never become tags, links or scripts.
"""

from __future__ import annotations

import difflib
import functools
import html
import re
from typing import Literal

Op = Literal["equal", "delete", "insert"]

_TOKEN = re.compile(r"\s+|[^\s]+")


def tokens(text: str | None) -> list[str]:
    """Words and the whitespace between them (joining the tokens gives the text back)."""
    return _TOKEN.findall(text or "")


def word_diff(old: str | None, new: str | None) -> list[tuple[Op, str]]:
    """The edit from `old` to `new` as (op, text) runs at word granularity.

    Joining the equal+delete runs gives `old`, joining equal+insert runs gives `new`."""
    a, b = tokens(old), tokens(new)
    out: list[tuple[Op, str]] = []

    def add(op: Op, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            add("equal", "".join(a[i1:i2]))
        else:
            add("delete", "".join(a[i1:i2]))
            add("insert", "".join(b[j1:j2]))
    return out


@functools.lru_cache(maxsize=256)  # (bounded: texts may be long; a page draws a few hundred diffs)
def diff_html(old: str | None, new: str | None) -> tuple[str, str]:
    """(old side, new side) as escaped HTML: deleted words struck on the old side,
    inserted words marked on the new side. Pure, so kept: every rerun of a page draws
    the same diffs again."""
    left, right = [], []
    for op, text in word_diff(old, new):
        t = html.escape(text)
        if op == "equal":
            left.append(t)
            right.append(t)
        elif op == "delete":
            left.append(f'<del class="rd-del">{t}</del>')
        else:
            right.append(f'<ins class="rd-ins">{t}</ins>')
    return "".join(left), "".join(right)


@functools.lru_cache(maxsize=256)  # (bounded: texts may be long; a page draws a few hundred diffs)
def inline_diff_html(old: str | None, new: str | None) -> str:
    """One escaped line: unchanged words once, deleted words struck, inserted words marked
    (an edit's old text shown once, not as "was", "before" and "after"). Pure, so kept."""
    tag = {"equal": "{}", "delete": '<del class="rd-del">{}</del>', "insert": '<ins class="rd-ins">{}</ins>'}
    return "".join(tag[op].format(html.escape(text)) for op, text in word_diff(old, new))


def esc(text: str | None) -> str:
    return html.escape(text or "")
