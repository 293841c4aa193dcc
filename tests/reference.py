"""Where the original ReAct release's files are (../shared/reference/react-repo), if here.
Tests that read them skip cleanly when they are absent; they are never copied in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_CANDIDATES = [
    os.environ.get("REACT_REFERENCE_DIR"),
    Path(__file__).resolve().parent.parent.parent / "shared" / "reference" / "react-repo",
    Path.cwd().parent / "shared" / "reference" / "react-repo",
]


def reference_dir() -> Path | None:
    for c in _CANDIDATES:
        if c and (Path(c) / "prompts").is_dir():
            return Path(c)
    return None


def require_reference() -> Path:
    found = reference_dir()
    if found is None:
        pytest.skip("the original ReAct files (../shared/reference/react-repo) are not here")
    return found


def reference_prompts() -> Path:
    """The original prompt files' folder, or skip the test."""
    return require_reference() / "prompts"
