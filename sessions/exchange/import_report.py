"""What every import shares: `ImportFailed` (the file was rejected, nothing written),
`ImportReport` (what was written) and the size and depth limits of a file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sessions.store import StoreError

MAX_LINE_BYTES = 16 * 1024 * 1024  # one jsonl record (a version); far above any real one
MAX_FILE_BYTES = 64 * 1024 * 1024  # a prompt file / transcript is read whole
MAX_DEPTH = 64  # a record nests about 6 deep; env options and step info add a few levels
TOO_DEEP = "JSON nested too deeply (no record or prompt file is nested like this)"


class ImportFailed(StoreError, ValueError):
    """The file was rejected; nothing was written. The message names the line."""


@dataclass
class ImportReport:
    format: str
    path: str
    episodes: list[int] = field(default_factory=list)
    versions: int = 0
    steps: int = 0
    exemplar_set: str | None = None
    raw_entries: int = 0
    already_present: list[int] = field(default_factory=list)  # episodes a re-import found here (not copied)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _fail(line: int | None, reason: str) -> ImportFailed:
    return ImportFailed(f"line {line}: {reason}" if line else reason)
