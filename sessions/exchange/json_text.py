"""Text that imported JSON may hold: Unicode only, so no lone surrogate reaches a digest or the database.

JSON's grammar lets a file escape one half of a surrogate pair on its own (`"a\\ud800b"`);
Python's json reads it as a string no encoder, database, file or terminal takes."""

from __future__ import annotations

import re
from typing import Any

_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # an escape of U+D800..U+DFFF: half of a pair, or a lone one


def lone_surrogate(raw: bytes, parsed: Any) -> str | None:
    """Why `parsed` (JSON read from `raw`) cannot be taken, naming its first lone surrogate
    (keys too), or None. The values are walked only when `raw` has such an escape: a valid
    pair decodes to one character."""
    if not _ESCAPE.search(raw):
        return None
    todo = [parsed]
    while todo:
        o = todo.pop()
        if isinstance(o, dict):
            todo.extend(o.keys())
            todo.extend(o.values())
        elif isinstance(o, list):
            todo.extend(o)
        elif isinstance(o, str):
            try:
                o.encode("utf-8")
            except UnicodeEncodeError as exc:
                return (
                    f"the text holds a lone surrogate \\u{ord(o[exc.start]):04x} (an escape of "
                    "\\ud800-\\udfff not in a pair), which is not Unicode"
                )
    return None
